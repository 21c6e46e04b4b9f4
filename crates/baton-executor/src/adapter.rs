//! What each CLI adapter tells the runner: how to launch the CLI headless against the gateway,
//! and what each line of its event stream means.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One launch of a CLI.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// The CLI's program (resolved `command`).
    pub program: &'a Path,
    /// Where it works: the story's worktree or the project.
    pub workdir: &'a Path,
    /// Its per-run `HOME` (empty but for what [`Launch::files`] seeds); `TMPDIR` is beneath it.
    pub home: &'a Path,
    /// The gateway's base URL, `http://127.0.0.1:<port>` (no path).
    pub gateway: &'a str,
    /// The per-run token the gateway accepts (the only key the CLI ever holds).
    pub token: &'a str,
    /// The model name to ask for.
    pub model: &'a str,
    /// The instructions of the phase or step.
    pub prompt: &'a str,
    /// The CLI's own session to continue (an answer to its question, a resume after a kill).
    pub resume: Option<&'a str>,
    /// Extra arguments the operator allows (`[executors.<name>] args`).
    pub extra_args: &'a [String],
}

/// How to start the CLI: the runner adds the sandbox, `HOME`, `TMPDIR`, stdin `/dev/null` and
/// the process group.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// Variables set (the runner starts from an empty environment plus `PATH`, `HOME`, `TMPDIR`,
    /// `LANG`).
    pub env: Vec<(OsString, OsString)>,
    /// Files written under the per-run home before launch: (path relative to home, content).
    pub files: Vec<(PathBuf, Vec<u8>)>,
}

/// One thing a CLI's event stream said, as baton records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The CLI's own session id (what a resume continues).
    Session { id: String },
    /// Text from the model.
    Message { text: String },
    /// A tool call the CLI runs for the model.
    ToolCall {
        id: String,
        name: String,
        input: Value,
    },
    /// The result of a tool call.
    ToolResult {
        id: String,
        output: String,
        is_error: bool,
    },
    /// The CLI stopped to ask the person.
    Question { text: String },
    /// The CLI's final word (a claim: the verdict comes from the files).
    Result { text: String, is_error: bool },
}

/// A coding-agent CLI's adapter. Pure: no I/O (the runner does it), so each adapter is tested
/// on recorded lines of its CLI.
pub trait Adapter: Send + Sync {
    fn kind(&self) -> crate::ExecutorKind;
    /// The command line, environment and home files of one launch.
    fn launch(&self, inv: &Invocation<'_>) -> Launch;
    /// What one line of the CLI's stdout says (nothing for lines it need not record).
    fn parse_line(&self, line: &str) -> Vec<Event>;
    /// The arguments that print the CLI's version (`--version`).
    fn version_args(&self) -> Vec<OsString> {
        vec!["--version".into()]
    }
}
