//! Every way the build phase's inference can refuse, each with a stable code and a hint. A
//! damaged project file names the file and the field; nothing here panics on what it reads.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error("the intent is empty")]
    IntentEmpty,
    #[error("cannot read {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is {size} bytes, over the {limit}-byte limit", .path.display())]
    TooLarge {
        path: PathBuf,
        size: u64,
        limit: u64,
    },
    #[error("{}: not valid JSON at line {line}, column {column}: {message}", .path.display())]
    Json {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{}: {field}: {message}", .path.display())]
    Field {
        path: PathBuf,
        /// A JSON path such as `artifacts[3].created_at`.
        field: String,
        message: String,
    },
    #[error("{}: {field}: the path {value:?} leaves .workflow/", .path.display())]
    PathOutside {
        path: PathBuf,
        field: String,
        value: String,
    },
    #[error("answer to \"{id}\" is not one of its options: {value:?} (options: {})", .options.join(", "))]
    AnswerInvalid {
        id: String,
        value: String,
        options: Vec<String>,
    },
}

impl InferError {
    pub fn code(&self) -> &'static str {
        match self {
            InferError::IntentEmpty => "INTENT_EMPTY",
            InferError::Io { .. } => "PROJECT_FILE_UNREADABLE",
            InferError::TooLarge { .. } => "PROJECT_FILE_TOO_LARGE",
            InferError::Json { .. } | InferError::Field { .. } => "PROJECT_FILE_INVALID",
            InferError::PathOutside { .. } => "ARTIFACT_PATH_OUTSIDE",
            InferError::AnswerInvalid { .. } => "ANSWER_INVALID",
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            InferError::IntentEmpty => Some("say what the session should achieve".into()),
            InferError::Io { .. } => None,
            InferError::TooLarge { path, .. }
            | InferError::Json { path, .. }
            | InferError::Field { path, .. } => Some(format!(
                "repair or remove {} (the project's workflow files are read, never rewritten, by `baton session start`)",
                path.display()
            )),
            InferError::PathOutside { .. } => Some(
                "artifact paths are relative to .workflow/ and stay inside it; fix the registry entry"
                    .into(),
            ),
            InferError::AnswerInvalid { .. } => Some("answer with one of the options".into()),
        }
    }

    pub(crate) fn field(
        path: &std::path::Path,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        InferError::Field {
            path: path.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, InferError>;
