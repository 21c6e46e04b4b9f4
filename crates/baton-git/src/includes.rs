//! A configuration file git reads may include others (`[include] path`, `[includeIf …]
//! path`); one inside the work tree is the model's to write, so baton's git refuses to run on
//! such a repository. The files are read here, not by git, so nothing they say runs.

use crate::error::{GIT_CONFIG_INCLUDES_TREE, GitError};
use crate::repo::RepoDirs;
use std::path::{Component, Path, PathBuf};

/// Included files are followed this deep (git's own limit is 10).
const DEPTH: usize = 10;
/// A configuration file larger than this is not read (git would read it; baton refuses).
const FILE_MAX: u64 = 1 << 20;

/// The `path` values of `[include]` and `[includeIf "…"]` sections of a git configuration
/// file.
pub fn include_paths(text: &str) -> Vec<String> {
    let mut section = String::new();
    let mut found = Vec::new();
    for raw in text.lines() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix('[') {
            // `[include]`, `[includeIf "gitdir:…"]`, the old `[includeIf.gitdir:…]`.
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            section = name.to_ascii_lowercase();
            // A key may follow the header on the same line.
            let Some(after) = rest.split_once(']').map(|(_, a)| a.trim()) else {
                continue;
            };
            if after.is_empty() {
                continue;
            }
            if let Some(v) = path_value(after)
                && (section == "include" || section == "includeif")
            {
                found.push(v);
            }
            continue;
        }
        if (section == "include" || section == "includeif")
            && let Some(v) = path_value(line)
        {
            found.push(v);
        }
    }
    found
}

/// The value of a `path = …` line, unquoted, without a trailing comment.
fn path_value(line: &str) -> Option<String> {
    let (key, value) = line.split_once('=')?;
    if !key.trim().eq_ignore_ascii_case("path") {
        return None;
    }
    let value = value.trim();
    let value = if let Some(quoted) = value.strip_prefix('"') {
        quoted.split('"').next().unwrap_or_default()
    } else {
        value
            .split([';', '#'])
            .next()
            .unwrap_or_default()
            .trim_end()
    };
    (!value.is_empty()).then(|| value.to_string())
}

/// `path` without `.` and `..` (resolved lexically: the file may not exist yet).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Where an include names, from the file `from` that holds it.
fn resolve(value: &str, from: &Path, home: Option<&Path>) -> Option<PathBuf> {
    let path = if let Some(rest) = value.strip_prefix("~/") {
        home?.join(rest)
    } else if Path::new(value).is_absolute() {
        PathBuf::from(value)
    } else {
        from.parent()?.join(value)
    };
    // Through the links that exist, so a link out of the tree or into it counts as where it
    // leads.
    let normal = normalize(&path);
    let mut existing = normal.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        rest.push(existing.file_name()?.to_os_string());
        if !existing.pop() {
            return Some(normal);
        }
    }
    let mut real = existing.canonicalize().ok()?;
    for part in rest.iter().rev() {
        real.push(part);
    }
    Some(real)
}

