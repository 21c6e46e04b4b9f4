//! A finding of `check` (an error or a warning about a session, with maestro's code): what
//! [`super::check`] produces and [`super::error`] carries.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Level {
    E,
    W,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub level: Level,
    pub code: &'static str,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_index: Option<usize>,
}

impl Finding {
    pub(crate) fn new(
        level: Level,
        code: &'static str,
        message: impl Into<String>,
        step: Option<usize>,
    ) -> Self {
        Finding {
            level,
            code,
            message: message.into(),
            step_index: step,
        }
    }

    /// `E008 [step 2]: …`
    pub fn line(&self) -> String {
        let loc = self
            .step_index
            .map(|i| format!(" [step {i}]"))
            .unwrap_or_default();
        format!("{}{loc}: {}", self.code, self.message)
    }
}
