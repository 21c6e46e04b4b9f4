//! Installed packages: `$BATON_HOME/packages/<name>@<version>-<sha8>/`, content-addressed and
//! immutable. Installing the same content twice is a no-op; a run pins the id and digest.

use crate::durable::{self, sync_dir};
use crate::home::StoreError;
use crate::time::now_rfc3339;
use baton_package::{Diagnostics, Limits, Package, digest, files};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Written next to the package files; the leading dot keeps it out of the package content.
const RECORD: &str = ".baton-package.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstalledPackage {
    pub id: String,
    pub name: String,
    pub version: String,
    pub sha256: String,
    pub workflows: Vec<String>,
    pub installed_at: String,
    /// Where it was installed from, for people; never used to load it.
    pub source: String,
    #[serde(skip)]
    pub path: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstallOutcome {
    pub package: InstalledPackage,
    /// False when the same content was already installed.
    pub fresh: bool,
    /// A damaged copy of the same id was there and has been replaced.
    pub repaired: bool,
}

pub struct PackageStore {
    dir: PathBuf,
}

impl PackageStore {
    pub fn new(home: &Path) -> PackageStore {
        PackageStore {
            dir: home.join("packages"),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Copies a validated package into the store. Safe against concurrent installs of the same
    /// package: each writes a private temp directory and the first rename wins.
    ///
    /// A copy that is not whole (a file missing or changed, a record that lists other
    /// workflows, as installs made while running one workflow did) is replaced.
    pub fn install(&self, package: &Package, source: &str) -> Result<InstallOutcome, StoreError> {
        let id = package.install_id();
        let target = self.dir.join(&id);
        // A record that cannot be read is damage like any other: the copy is replaced.
        let existing = self.read_record(&target).unwrap_or(None);
        let damaged = match existing {
            Some(existing) if intact(&existing, package) => {
                return Ok(InstallOutcome {
                    package: existing,
                    fresh: false,
                    repaired: false,
                });
            }
            Some(_) => true,
            None => target.exists(),
        };
        fs::create_dir_all(&self.dir).map_err(StoreError::io("create", &self.dir))?;
        let staging = durable::temp_sibling(&target);
        let record = InstalledPackage {
            id: id.clone(),
            name: package.name().to_string(),
            version: package.version().to_string(),
            sha256: package.content_sha256().to_string(),
            workflows: package.workflow_ids().to_vec(),
            installed_at: now_rfc3339(),
            source: source.to_string(),
            path: target.clone(),
        };
        let staged = write_tree(&staging, package, &record);
        if let Err(e) = staged {
            let _ = remove_tree(&staging);
            return Err(e);
        }
        if damaged {
            // Moved aside first so the rename below publishes the new copy in one step; another
            // installer may have moved it already.
            let aside = durable::temp_sibling(&target);
            if fs::rename(&target, &aside).is_ok() {
                let _ = remove_tree(&aside);
            }
        }
        match fs::rename(&staging, &target) {
            Ok(()) => {
                sync_dir(&self.dir)?;
                Ok(InstallOutcome {
                    package: record,
                    fresh: true,
                    repaired: damaged,
                })
            }
            Err(e) => {
                let _ = remove_tree(&staging);
                // Lost a race with another installer of the same content: theirs is as good.
                match self.read_record(&target)? {
                    Some(existing) if intact(&existing, package) => Ok(InstallOutcome {
                        package: existing,
                        fresh: false,
                        repaired: false,
                    }),
                    _ => Err(StoreError::io("install", &target)(e)),
                }
            }
        }
    }

    /// Installed packages, sorted by name then version.
    pub fn list(&self) -> Result<Vec<InstalledPackage>, StoreError> {
        let entries = match fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("list", &self.dir)(e)),
        };
        let mut out = Vec::new();
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue; // staging directories of installs in progress
            }
            if let Some(p) = self.read_record(&entry.path())? {
                out.push(p);
            }
        }
        out.sort_by(|a, b| (&a.name, &a.version, &a.id).cmp(&(&b.name, &b.version, &b.id)));
        Ok(out)
    }

    /// Finds an installed package by exact id, or by unique `name` / `name@version` / id prefix.
    pub fn find(&self, query: &str) -> Result<Vec<InstalledPackage>, StoreError> {
        let all = self.list()?;
        if let Some(exact) = all.iter().find(|p| p.id == query) {
            return Ok(vec![exact.clone()]);
        }
        Ok(all
            .into_iter()
            .filter(|p| {
                p.name == query
                    || format!("{}@{}", p.name, p.version) == query
                    || p.id.starts_with(query)
            })
            .collect())
    }

    fn read_record(&self, dir: &Path) -> Result<Option<InstalledPackage>, StoreError> {
        let path = dir.join(RECORD);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("read", &path)(e)),
        };
        let mut record: InstalledPackage =
            serde_json::from_slice(&bytes).map_err(|e| StoreError::Damaged {
                id: dir
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                reason: format!("{RECORD}: {e}"),
            })?;
        record.path = dir.to_path_buf();
        Ok(Some(record))
    }
}

