//! What every git baton runs is told on its command line (which outranks every configuration
//! file, and is handed down to the git processes it starts) and what its environment holds.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

/// Configuration that would let a file in the tree run a program, or make git look into a
/// repository nested in the tree (whose own configuration the model wrote): an fsmonitor,
/// hooks (the repository's, a nested one's, `core.hooksPath`), submodules entered for status,
/// diff, fetch or push, and background maintenance (which runs hooks and takes minutes).
pub const HARDENING: [(&str, &str); 9] = [
    ("core.fsmonitor", "false"),
    ("core.hooksPath", "/dev/null"),
    ("submodule.recurse", "false"),
    ("diff.ignoreSubmodules", "all"),
    ("status.submoduleSummary", "false"),
    ("fetch.recurseSubmodules", "false"),
    ("push.recurseSubmodules", "no"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
];

/// `-c key=value` for each of [`HARDENING`].
pub fn config_args() -> Vec<String> {
    HARDENING
        .iter()
        .flat_map(|(k, v)| ["-c".to_string(), format!("{k}={v}")])
        .collect()
}

/// Variables of baton's environment git keeps when it talks to a remote: where programs and
/// the person's git configuration are, the locale, and what ssh, https and proxies need.
/// Everything else (model keys, the database URL and its password, `BATON_HOME`) is dropped.
pub const REMOTE_ENV: [&str; 27] = [
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "XDG_CONFIG_HOME",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "SSH_AUTH_SOCK",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_SSH_VARIANT",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_SSL_CAINFO",
    "GIT_SSL_CAPATH",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "http_proxy",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "all_proxy",
];

/// git for a repository no model writes (a worker's mirror of a remote, the person's
/// repository read for its remote and commit): not confined, since it may need the network and
/// the person's credentials, but with [`HARDENING`], a clean environment ([`REMOTE_ENV`]) and
/// no prompt. Add the subcommand and its arguments.
pub fn remote_command(dir: &Path) -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear()
        .envs(remote_env(std::env::vars_os()))
        .env("GIT_TERMINAL_PROMPT", "0");
    cmd.arg("-C").arg(dir).args(config_args());
    cmd
}

/// The variables of `env` that [`REMOTE_ENV`] keeps.
pub fn remote_env(env: impl Iterator<Item = (OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env.filter(|(k, _)| REMOTE_ENV.iter().any(|keep| k == keep))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_remote_git_keeps_what_ssh_and_https_need_and_no_secret() {
        let env = [
            ("PATH", "/usr/bin"),
            ("HOME", "/home/op"),
            ("SSH_AUTH_SOCK", "/run/agent"),
            ("https_proxy", "http://proxy:3128"),
            ("OPENAI_API_KEY", "sk-secret"),
            ("ANTHROPIC_API_KEY", "sk-ant"),
            ("BATON_HOME", "/srv/baton"),
            ("DATABASE_URL", "postgres://u:pw@db/baton"),
            ("PGPASSWORD", "pw"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<String> = remote_env(env.into_iter())
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(kept, ["PATH", "HOME", "SSH_AUTH_SOCK", "https_proxy"]);
        let args: Vec<String> = remote_command(Path::new("/"))
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.contains(&"core.fsmonitor=false".to_string()));
        assert!(args.contains(&"core.hooksPath=/dev/null".to_string()));
    }
}
