//! Locating the store root.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot find a home for baton's data: set BATON_HOME (or HOME/XDG_DATA_HOME)")]
    NoHome,
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("installed package {id} is damaged: {reason}")]
    Damaged { id: String, reason: String },
}

impl StoreError {
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
}

/// `$BATON_HOME`, else `$XDG_DATA_HOME/baton`, else `$HOME/.local/share/baton`.
pub fn resolve_home() -> Result<PathBuf, StoreError> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    if let Some(home) = var("BATON_HOME") {
        return Ok(home);
    }
    if let Some(data) = var("XDG_DATA_HOME") {
        return Ok(data.join("baton"));
    }
    var("HOME")
        .map(|h| h.join(".local/share/baton"))
        .ok_or(StoreError::NoHome)
}
