//! Package-relative path normalization shared by zip entries, directory walks and references
//! inside manifests and graphs. One function decides what "inside the package" means.

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathProblem {
    Empty,
    Nul,
    Absolute,
    DriveLetter,
    ParentSegment,
    EmptySegment,
}

impl PathProblem {
    pub fn describe(self) -> &'static str {
        match self {
            PathProblem::Empty => "the path is empty",
            PathProblem::Nul => "the path contains a NUL byte",
            PathProblem::Absolute => "the path is absolute",
            PathProblem::DriveLetter => "the path starts with a drive letter",
            PathProblem::ParentSegment => "the path contains a '..' segment",
            PathProblem::EmptySegment => "the path contains an empty or '.' segment",
        }
    }
}

/// Normalizes a package-relative path to `a/b/c` form.
///
/// Backslashes count as separators (archives made on Windows use them), a leading `./` is
/// dropped, and a trailing `/` is allowed (directory entries). Everything that could step
/// outside the package root is refused rather than resolved.
pub fn normalize(raw: &str) -> Result<String, PathProblem> {
    if raw.contains('\0') {
        return Err(PathProblem::Nul);
    }
    let unified = raw.replace('\\', "/");
    let mut rest = unified.as_str();
    while let Some(stripped) = rest.strip_prefix("./") {
        rest = stripped;
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return Err(PathProblem::Empty);
    }
    if rest.starts_with('/') {
        return Err(PathProblem::Absolute);
    }
    let bytes = rest.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(PathProblem::DriveLetter);
    }
    let mut out = String::with_capacity(rest.len());
    for segment in rest.split('/') {
        match segment {
            ".." => return Err(PathProblem::ParentSegment),
            "" | "." => return Err(PathProblem::EmptySegment),
            s => {
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(s);
            }
        }
    }
    Ok(out)
}

/// `name` with every character outside ASCII alphanumerics and `extra` replaced by `-`.
pub fn slug(name: &str, extra: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || extra.contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The directory part of a normalized path (`""` for a top-level file).
pub fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("")
}

/// Joins a normalized directory and a relative path.
pub fn join(dir: &str, rel: &str) -> String {
    if dir.is_empty() {
        rel.to_string()
    } else {
        format!("{dir}/{rel}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_relative_paths() {
        assert_eq!(normalize("steps/a.md").as_deref(), Ok("steps/a.md"));
        assert_eq!(normalize("./steps/a.md").as_deref(), Ok("steps/a.md"));
        assert_eq!(normalize("assets/").as_deref(), Ok("assets"));
        assert_eq!(normalize("steps\\a.md").as_deref(), Ok("steps/a.md"));
    }

    #[test]
    fn refuses_escapes() {
        assert_eq!(normalize("../x"), Err(PathProblem::ParentSegment));
        assert_eq!(normalize("a/../../x"), Err(PathProblem::ParentSegment));
        assert_eq!(normalize("..\\x"), Err(PathProblem::ParentSegment));
        assert_eq!(normalize("/etc/passwd"), Err(PathProblem::Absolute));
        assert_eq!(normalize("\\\\server\\share"), Err(PathProblem::Absolute));
        assert_eq!(normalize("C:/x"), Err(PathProblem::DriveLetter));
        assert_eq!(normalize("a//b"), Err(PathProblem::EmptySegment));
        assert_eq!(normalize("a/./b"), Err(PathProblem::EmptySegment));
        assert_eq!(normalize("a\0b"), Err(PathProblem::Nul));
        assert_eq!(normalize(""), Err(PathProblem::Empty));
    }
}