/// Whether the installed copy `record` describes holds exactly `package`: the record names
/// its content and all its workflows, and the files on disk have that content digest (which
/// a `.bmad`'s stamped `integrity` does not change, so the directory and its archive agree).
fn intact(record: &InstalledPackage, package: &Package) -> bool {
    if record.sha256 != package.content_sha256() || record.workflows != package.workflow_ids() {
        return false;
    }
    let mut diags = Diagnostics::default();
    files::read_package(&record.path, &Limits::default(), &mut diags)
        .is_some_and(|on_disk| digest::content_digest(&on_disk) == record.sha256)
}

fn write_tree(root: &Path, package: &Package, record: &InstalledPackage) -> Result<(), StoreError> {
    fs::create_dir_all(root).map_err(StoreError::io("create", root))?;
    let mut dirs = std::collections::BTreeSet::from([root.to_path_buf()]);
    for (rel, bytes) in package.files().iter() {
        let path = root.join(rel);
        let parent = path.parent().unwrap_or(root);
        fs::create_dir_all(parent).map_err(StoreError::io("create", parent))?;
        dirs.extend(
            parent
                .ancestors()
                .take_while(|a| a.starts_with(root))
                .map(Path::to_path_buf),
        );
        write_read_only(&path, bytes)?;
    }
    let json = serde_json::to_vec_pretty(record).map_err(|e| StoreError::Damaged {
        id: record.id.clone(),
        reason: e.to_string(),
    })?;
    write_read_only(&root.join(RECORD), &json)?;
    // Deepest first, so every new entry is durable before the rename publishes the tree.
    for dir in dirs.iter().rev() {
        sync_dir(dir)?;
    }
    Ok(())
}

fn write_read_only(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let mut file = fs::File::create(path).map_err(StoreError::io("create", path))?;
    file.write_all(bytes)
        .map_err(StoreError::io("write", path))?;
    file.sync_all().map_err(StoreError::io("sync", path))?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o444))
        .map_err(StoreError::io("protect", path))
}

