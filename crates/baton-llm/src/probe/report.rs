//! What `baton models check` reports: one verdict per check, with what was seen, what to do
//! about it, and the figures measured.

use serde::Serialize;
use serde_json::{Map, Value};

/// How one check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    /// Works, with a limit worth knowing (no usage, no prompt caching, a smaller window).
    Warn,
    /// baton cannot work with this model or endpoint as configured.
    Fail,
    /// Not tried (an earlier check made it meaningless), or nothing to learn from.
    Skipped,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "fail",
            Verdict::Skipped => "skipped",
        }
    }
}

/// One check: its name, verdict, what was seen (`detail`), what to do (`hint`) and the
/// figures measured (token counts, pieces, the window), keyed in camelCase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub verdict: Verdict,
    pub detail: String,
    pub hint: Option<String>,
    pub figures: Map<String, Value>,
}

impl Check {
    pub fn new(name: &'static str, verdict: Verdict, detail: impl Into<String>) -> Check {
        Check {
            name,
            verdict,
            detail: detail.into(),
            hint: None,
            figures: Map::new(),
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> Check {
        self.hint = Some(hint.into());
        self
    }

    pub fn figure(mut self, key: &str, value: impl Into<Value>) -> Check {
        self.figures.insert(key.to_string(), value.into());
        self
    }
}

/// The whole check of one model: which model, where (shown without secrets), which API, and
/// the checks in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub model: String,
    pub endpoint: String,
    pub api: String,
    pub checks: Vec<Check>,
}

impl Report {
    /// Some check failed: baton cannot run workflows with this model as configured.
    pub fn failed(&self) -> bool {
        self.checks.iter().any(|c| c.verdict == Verdict::Fail)
    }

    pub fn check(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }
}
