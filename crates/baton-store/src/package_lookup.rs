//! A package as a person names it: a path when one exists, else an installed package by its
//! name, `name@version` or id. Every command that takes a package (and `baton serve`'s start
//! body) resolves it here, so a name that `baton package list` shows runs everywhere.

use crate::home::StoreError;
use crate::packages::{InstalledPackage, PackageStore};
use std::cmp::Ordering;
use std::path::{Path, PathBuf};

pub const PACKAGE_NOT_FOUND: &str = "PACKAGE_NOT_FOUND";

/// Where a named package was found.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    /// The directory or `.bmad` file to load.
    pub path: PathBuf,
    /// The installed package, when the name was not a path.
    pub installed: Option<InstalledPackage>,
    /// Other installed packages the name also matched (older versions or installs); the
    /// newest was taken.
    pub passed_over: Vec<String>,
}

impl Located {
    /// A line for people when the name chose among several installed packages.
    pub fn note(&self) -> Option<String> {
        let chosen = self.installed.as_ref()?;
        (!self.passed_over.is_empty()).then(|| {
            format!(
                "{} installed packages match; using the newest, {} (also installed: {}; name one as name@version or by its id)",
                self.passed_over.len() + 1,
                chosen.id,
                self.passed_over.join(", ")
            )
        })
    }
}

/// Why no package was found: what was looked for and where.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    #[error(
        "no package {given:?}: no file or folder at {tried}, and no package installed in {folder} is named {given:?}{installed}",
        tried = .tried.display(),
        folder = .folder.display(),
        installed = installed_list(.installed)
    )]
    NotFound {
        given: String,
        /// The path tried (made absolute).
        tried: PathBuf,
        /// The installed packages' folder.
        folder: PathBuf,
        /// The ids of the packages installed there.
        installed: Vec<String>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn installed_list(ids: &[String]) -> String {
    match ids {
        [] => " (none is installed)".to_string(),
        ids => format!(" (installed: {})", ids.join(", ")),
    }
}

impl LookupError {
    pub fn code(&self) -> &'static str {
        match self {
            LookupError::NotFound { .. } => PACKAGE_NOT_FOUND,
            LookupError::Store(_) => "STORE_IO",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            LookupError::NotFound { .. } => "pass a package directory (with bmad.json) or a .bmad file, or the name of an installed package (`baton package list`); install one with `baton package install <DIR|FILE>`".to_string(),
            LookupError::Store(_) => "check that BATON_HOME's packages folder is readable".to_string(),
        }
    }
}

/// Finds the package `given` names. A path that exists wins (relative paths against the
/// current directory); otherwise the packages installed under `home` are searched by exact
/// id, name, `name@version` or id prefix, and the newest match (highest version, then the
/// latest install) is taken.
pub fn locate(home: &Path, given: &Path) -> Result<Located, LookupError> {
    if given.exists() {
        return Ok(Located {
            path: given.to_path_buf(),
            installed: None,
            passed_over: Vec::new(),
        });
    }
    let store = PackageStore::new(home);
    let query = given.to_string_lossy();
    // A name has no directory part: `./x` or `a/b` that do not exist are paths that are wrong.
    let as_name = !query.is_empty() && !query.contains('/');
    let mut found = if as_name {
        store.find(&query)?
    } else {
        Vec::new()
    };
    found.sort_by(newest_first);
    let mut found = found.into_iter();
    match found.next() {
        Some(chosen) => Ok(Located {
            path: chosen.path.clone(),
            installed: Some(chosen),
            passed_over: found.map(|p| p.id).collect(),
        }),
        None => Err(LookupError::NotFound {
            given: query.into_owned(),
            tried: std::path::absolute(given).unwrap_or_else(|_| given.to_path_buf()),
            folder: store.dir().to_path_buf(),
            installed: store.list()?.into_iter().map(|p| p.id).collect(),
        }),
    }
}

/// Highest version first (numeric parts compared as numbers), then the latest install.
fn newest_first(a: &InstalledPackage, b: &InstalledPackage) -> Ordering {
    compare_versions(&b.version, &a.version).then_with(|| b.installed_at.cmp(&a.installed_at))
}

fn compare_versions(a: &str, b: &str) -> Ordering {
    let parts = |v: &str| -> Vec<(u64, String)> {
        v.split(['.', '-', '+'])
            .map(|p| (p.parse::<u64>().unwrap_or(0), p.to_string()))
            .collect()
    };
    parts(a).cmp(&parts(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_package::Package;

    fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/packages")
            .join(name)
    }

    #[test]
    fn a_path_that_exists_wins_over_an_installed_name() {
        let home = tempfile::tempdir().unwrap();
        let path = example("create-story-micro");
        let package = Package::load(&path).unwrap();
        PackageStore::new(home.path())
            .install(&package, "examples")
            .unwrap();
        let found = locate(home.path(), &path).unwrap();
        assert_eq!(found.path, path);
        assert!(found.installed.is_none());
    }

    #[test]
    fn an_installed_package_is_found_by_name_version_and_id() {
        let home = tempfile::tempdir().unwrap();
        let package = Package::load(&example("create-story-micro")).unwrap();
        let installed = PackageStore::new(home.path())
            .install(&package, "examples")
            .unwrap()
            .package;
        for query in [
            "create-story-micro".to_string(),
            format!("create-story-micro@{}", installed.version),
            installed.id.clone(),
        ] {
            let found = locate(home.path(), Path::new(&query)).unwrap();
            assert_eq!(found.path, installed.path, "{query}");
            assert_eq!(found.installed.as_ref().unwrap().id, installed.id);
            assert!(found.note().is_none());
        }
    }

    #[test]
    fn a_missing_package_says_what_was_looked_for_and_where() {
        let home = tempfile::tempdir().unwrap();
        let package = Package::load(&example("create-story-micro")).unwrap();
        let installed = PackageStore::new(home.path())
            .install(&package, "examples")
            .unwrap()
            .package;
        let e = locate(home.path(), Path::new("no-such-package")).unwrap_err();
        assert_eq!(e.code(), PACKAGE_NOT_FOUND);
        let text = e.to_string();
        assert!(text.contains("\"no-such-package\""), "{text}");
        assert!(
            text.contains(
                &std::path::absolute("no-such-package")
                    .unwrap()
                    .display()
                    .to_string()
            ),
            "{text}"
        );
        assert!(
            text.contains(&home.path().join("packages").display().to_string()),
            "{text}"
        );
        assert!(text.contains(&installed.id), "{text}");
        // A path with a folder part is never taken for a name.
        let e = locate(home.path(), Path::new("nowhere/create-story-micro")).unwrap_err();
        assert!(e.to_string().contains("nowhere/create-story-micro"), "{e}");
    }

    #[test]
    fn versions_compare_by_their_numbers() {
        assert_eq!(compare_versions("1.10.0", "1.9.0"), Ordering::Greater);
        assert_eq!(compare_versions("1.0.0", "1.0.0"), Ordering::Equal);
        assert_eq!(compare_versions("0.2", "0.10"), Ordering::Less);
    }
}