/// Refuses (`GIT_CONFIG_INCLUDES_TREE`) when a configuration file git reads for this
/// repository — the person's `global` one, the repository's own and its worktree's — includes
/// a file inside the work tree, directly or through another include.
pub fn check(dirs: &RepoDirs, global: Option<&Path>, home: Option<&Path>) -> Result<(), GitError> {
    let mut files: Vec<(PathBuf, usize)> =
        global.map(|g| (g.to_path_buf(), 0)).into_iter().collect();
    files.push((dirs.common_dir.join("config"), 0));
    files.push((dirs.common_dir.join("config.worktree"), 0));
    if dirs.git_dir != dirs.common_dir {
        files.push((dirs.git_dir.join("config.worktree"), 0));
    }
    let mut seen = 0usize;
    while let Some((file, depth)) = files.pop() {
        seen += 1;
        if seen > 64 {
            break;
        }
        let Ok(meta) = std::fs::metadata(&file) else {
            continue;
        };
        if !meta.is_file() || meta.len() > FILE_MAX {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        for value in include_paths(&text) {
            let Some(target) = resolve(&value, &file, home) else {
                continue;
            };
            if target.starts_with(&dirs.work_tree) && !dirs.in_repository(&target) {
                return Err(GitError::new(
                    GIT_CONFIG_INCLUDES_TREE,
                    format!(
                        "{} includes {value}, a file inside the work tree: whatever runs in the tree could rewrite git's configuration",
                        file.display()
                    ),
                )
                .hint("include a file outside the project (or under .git/), or remove the include"));
            }
            if depth + 1 < DEPTH {
                files.push((target, depth + 1));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn include_sections_are_read_in_every_spelling() {
        let text = "[core]\n\tpath = not-this\n[include]\n\tpath = a.inc\n\
                    [includeIf \"gitdir:~/w/\"]\n  PATH = \"b c.inc\" ; note\n\
                    [includeif.onbranch:main]\npath=d.inc # c\n[user]\npath = e\n\
                    [include] path = f.inc\n";
        assert_eq!(include_paths(text), ["a.inc", "b c.inc", "d.inc", "f.inc"]);
    }

    fn repo(root: &Path) -> RepoDirs {
        let tree = root.join("tree");
        std::fs::create_dir_all(tree.join(".git")).unwrap();
        std::fs::write(tree.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        RepoDirs::resolve(&tree).unwrap()
    }

    #[test]
    fn an_include_of_a_file_in_the_tree_is_refused_and_one_beside_it_is_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        let config = dirs.common_dir.join("config");
        std::fs::write(&config, "[include]\n\tpath = ../team.gitconfig\n").unwrap();
        let e = check(&dirs, None, None).unwrap_err();
        assert_eq!(e.code, GIT_CONFIG_INCLUDES_TREE);
        assert!(e.message.contains("team.gitconfig"), "{e}");
        // Beneath .git (the repository's own files) is not the tree.
        std::fs::write(&config, "[include]\n\tpath = extra.gitconfig\n").unwrap();
        check(&dirs, None, None).unwrap();
        // Outside the tree, followed: an include of the tree from there is refused too.
        let outside = tmp.path().join("shared.gitconfig");
        std::fs::write(&outside, "[includeIf \"gitdir:/\"]\npath = tree/x.cfg\n").unwrap();
        std::fs::write(
            &config,
            format!("[include]\n\tpath = {}\n", outside.display()),
        )
        .unwrap();
        assert_eq!(
            check(&dirs, None, None).unwrap_err().code,
            GIT_CONFIG_INCLUDES_TREE
        );
    }

    #[test]
    fn an_include_that_is_a_fifo_a_huge_file_or_a_loop_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        let fifo = tmp.path().join("fifo.cfg");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let huge = tmp.path().join("huge.cfg");
        std::fs::File::create(&huge)
            .unwrap()
            .set_len(4 << 30)
            .unwrap();
        let looped = tmp.path().join("loop.cfg");
        std::fs::write(&looped, format!("[include]\npath = {}\n", looped.display())).unwrap();
        std::fs::write(
            dirs.common_dir.join("config"),
            format!(
                "[include]\npath = {}\npath = {}\npath = {}\n",
                fifo.display(),
                huge.display(),
                looped.display()
            ),
        )
        .unwrap();
        // Returns (a read of the FIFO would block forever, of the file take minutes).
        check(&dirs, None, None).unwrap();
    }

    #[test]
    fn the_persons_global_file_and_a_home_relative_include_are_checked() {
        let tmp = tempfile::tempdir().unwrap();
        let dirs = repo(tmp.path());
        let global = tmp.path().join("gitconfig");
        std::fs::write(&global, "[include]\npath = ~/tree/evil\n").unwrap();
        let e = check(&dirs, Some(&global), Some(tmp.path())).unwrap_err();
        assert_eq!(e.code, GIT_CONFIG_INCLUDES_TREE);
        std::fs::write(&global, "[include]\npath = ~/elsewhere\n").unwrap();
        check(&dirs, Some(&global), Some(tmp.path())).unwrap();
    }
}
