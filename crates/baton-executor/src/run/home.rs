//! The per-run home a CLI gets (`<run_dir>/home`, `TMPDIR` beneath it), seeded with the
//! adapter's files.

use std::path::{Component, Path, PathBuf};

/// Makes `home` and `home/tmp` and writes each seed file that is not there yet (a resumed
/// session keeps what the CLI wrote since).
pub fn prepare(home: &Path, files: &[(PathBuf, Vec<u8>)]) -> std::io::Result<PathBuf> {
    let tmp = home.join("tmp");
    std::fs::create_dir_all(&tmp)?;
    for (relative, content) in files {
        if !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
        {
            return Err(std::io::Error::other(format!(
                "a seed file must stay inside the home: {}",
                relative.display()
            )));
        }
        let path = home.join(relative);
        if path.symlink_metadata().is_ok() {
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, content)?;
    }
    Ok(tmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_home_is_seeded_once_and_a_seed_cannot_leave_it() {
        let dir = tempfile::tempdir().expect("dir");
        let home = dir.path().join("home");
        let files = vec![(PathBuf::from(".cli/config.json"), b"{}".to_vec())];
        let tmp = prepare(&home, &files).expect("prepare");
        assert!(tmp.is_dir());
        assert_eq!(
            std::fs::read(home.join(".cli/config.json")).expect("seed"),
            b"{}"
        );
        std::fs::write(home.join(".cli/config.json"), "changed by the CLI").expect("write");
        prepare(&home, &files).expect("again");
        assert_eq!(
            std::fs::read_to_string(home.join(".cli/config.json")).expect("kept"),
            "changed by the CLI"
        );
        let escape = vec![(PathBuf::from("../out"), Vec::new())];
        assert!(prepare(&home, &escape).is_err());
        assert!(!dir.path().join("out").exists());
    }
}
