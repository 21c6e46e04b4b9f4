//! `[executors.<name>]` of `baton.toml`: how the operator runs each coding-agent CLI.

use crate::ExecutorKind;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One CLI's settings; every field may be left out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutorConfig {
    /// The CLI's program: a path, or a name looked up on `PATH` (default the CLI's usual name).
    pub command: Option<PathBuf>,
    /// The model the CLI asks for (default: the CLI's own choice).
    pub model: Option<String>,
    /// The real API's base URL the gateway forwards to (default the vendor's).
    pub upstream: Option<String>,
    /// The variable holding the operator's real key (default per CLI).
    pub api_key_env: Option<String>,
    /// Extra arguments the operator allows on the CLI's command line.
    #[serde(default)]
    pub args: Vec<String>,
}

impl ExecutorConfig {
    /// The upstream: configured, else the vendor's.
    pub fn upstream_or_default(&self, kind: ExecutorKind) -> Option<String> {
        self.upstream
            .clone()
            .or_else(|| kind.default_upstream().map(str::to_string))
    }

    /// The key's variable: configured, else the CLI's usual one.
    pub fn api_key_env_or_default(&self, kind: ExecutorKind) -> Option<String> {
        self.api_key_env
            .clone()
            .or_else(|| kind.default_api_key_env().map(str::to_string))
    }
}

/// A `[executors]` table baton cannot use, located by file and key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: [{key}]: {message}")]
pub struct ConfigError {
    pub file: PathBuf,
    /// `executors` or `executors.<name>`.
    pub key: String,
    pub message: String,
}

impl ConfigError {
    pub const CODE: &'static str = "EXECUTOR_CONFIG_INVALID";

    pub fn code(&self) -> &'static str {
        Self::CODE
    }

    pub fn hint(&self) -> String {
        format!(
            "fix [{}] in this file: [executors.<{}>] takes command, model, upstream, api_key_env and args (see docs/executors.md)",
            self.key,
            names()
        )
    }
}

fn names() -> String {
    ExecutorKind::CLIS.map(ExecutorKind::as_str).join("|")
}

/// The `[executors.<name>]` tables of a parsed `baton.toml` (`file` names it in errors); no
/// `[executors]` table is no error.
pub fn read_executors(
    doc: &toml::Table,
    file: &Path,
) -> Result<BTreeMap<ExecutorKind, ExecutorConfig>, ConfigError> {
    let error = |key: &str, message: String| ConfigError {
        file: file.to_path_buf(),
        key: key.to_string(),
        message,
    };
    let Some(table) = doc.get("executors") else {
        return Ok(BTreeMap::new());
    };
    let table = table
        .as_table()
        .ok_or_else(|| error("executors", "must be a table".into()))?;
    let mut out = BTreeMap::new();
    for (name, value) in table {
        let key = format!("executors.{name}");
        let kind = ExecutorKind::parse(name)
            .filter(|k| k.default_command().is_some())
            .ok_or_else(|| {
                error(
                    &key,
                    format!("unknown executor {name:?} (known: {})", names()),
                )
            })?;
        let config: ExecutorConfig = value
            .clone()
            .try_into()
            .map_err(|e: toml::de::Error| error(&key, e.message().to_string()))?;
        check(&config).map_err(|m| error(&key, m))?;
        out.insert(kind, config);
    }
    Ok(out)
}

fn check(config: &ExecutorConfig) -> Result<(), String> {
    if config
        .command
        .as_ref()
        .is_some_and(|c| c.as_os_str().is_empty())
    {
        return Err("command: must not be empty".into());
    }
    if config.model.as_ref().is_some_and(|m| m.trim().is_empty()) {
        return Err("model: must not be empty".into());
    }
    if let Some(url) = &config.upstream
        && !(url.starts_with("http://") || url.starts_with("https://"))
    {
        return Err(format!(
            "upstream: {url:?} is not an http:// or https:// URL"
        ));
    }
    if let Some(var) = &config.api_key_env {
        let valid = !var.is_empty()
            && !var.starts_with(|c: char| c.is_ascii_digit())
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "api_key_env: {var:?} is not an environment variable's name"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<BTreeMap<ExecutorKind, ExecutorConfig>, ConfigError> {
        let doc: toml::Table = toml::from_str(text).expect("toml");
        read_executors(&doc, Path::new("/p/baton.toml"))
    }

    #[test]
    fn each_cli_s_table_is_read_with_its_defaults() {
        let got = read(
            r#"
            [llm]
            model = "x"
            [executors.claude-code]
            command = "/opt/claude"
            model = "claude-sonnet-4-5"
            args = ["--max-turns", "40"]
            [executors.codex]
            upstream = "http://127.0.0.1:9/v1"
            api_key_env = "MY_OPENAI_KEY"
            "#,
        )
        .expect("valid");
        let claude = &got[&ExecutorKind::ClaudeCode];
        assert_eq!(claude.command.as_deref(), Some(Path::new("/opt/claude")));
        assert_eq!(claude.args, ["--max-turns", "40"]);
        assert_eq!(
            claude
                .upstream_or_default(ExecutorKind::ClaudeCode)
                .as_deref(),
            Some("https://api.anthropic.com")
        );
        assert_eq!(
            claude
                .api_key_env_or_default(ExecutorKind::ClaudeCode)
                .as_deref(),
            Some("ANTHROPIC_API_KEY")
        );
        let codex = &got[&ExecutorKind::Codex];
        assert_eq!(
            codex.api_key_env_or_default(ExecutorKind::Codex).as_deref(),
            Some("MY_OPENAI_KEY")
        );
        assert!(!got.contains_key(&ExecutorKind::Opencode));
        assert!(read("[llm]\nmodel = 'x'\n").expect("none").is_empty());
    }

    #[test]
    fn a_table_baton_cannot_use_is_refused_where_it_is() {
        for (text, key, says) in [
            (
                "[executors.claude-code]\nmodle = 'x'\n",
                "executors.claude-code",
                "unknown field `modle`",
            ),
            (
                "[executors.cursor]\n",
                "executors.cursor",
                "unknown executor",
            ),
            ("[executors.baton]\n", "executors.baton", "unknown executor"),
            ("executors = 3\n", "executors", "must be a table"),
            (
                "[executors.codex]\nupstream = 'api.openai.com'\n",
                "executors.codex",
                "not an http",
            ),
            (
                "[executors.codex]\napi_key_env = 'MY KEY'\n",
                "executors.codex",
                "environment variable",
            ),
            (
                "[executors.opencode]\nargs = 'x'\n",
                "executors.opencode",
                "invalid type",
            ),
        ] {
            let e = read(text).expect_err(text);
            assert_eq!(e.code(), "EXECUTOR_CONFIG_INVALID");
            assert_eq!(e.key, key, "{text}");
            assert!(e.to_string().contains(says), "{text}: {e}");
            assert!(e.to_string().starts_with("/p/baton.toml: "), "{e}");
            assert!(e.hint().contains(key), "{}", e.hint());
        }
    }
}
