//! Errors of the notify configuration and its log, each with a code and a hint.

#[derive(Debug, thiserror::Error)]
pub enum NotifyError {
    /// `baton.toml`'s `[notify]` (or `[serve] public_url`) is wrong.
    #[error("{message}")]
    Config {
        code: &'static str,
        message: String,
        hint: String,
    },
    /// The delivery log cannot be read or written.
    #[error("{message}")]
    Log { message: String },
}

impl NotifyError {
    pub fn config(code: &'static str, message: impl Into<String>, hint: impl Into<String>) -> Self {
        NotifyError::Config {
            code,
            message: message.into(),
            hint: hint.into(),
        }
    }

    pub fn code(&self) -> &'static str {
        match self {
            NotifyError::Config { code, .. } => code,
            NotifyError::Log { .. } => "NOTIFY_LOG_UNREADABLE",
        }
    }

    pub fn hint(&self) -> String {
        match self {
            NotifyError::Config { hint, .. } => hint.clone(),
            NotifyError::Log { .. } => {
                "check the permissions of the store's notify/ folder (BATON_HOME)".to_string()
            }
        }
    }
}
