//! How git on a model-written tree refuses or fails: a stable code, a message, a hint.

/// git could not be run, or failed where the caller needed it to succeed.
pub const GIT_FAILED: &str = "GIT_FAILED";
/// The repository's `.git` could not be read as a repository (missing, a `gitdir:` file that
/// points nowhere, or too large to be one).
pub const GIT_NOT_A_REPOSITORY: &str = "GIT_NOT_A_REPOSITORY";
/// A configuration file git would read includes a file inside the work tree, which the model
/// can write.
pub const GIT_CONFIG_INCLUDES_TREE: &str = "GIT_CONFIG_INCLUDES_TREE";
/// The repository's configuration, hooks or `info/` changed while baton's git ran; the change
/// was undone.
pub const GIT_PROTECTED_CHANGED: &str = "GIT_PROTECTED_CHANGED";

#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct GitError {
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

impl GitError {
    pub fn new(code: &'static str, message: impl Into<String>) -> GitError {
        GitError {
            code,
            message: message.into(),
            hint: None,
        }
    }

    pub fn hint(mut self, hint: impl Into<String>) -> GitError {
        self.hint = Some(hint.into());
        self
    }
}
