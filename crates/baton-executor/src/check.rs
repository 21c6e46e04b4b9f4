//! What `baton doctor` and `baton executors` tell about the coding-agent CLIs: which are
//! installed, at which version, with which settings ([`survey`]); and a real one-file task run
//! through the gateway against the configured upstream ([`check`]).

use crate::config::ExecutorConfig;
use crate::run::{Job, SandboxPaths};
use crate::{Event, ExecutorKind};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The file the check's task writes, and what it must hold.
pub const CHECK_FILE: &str = "baton-check.txt";
const CHECK_WORD: &str = "ok";
const CHECK_PROMPT: &str = "This is a check of your set-up. Run this shell command in your working directory: `echo ok > baton-check.txt`. Then stop with a one-line summary. Do nothing else.";

/// One CLI as this machine and `baton.toml` have it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Surveyed {
    pub name: &'static str,
    pub program: Option<PathBuf>,
    pub version: Option<String>,
    /// Why it is not usable (not found, no version).
    pub problem: Option<String>,
    pub upstream: Option<String>,
    pub api_key_env: Option<String>,
    /// Whether that variable is set (its value is never shown).
    pub key_set: bool,
    pub model: String,
    pub configured: bool,
}

/// Every CLI, with `configs` (`[executors.<name>]`); their versions asked side by side (a Node
/// CLI takes about half a second to start).
pub fn survey(configs: &BTreeMap<ExecutorKind, ExecutorConfig>) -> Vec<Surveyed> {
    std::thread::scope(|s| {
        let asked: Vec<_> = ExecutorKind::CLIS
            .iter()
            .map(|&kind| s.spawn(move || surveyed(kind, configs)))
            .collect();
        asked.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

fn surveyed(kind: ExecutorKind, configs: &BTreeMap<ExecutorKind, ExecutorConfig>) -> Surveyed {
    let config = configs.get(&kind).cloned().unwrap_or_default();
    let var = config.api_key_env_or_default(kind);
    let found = crate::find::locate(kind, config.command.as_deref());
    let (program, version, problem) = match found {
        Ok(p) => match crate::find::version(kind, &p, crate::find::VERSION_TIMEOUT) {
            Ok(v) => (Some(p), Some(v), None),
            Err(e) => (Some(p), None, Some(e.to_string())),
        },
        Err(e) => (None, None, Some(e.to_string())),
    };
    Surveyed {
        name: kind.as_str(),
        program,
        version,
        problem,
        upstream: config.upstream_or_default(kind),
        key_set: var
            .as_deref()
            .is_some_and(|v| std::env::var(v).is_ok_and(|k| !k.trim().is_empty())),
        api_key_env: var,
        model: config
            .model
            .clone()
            .unwrap_or_else(|| crate::task::default_model(kind).to_string()),
        configured: configs.contains_key(&kind),
    }
}

/// What `baton executors check NAME` found.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckReport {
    pub name: &'static str,
    pub program: PathBuf,
    pub version: Option<String>,
    pub upstream: String,
    pub model: String,
    /// Whether the CLI wrote the check file with its own tool.
    pub passed: bool,
    pub exit_code: Option<i32>,
    /// Model requests that went through the gateway.
    pub exchanges: u64,
    pub tool_calls: u64,
    pub millis: u64,
    /// The sandbox layers it ran under (empty: unconfined).
    pub confinement: Vec<(String, String)>,
    /// Why it did not pass.
    pub problem: Option<String>,
}

/// Why a check could not start.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Find(#[from] crate::find::FindError),
    #[error(transparent)]
    Key(#[from] crate::task::KeyMissing),
    #[error(transparent)]
    Run(#[from] crate::run::ExecutorError),
    #[error("the check's folder: {0}")]
    Io(#[from] std::io::Error),
}

impl CheckError {
    pub fn code(&self) -> &'static str {
        match self {
            CheckError::Find(e) => e.code(),
            CheckError::Key(_) => crate::task::KeyMissing::CODE,
            CheckError::Run(e) => e.code(),
            CheckError::Io(_) => "EXECUTOR_RUN_FAILED",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            CheckError::Find(e) => e.hint(),
            CheckError::Key(e) => e.hint(),
            CheckError::Run(e) => e.hint(),
            CheckError::Io(_) => {
                "check the free space and permissions of the temporary folder".into()
            }
        }
    }
}

/// Runs the one-file task with `kind` in a fresh folder under `scratch`, through the gateway
/// against the configured upstream with the operator's key, confined as a phase would be (no
/// read of `store_home` nor of the operator's home; `allow_unconfined`: where this system
/// cannot confine it, run it anyway).
pub async fn check(
    kind: ExecutorKind,
    config: &ExecutorConfig,
    scratch: &Path,
    store_home: &Path,
    allow_unconfined: bool,
    on_event: &mut (dyn FnMut(&Event) + Send),
) -> Result<CheckReport, CheckError> {
    let program = crate::find::locate(kind, config.command.as_deref())?;
    let version = crate::find::version(kind, &program, crate::find::VERSION_TIMEOUT).ok();
    let upstream = config.upstream_or_default(kind).unwrap_or_default();
    let var = config.api_key_env_or_default(kind).unwrap_or_default();
    let mode = crate::task::live_mode(kind, upstream.clone(), &var)?;
    let model = config
        .model
        .clone()
        .unwrap_or_else(|| crate::task::default_model(kind).to_string());
    let workdir = scratch.join("work");
    std::fs::create_dir_all(&workdir)?;
    let workdir = workdir.canonicalize()?;
    let run_dir = scratch.join("run");
    let adapter = kind
        .adapter()
        .ok_or(crate::find::FindError::NotACli { kind })?;
    let started = Instant::now();
    let mut tool_calls = 0u64;
    let mut count = |e: &Event| {
        if matches!(e, Event::ToolCall { .. }) {
            tool_calls += 1;
        }
        on_event(e);
    };
    let outcome = crate::run::run(
        Job {
            adapter,
            program: &program,
            workdir: &workdir,
            run_dir: &run_dir,
            model: &model,
            prompt: CHECK_PROMPT,
            resume: None,
            extra_args: &config.args,
            mode,
            meter: None,
            // Small enough for a check; the gateway keeps the request valid under it.
            max_output_tokens: Some(4_096),
            sandbox: SandboxPaths::operator(&program, store_home, allow_unconfined),
        },
        &mut count,
    )
    .await?;
    let written = std::fs::read_to_string(workdir.join(CHECK_FILE)).unwrap_or_default();
    let passed = written.trim() == CHECK_WORD && outcome.exit_code == Some(0);
    let problem = (!passed).then(|| {
        let said = match &outcome.result {
            Some(Event::Result { text, .. }) => format!(": {}", crate::task::clip(text)),
            _ => String::new(),
        };
        if outcome.exchanges == 0 {
            format!(
                "the CLI made no model request through the gateway (exit code {:?}){said}; see {}",
                outcome.exit_code,
                run_dir.join("stderr.log").display()
            )
        } else {
            format!(
                "the CLI did not write {CHECK_FILE} with `{CHECK_WORD}` (exit code {:?}){said}",
                outcome.exit_code
            )
        }
    });
    Ok(CheckReport {
        name: kind.as_str(),
        program,
        version,
        upstream,
        model,
        passed,
        exit_code: outcome.exit_code,
        exchanges: outcome.exchanges,
        tool_calls,
        millis: started.elapsed().as_millis() as u64,
        confinement: outcome.confinement,
        problem,
    })
}

/// Most of `baton.toml` read.
const MAX_CONFIG: u64 = 1 << 20;

/// `[executors.<name>]` of the project's `baton.toml` (none without the file).
pub fn load_configs(
    project: &Path,
) -> Result<BTreeMap<ExecutorKind, ExecutorConfig>, crate::config::ConfigError> {
    let file = project.join("baton.toml");
    let error = |message: String| crate::config::ConfigError {
        file: PathBuf::from("baton.toml"),
        key: "executors".into(),
        message,
    };
    let text = match std::fs::File::open(&file) {
        Ok(f) => {
            use std::io::Read;
            let mut text = String::new();
            f.take(MAX_CONFIG)
                .read_to_string(&mut text)
                .map_err(|e| error(format!("cannot be read: {e}")))?;
            text
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(error(format!("cannot be read: {e}"))),
    };
    let doc: toml::Table = toml::from_str(&text).map_err(|e| error(e.message().to_string()))?;
    crate::config::read_executors(&doc, Path::new("baton.toml"))
}
