//! Who runs a session's execution steps: baton's own tool loop (the default), or a
//! coding-agent CLI (`[session] executor = "claude-code" | "codex" | "opencode"` in
//! `baton.toml`, or `--executor NAME` over it), run as [`ExecutorConfig`] of
//! `[executors.<name>]` says. Gates and the build phase's calls stay with baton's model.

use baton_executor::ExecutorKind;
use baton_executor::config::ExecutorConfig;
use baton_ralph::error::{RalphError, Result};
use baton_store::ModelRecord;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

const CONFIG_FILE: &str = "baton.toml";

/// A CLI that runs the steps, with its `[executors.<name>]` settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepExecutor {
    pub kind: ExecutorKind,
    pub config: ExecutorConfig,
}

/// The `[session]` table: only the executor so far; anything else is a mistake.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionTable {
    executor: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct FileToml {
    session: Option<SessionTable>,
}

fn invalid(message: String) -> RalphError {
    RalphError::usage(
        "SESSION_CONFIG_INVALID",
        format!(
            "{message} (hint: the executors are baton (its own tool loop), claude-code, codex \
             and opencode; see docs/sessions.md)"
        ),
    )
}

/// The executor named `name` where `key` gives it (`[session] executor`, `--executor`).
pub fn parse(key: &str, name: &str) -> Result<ExecutorKind> {
    ExecutorKind::parse(name.trim())
        .ok_or_else(|| invalid(format!("{key} = {name:?} is not an executor")))
}

/// Who runs the steps of a session in `project`: `flag` (`--executor`) over `[session]
/// executor`; `None` for baton's own loop.
pub fn load(project: &Path, flag: Option<&str>) -> Result<Option<StepExecutor>> {
    let unreadable = |e: String| {
        RalphError::usage(
            "SESSION_CONFIG_INVALID",
            format!("{CONFIG_FILE} cannot be read: {e}"),
        )
    };
    let root =
        baton_autopilot::untrusted::open_root(project).map_err(|e| unreadable(e.to_string()))?;
    let limit = baton_autopilot::untrusted::limit::CONFIG;
    let text = match baton_autopilot::untrusted::read_in(&root, Path::new(CONFIG_FILE), limit) {
        Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Ok(None) => String::new(),
        Err(e) => return Err(unreadable(e.to_string())),
    };
    from_text(&text, flag)
}

/// [`load`] on the text of a `baton.toml`.
pub fn from_text(text: &str, flag: Option<&str>) -> Result<Option<StepExecutor>> {
    let bad = |e: toml::de::Error| invalid(format!("{CONFIG_FILE}: {}", e.to_string().trim()));
    let file: FileToml = toml::from_str(text).map_err(bad)?;
    let doc: toml::Table = toml::from_str(text).map_err(bad)?;
    let configured = file
        .session
        .and_then(|s| s.executor)
        .map(|name| parse(&format!("{CONFIG_FILE}: [session] executor"), &name))
        .transpose()?;
    let kind = match flag {
        Some(name) => Some(parse("--executor", name)?),
        None => configured,
    };
    let Some(kind) = kind.filter(|k| *k != ExecutorKind::Baton) else {
        return Ok(None);
    };
    let mut executors: BTreeMap<ExecutorKind, ExecutorConfig> =
        baton_executor::config::read_executors(&doc, Path::new(CONFIG_FILE))
            .map_err(|e| RalphError::usage(e.code(), format!("{e} (hint: {})", e.hint())))?;
    Ok(Some(StepExecutor {
        kind,
        config: executors.remove(&kind).unwrap_or_default(),
    }))
}

/// Whether a run's model record names a CLI (`<executor>:<model>`), not a model baton calls:
/// what continues a session must not take it for its own model.
pub fn names_a_cli(record: &ModelRecord) -> bool {
    ExecutorKind::CLIS
        .iter()
        .any(|k| record.name.starts_with(&format!("{}:", k.as_str())))
}

/// The exchanges a step run's CLI had with the model, in a `--record`/`--replay` folder
/// (beside the step's trace name, [`super::step_run::step_trace`]).
pub fn exchanges_name(index: usize, attempt: u32) -> String {
    format!("step-{index}.{attempt}.exchanges.jsonl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_overrides_the_setting_and_baton_is_no_cli() {
        let text = "[session]\nexecutor = \"codex\"\n\n[executors.claude-code]\nmodel = \"m\"\n";
        let codex = from_text(text, None).unwrap().unwrap();
        assert_eq!(codex.kind, ExecutorKind::Codex);
        assert_eq!(codex.config, ExecutorConfig::default());
        let claude = from_text(text, Some("claude-code")).unwrap().unwrap();
        assert_eq!(claude.config.model.as_deref(), Some("m"));
        assert_eq!(from_text(text, Some("baton")).unwrap(), None);
        assert_eq!(from_text("", None).unwrap(), None);
    }

    #[test]
    fn a_wrong_name_or_key_is_refused_with_a_code() {
        for (text, flag) in [
            ("[session]\nexecutor = \"gpt\"\n", None),
            ("[session]\nexecutr = \"codex\"\n", None),
            ("", Some("claude")),
            (
                "[session]\nexecutor = \"codex\"\n[executors.codex]\nmodle = \"x\"\n",
                None,
            ),
        ] {
            let e = from_text(text, flag).unwrap_err();
            assert!(
                e.code() == "SESSION_CONFIG_INVALID" || e.code() == "EXECUTOR_CONFIG_INVALID",
                "{text}: {e}"
            );
        }
    }

    #[test]
    fn a_cli_record_is_told_from_a_model() {
        let mut r = ModelRecord {
            name: "claude-code:claude-sonnet-4-5".into(),
            base_url: None,
            api: None,
            replay: false,
            trace: None,
        };
        assert!(names_a_cli(&r));
        r.name = "gpt-5".into();
        assert!(!names_a_cli(&r));
    }
}
