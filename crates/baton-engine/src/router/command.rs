//! What an input means: the resolved command, the references it carries, and why a menu
//! item's target cannot be used.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Kind {
    ShowMenu,
    StartWorkflow,
    ResumeRun,
    ExecScript,
    RunAction,
    Chat,
    DismissAgent,
    ClarifyChoice,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Exact,
    High,
    Medium,
    Low,
}

/// `{type: "workflowId", workflowId}` or `{type: "packagePath", workflowMdPath}`; a package
/// path is also resolved to the id of the workflow it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum WorkflowRef {
    #[serde(rename_all = "camelCase")]
    WorkflowId { workflow_id: String },
    #[serde(rename_all = "camelCase")]
    PackagePath {
        workflow_md_path: String,
        workflow_id: String,
    },
}

impl WorkflowRef {
    pub fn workflow_id(&self) -> &str {
        match self {
            WorkflowRef::WorkflowId { workflow_id }
            | WorkflowRef::PackagePath { workflow_id, .. } => workflow_id,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ExecRef {
    #[serde(rename_all = "camelCase")]
    Markdown { md_path: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ActionRef {
    Builtin { name: String },
    PromptId { id: String },
    Inline { text: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DataRef {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_as: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Candidate {
    pub index: usize,
    pub label: String,
}

/// What an input means.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedCommand {
    pub kind: Kind,
    pub confidence: Confidence,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// 1-based, among the visible items.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_menu_item_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub matched_menu_item_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow_ref: Option<WorkflowRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_ref: Option<ExecRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action_ref: Option<ActionRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_ref: Option<DataRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<Candidate>,
    /// The text said to the agent (Chat), or the detail lines after a chosen label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input: Option<String>,
}

impl ResolvedCommand {
    pub fn new(kind: Kind, confidence: Confidence) -> ResolvedCommand {
        ResolvedCommand {
            kind,
            confidence,
            reason: None,
            matched_menu_item_index: None,
            matched_menu_item_id: None,
            workflow_ref: None,
            exec_ref: None,
            action_ref: None,
            data_ref: None,
            candidates: Vec::new(),
            input: None,
        }
    }

    pub fn reason(mut self, reason: impl Into<String>) -> ResolvedCommand {
        self.reason = Some(reason.into());
        self
    }
}

/// A menu item whose target cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RouteError {
    /// `UNKNOWN_WORKFLOW`, `NOT_SUPPORTED_CLASSIC_WORKFLOW`, `UNKNOWN_PROMPT_ID`,
    /// `DATA_LOAD_FAILED` or `VALIDATION_FAILED`.
    pub code: &'static str,
    pub message: String,
    pub hint: Option<String>,
}

impl RouteError {
    pub(super) fn new(code: &'static str, message: String, hint: impl Into<String>) -> RouteError {
        RouteError {
            code,
            message,
            hint: Some(hint.into()),
        }
    }
}
