//! Files compiled into the binary and written once under baton's home
//! (`$BATON_HOME/bundled/<name>-<hash>/`), so they are real files without any install step.
//! A new version gets a new directory: what was made with an older binary keeps pointing at
//! the files it was built from. Serves the epic autopilot's phase package and the lifecycle
//! skills.

use baton_store::StoreError;
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// Every file of a bundle: (path below the bundle, bytes).
pub type Files = &'static [(&'static str, &'static [u8])];

/// `&[(path, include_bytes!(base + path)), …]`; `base` is relative to the calling file.
#[macro_export]
macro_rules! embed {
    ($base:literal; $($rel:literal),* $(,)?) => {
        &[$(($rel, include_bytes!(concat!($base, $rel)) as &[u8])),*]
    };
}

/// Why a bundle could not be written (each caller reports it with its own code).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("cannot create {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Written, yet no intact copy is in place (the folder cannot be replaced).
    #[error("no intact copy could be placed in {}", root.display())]
    Unavailable { root: PathBuf },
}

/// A named set of embedded files.
#[derive(Debug, Clone, Copy)]
pub struct Bundle {
    pub name: &'static str,
    pub files: Files,
}

impl Bundle {
    /// A short hash of every name and content: the version in the folder's name.
    fn digest(&self) -> String {
        let mut h = Sha256::new();
        for (name, bytes) in self.files {
            h.update(name.as_bytes());
            h.update([0]);
            h.update((bytes.len() as u64).to_le_bytes());
            h.update(bytes);
        }
        h.finalize()
            .iter()
            .take(6)
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// Whether every file is in `dir` with its bundled content (a person or a crash may have
    /// left a damaged copy).
    pub fn intact(&self, dir: &Path) -> bool {
        self.files
            .iter()
            .all(|(name, bytes)| fs::read(dir.join(name)).is_ok_and(|b| b == *bytes))
    }

    /// Writes the bundle into `home/bundled/` unless an intact copy is there (a damaged one is
    /// replaced); returns its directory.
    pub fn materialize(&self, home: &Path) -> Result<PathBuf, BundleError> {
        let root = home.join("bundled");
        let dir = root.join(format!("{}-{}", self.name, self.digest()));
        if self.intact(&dir) {
            return Ok(dir);
        }
        create_dir(&root)?;
        let staging = baton_store::durable::temp_sibling(&dir);
        if let Err(e) = self.write_all(&staging) {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
        // Another process may have placed an intact copy first: theirs is as good.
        if dir.exists() && !self.intact(&dir) {
            let _ = fs::remove_dir_all(&dir);
        }
        if fs::rename(&staging, &dir).is_err() {
            let _ = fs::remove_dir_all(&staging);
        }
        if !self.intact(&dir) {
            return Err(BundleError::Unavailable { root });
        }
        baton_store::durable::sync_dir(&root)?;
        Ok(dir)
    }

    /// Every file durably in `staging` (each synced, then its folder).
    fn write_all(&self, staging: &Path) -> Result<(), BundleError> {
        for (name, bytes) in self.files {
            let path = staging.join(name);
            if let Some(parent) = path.parent() {
                create_dir(parent)?;
            }
            baton_store::durable::atomic_write(&path, bytes)?;
        }
        Ok(())
    }
}

fn create_dir(path: &Path) -> Result<(), BundleError> {
    fs::create_dir_all(path).map_err(|source| BundleError::Create {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEST: Bundle = Bundle {
        name: "test-bundle",
        files: &[("a.md", b"a"), ("sub/b.md", b"b")],
    };

    #[test]
    fn materializes_once_and_repairs_a_damaged_copy() {
        let home = tempfile::tempdir().unwrap();
        let a = TEST.materialize(home.path()).unwrap();
        assert!(
            a.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("test-bundle-")
        );
        let b_md = a.join("sub/b.md");
        assert_eq!(fs::read(&b_md).unwrap(), b"b");
        let written = fs::metadata(&b_md).unwrap().modified().unwrap();
        assert_eq!(TEST.materialize(home.path()).unwrap(), a);
        assert_eq!(fs::metadata(&b_md).unwrap().modified().unwrap(), written);
        fs::write(&b_md, "damaged").unwrap();
        fs::remove_file(a.join("a.md")).unwrap();
        assert_eq!(TEST.materialize(home.path()).unwrap(), a);
        assert!(TEST.intact(&a));
        let leftovers: Vec<_> = fs::read_dir(home.path().join("bundled")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no staging folder is left behind");
    }

    /// Another content is another version, in another folder.
    #[test]
    fn the_folder_name_changes_with_the_content() {
        let other = Bundle {
            name: TEST.name,
            files: &[("a.md", b"a"), ("sub/b.md", b"B")],
        };
        assert_ne!(TEST.digest(), other.digest());
    }
}