fn remove_tree(dir: &Path) -> std::io::Result<()> {
    fs::remove_dir_all(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/packages")
            .join(name)
    }

    #[test]
    fn install_is_idempotent_and_listed() {
        let home = tempfile::tempdir().unwrap();
        let store = PackageStore::new(home.path());
        let package = Package::load(&example("create-story-micro")).unwrap();
        let first = store.install(&package, "examples").unwrap();
        assert!(first.fresh);
        assert!(first.package.id.starts_with("create-story-micro@1.0.0-"));
        let again = store.install(&package, "examples").unwrap();
        assert!(!again.fresh);
        assert_eq!(again.package.installed_at, first.package.installed_at);
        let listed = store.list().unwrap();
        assert_eq!(listed.len(), 1);
        // The installed copy is itself a valid package with the same content digest.
        let reloaded = Package::load(&listed[0].path).unwrap();
        assert_eq!(reloaded.content_sha256(), package.content_sha256());
        let meta = fs::metadata(listed[0].path.join("bmad.json")).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o222,
            0,
            "installed files are read-only"
        );
        assert_eq!(store.find("create-story-micro").unwrap().len(), 1);
    }

    /// Installs made while running one workflow recorded only that one; a copy missing a file
    /// or holding a changed one is not the package its id names. Installing again repairs both.
    #[test]
    fn a_damaged_or_partial_copy_is_replaced() {
        let home = tempfile::tempdir().unwrap();
        let store = PackageStore::new(home.path());
        let path = example("docs-kit");
        let one = baton_package::validate_path(
            &path,
            &baton_package::ValidateOptions {
                workflow: Some("write-adr".into()),
                ..Default::default()
            },
        )
        .package
        .unwrap();
        let first = store.install(&one, "t").unwrap();
        assert_eq!(first.package.workflows, ["write-readme", "write-adr"]);

        let package = Package::load(&path).unwrap();
        let dir = first.package.path.clone();
        let record_path = dir.join(RECORD);
        let mut record: serde_json::Value =
            serde_json::from_slice(&fs::read(&record_path).unwrap()).unwrap();
        record["workflows"] = serde_json::json!(["write-adr"]);
        fs::set_permissions(&record_path, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&record_path, serde_json::to_vec(&record).unwrap()).unwrap();
        let repaired = store.install(&package, "t").unwrap();
        assert!(repaired.fresh && repaired.repaired);
        assert_eq!(
            store.list().unwrap()[0].workflows,
            ["write-readme", "write-adr"]
        );

        fs::remove_file(dir.join("bmad.json")).unwrap();
        assert!(store.install(&package, "t").unwrap().repaired);
        let agents = dir.join("agents.json");
        fs::set_permissions(&agents, fs::Permissions::from_mode(0o644)).unwrap();
        fs::write(&agents, "{}").unwrap();
        assert!(store.install(&package, "t").unwrap().repaired);
        assert_eq!(
            Package::load(&dir).unwrap().content_sha256(),
            package.content_sha256()
        );
        let again = store.install(&package, "t").unwrap();
        assert!(!again.fresh && !again.repaired);
        assert_eq!(
            fs::read_dir(store.dir()).unwrap().count(),
            1,
            "nothing left aside"
        );
    }

    #[test]
    fn odd_names_install_under_safe_listed_ids() {
        let home = tempfile::tempdir().unwrap();
        let store = PackageStore::new(home.path());
        for (name, id_start) in [
            (".hidden", "hidden@1.0.0-"),
            ("-rf", "rf@1.0.0-"),
            ("Crème brûlée", "Creme-brulee@1.0.0-"),
            ("故事", "%E6%95%85%E4%BA%8B@1.0.0-"),
        ] {
            let src = home.path().join("src");
            let _ = fs::remove_dir_all(&src);
            baton_testkit::copy_dir(&example("bug-triage"), &src);
            let manifest = src.join("bmad.json");
            let mut doc: serde_json::Value =
                serde_json::from_slice(&fs::read(&manifest).unwrap()).unwrap();
            doc["name"] = name.into();
            fs::write(&manifest, serde_json::to_vec(&doc).unwrap()).unwrap();
            let package = Package::load(&src).unwrap();
            let installed = store.install(&package, "t").unwrap().package;
            assert!(
                installed.id.starts_with(id_start),
                "{name}: {}",
                installed.id
            );
            assert_eq!(installed.path, store.dir().join(&installed.id));
            // A leading dot would hide the package from `list` (staging directories look so).
            let found = store.find(name).unwrap();
            assert_eq!(found.len(), 1, "{name} is listed");
            assert_eq!(found[0].id, installed.id);
        }
        assert_eq!(store.list().unwrap().len(), 4);
    }

    #[test]
    fn concurrent_installs_of_the_same_package_agree() {
        let home = tempfile::tempdir().unwrap();
        let package = Package::load(&example("bug-triage")).unwrap();
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| PackageStore::new(home.path()).install(&package, "t")))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap().unwrap())
                .collect()
        });
        assert_eq!(results.iter().filter(|r| r.fresh).count(), 1);
        let store = PackageStore::new(home.path());
        assert_eq!(store.list().unwrap().len(), 1);
        assert_eq!(
            fs::read_dir(store.dir()).unwrap().count(),
            1,
            "no staging directory left behind"
        );
    }
}
