//! The operator's files a CLI may not read, and the holes it needs in them.

use super::SandboxPaths;
use std::path::{Path, PathBuf};

impl SandboxPaths {
    /// What a CLI run for an epic phase or a session step is kept from: baton's store
    /// (`store_home`) and the operator's home, but the folders the CLI runs from (its package's
    /// `node_modules`, and Node's own installation when the CLI is a Node script: a CLI
    /// installed under `~/.nvm` or `~/.local` must still start).
    pub fn operator(program: &Path, store_home: &Path, allow_unconfined: bool) -> SandboxPaths {
        let mut read_denied = vec![store_home.to_path_buf()];
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from)
            && home.is_absolute()
        {
            read_denied.push(home);
        }
        let mut read_allowed: Vec<PathBuf> = install_root(program).into_iter().collect();
        if let Some(node) = node_prefix() {
            read_allowed.push(node);
        }
        SandboxPaths {
            writable: Vec::new(),
            read_denied,
            read_allowed,
            read_only: Vec::new(),
            allow_unconfined,
        }
    }
}

/// The folder a CLI's real file lives in: the nearest `node_modules` above it (its platform
/// binaries are sibling packages there), else its own folder.
fn install_root(program: &Path) -> Option<PathBuf> {
    let real = program.canonicalize().ok()?;
    real.ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .or_else(|| real.parent())
        .map(Path::to_path_buf)
}

/// Node's installation (`<prefix>` of `<prefix>/bin/node`), found on `PATH`.
fn node_prefix() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let node = std::env::split_paths(&path)
        .map(|d| d.join("node"))
        .find(|p| p.is_file())?;
    let real = node.canonicalize().ok()?;
    real.parent()?.parent().map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_install_root_is_the_node_modules_folder_holding_the_cli() {
        let dir = tempfile::tempdir().expect("dir");
        let bin = dir.path().join("lib/node_modules/@x/cli/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::write(bin.join("cli"), "").expect("write");
        let root = install_root(&bin.join("cli")).expect("root");
        assert_eq!(
            root,
            dir.path()
                .canonicalize()
                .expect("real")
                .join("lib/node_modules")
        );
        let plain = dir.path().join("opt/tool");
        std::fs::create_dir_all(&plain).expect("mkdir");
        std::fs::write(plain.join("t"), "").expect("write");
        assert_eq!(
            install_root(&plain.join("t")).expect("root"),
            plain.canonicalize().expect("real")
        );
    }
}
