//! A call's command, working directory and environment, checked before anything starts.

use crate::mounts::{Mount, MountPath, Mounts, parse};
use crate::policy::{TerminalSettings, within};
use crate::result::ToolError;
use cap_std::fs::PermissionsExt as _;
use serde_json::{Value, json};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const MAX_ENV_BYTES: usize = 64 * 1024;

/// A command name or path: no NUL, not empty, not absurdly long.
pub fn check_name(command: &str) -> Result<(), ToolError> {
    if command.trim().is_empty() {
        return Err(ToolError::invalid_args("command is empty"));
    }
    if command.contains('\0') || command.len() > 4096 {
        return Err(ToolError::invalid_args(
            "command must be a program name or path without NUL, at most 4096 bytes",
        ));
    }
    Ok(())
}

/// The working directory: a mount path under `@project` (default `@project`), inside the
/// allowed roots.
pub fn parse_cwd(raw: Option<&str>, t: &TerminalSettings) -> Result<MountPath, ToolError> {
    let raw = raw.unwrap_or("@project");
    let cwd = parse(raw).map_err(|e| {
        ToolError::new("CWD_NOT_ALLOWED", e.message)
            .with_details(json!({"reason": "not_a_project_path"}))
    })?;
    if cwd.mount != Mount::Project {
        return Err(ToolError::new(
            "CWD_NOT_ALLOWED",
            format!(
                "{} is not under @project: commands run in the project",
                cwd.display()
            ),
        )
        .with_details(json!({"reason": "not_a_project_path"})));
    }
    if let Some(roots) = &t.allowed_roots
        && !roots.iter().any(|r| within(&cwd.display(), r))
    {
        return Err(ToolError::new(
            "CWD_NOT_ALLOWED",
            format!("{} is outside the allowed roots", cwd.display()),
        )
        .with_details(json!({"reason": "outside_allowed_roots", "allowedRoots": roots})));
    }
    Ok(cwd)
}

/// Opens the working directory through the project capability (so a symlink out of the
/// project fails in the kernel) and returns its descriptor and host path.
pub fn open_cwd(mounts: &Mounts, cwd: &MountPath) -> Result<(OwnedFd, PathBuf), ToolError> {
    let dir = mounts
        .dir(Mount::Project)
        .open_dir(cwd.rel_path())
        .map_err(|e| {
            let why = crate::mounts::io_error(cwd, &e);
            ToolError::new(
                "CWD_NOT_ALLOWED",
                format!(
                    "{} cannot be the working directory: {}",
                    cwd.display(),
                    why.message
                ),
            )
            .with_details(json!({"reason": why.code}))
        })?;
    let file = dir.into_std_file();
    let host = if cwd.rel.is_empty() {
        mounts.host_root(Mount::Project).to_path_buf()
    } else {
        mounts.host_root(Mount::Project).join(&cwd.rel)
    };
    Ok((OwnedFd::from(file), host))
}

/// Finds the program: a name is looked up in the command's PATH, a path is taken relative to
/// the working directory, `@project/...` names a file of the project (opened through the
/// project capability, so a link out of the project is refused).
pub fn resolve(
    program: &Path,
    shown: &str,
    mounts: &Mounts,
    cwd: &Path,
    env: &[(String, String)],
) -> Result<PathBuf, ToolError> {
    let not_found = |why: &str| {
        ToolError::new("COMMAND_NOT_FOUND", format!("{shown}: {why}"))
            .with_details(json!({"command": shown}))
    };
    let text = program.to_string_lossy();
    if text.starts_with('@') {
        let path = parse(&text).map_err(|e| not_found(&e.message))?;
        if path.mount != Mount::Project {
            return Err(not_found(
                "only programs under @project can be named by a mount path",
            ));
        }
        let meta = mounts
            .dir(Mount::Project)
            .metadata(path.rel_path())
            .map_err(|e| not_found(&crate::mounts::io_error(&path, &e).message))?;
        if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
            return Err(not_found("not an executable file"));
        }
        return Ok(mounts.host_root(Mount::Project).join(&path.rel));
    }
    if text.contains('/') {
        let host = if program.is_absolute() {
            program.to_path_buf()
        } else {
            cwd.join(program)
        };
        return executable(&host)
            .then(|| program.to_path_buf())
            .ok_or_else(|| not_found("not an executable file"));
    }
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())
        .unwrap_or(DEFAULT_PATH);
    for dir in path.split(':').filter(|d| !d.is_empty()) {
        let candidate = Path::new(dir).join(program);
        if executable(&candidate) {
            return Ok(candidate);
        }
    }
    Err(ToolError::new(
        "COMMAND_NOT_FOUND",
        format!("{shown}: command not found in PATH"),
    )
    .with_details(json!({"command": shown, "path": path})))
}

fn executable(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The command's environment: PATH, LANG and the allowlisted variables from baton's own
/// environment, HOME and TMPDIR set by the caller, then the call's `env` (checked names).
pub fn environment(
    given: Option<&Value>,
    t: &TerminalSettings,
    parent: &[(String, String)],
) -> Result<Vec<(String, String)>, ToolError> {
    let from_parent = |name: &str| {
        parent
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            from_parent("PATH").unwrap_or_else(|| DEFAULT_PATH.into()),
        ),
        (
            "LANG".into(),
            from_parent("LANG").unwrap_or_else(|| "C.UTF-8".into()),
        ),
    ];
    for name in &t.env_allowlist {
        if let Some(v) = from_parent(name) {
            set(&mut env, name, v);
        }
    }
    let mut bytes = 0;
    if let Some(given) = given.and_then(Value::as_object) {
        for (k, v) in given {
            let Some(v) = v.as_str() else {
                return Err(ToolError::invalid_args(format!("env.{k} must be a string")));
            };
            if !valid_name(k) || v.contains('\0') {
                return Err(ToolError::invalid_args(format!(
                    "env: '{}' is not a valid variable (letters, digits and '_', no NUL in the value)",
                    crate::mounts::printable(k)
                )));
            }
            bytes += k.len() + v.len();
            if bytes > MAX_ENV_BYTES {
                return Err(ToolError::invalid_args("env is larger than 64 KB"));
            }
            set(&mut env, k, v.to_string());
        }
    }
    Ok(env)
}

pub fn set(env: &mut Vec<(String, String)>, name: &str, value: String) {
    match env.iter_mut().find(|(k, _)| k == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name.to_string(), value)),
    }
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.len() <= 256
}
