//! The run state document `@state/workflow.md`: YAML frontmatter + markdown body.
//!
//! Rewriting keeps the body byte for byte, the BOM and line-ending style of the original, and
//! the order of frontmatter keys (new keys go last).

use baton_package::frontmatter;
use baton_package::graph::Graph;
use baton_package::model::NodeType;
use serde_json::{Map, Value};
use std::fmt;

/// Error codes of state reads and writes; the spelling is what tools return to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateCode {
    InvalidFrontmatter,
    SchemaValidation,
    InvalidTransition,
    PreconditionFailed,
    InvalidPatch,
    /// A new `stepsCompleted` entry is not a node of the graph.
    UnknownNode,
    /// A new `stepsCompleted` entry is neither the node being left nor the one being entered.
    StepNotVisited,
    /// A new `stepsCompleted` entry is already in the list.
    DuplicateStep,
    /// `workflowStatus: complete` away from an `end` node.
    CompletionNotAtEnd,
    /// `runId`, `workflowRef`, `workflowType`, `activeAgentId` or `schemaVersion` changed.
    ImmutableField,
    /// A new `artifacts` entry is not a normalized project-relative path.
    ArtifactPathInvalid,
    /// A new `decisionLog` entry names a node or an edge the graph does not have.
    DecisionLogInvalid,
}

impl StateCode {
    pub fn as_str(self) -> &'static str {
        match self {
            StateCode::InvalidFrontmatter => "E_INVALID_FRONTMATTER",
            StateCode::SchemaValidation => "E_SCHEMA_VALIDATION",
            StateCode::InvalidTransition => "E_INVALID_TRANSITION",
            StateCode::PreconditionFailed => "E_PRECONDITION_FAILED",
            StateCode::InvalidPatch => "E_INVALID_PATCH",
            StateCode::UnknownNode => "E_UNKNOWN_NODE",
            StateCode::StepNotVisited => "E_STEP_NOT_VISITED",
            StateCode::DuplicateStep => "E_STEP_DUPLICATE",
            StateCode::CompletionNotAtEnd => "E_COMPLETION_NOT_AT_END",
            StateCode::ImmutableField => "E_IMMUTABLE_FIELD",
            StateCode::ArtifactPathInvalid => "E_ARTIFACT_PATH_INVALID",
            StateCode::DecisionLogInvalid => "E_DECISION_LOG_INVALID",
        }
    }
}

/// A refused state read or write. `details` is JSON for the model and for scripts.
#[derive(Debug, Clone, PartialEq)]
pub struct StateError {
    pub code: StateCode,
    pub message: String,
    pub details: Option<Value>,
}

impl StateError {
    pub fn new(code: StateCode, message: impl Into<String>) -> StateError {
        StateError {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: Value) -> StateError {
        self.details = Some(details);
        self
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.message)
    }
}

impl std::error::Error for StateError {}

#[derive(Debug, Clone, PartialEq)]
pub struct StateDoc {
    bom: bool,
    crlf: bool,
    fields: Map<String, Value>,
    body: String,
}

impl StateDoc {
    /// Parses a state file. A missing, unclosed or non-mapping frontmatter, or invalid YAML, is
    /// `E_INVALID_FRONTMATTER`.
    pub fn parse(text: &str) -> Result<StateDoc, StateError> {
        let bom = text.starts_with('\u{feff}');
        let split = frontmatter::split(text)
            .map_err(|e| StateError::new(StateCode::InvalidFrontmatter, e.message()))?;
        let fields = frontmatter::parse_yaml_mapping(split.yaml).map_err(|e| {
            let mut msg = format!("invalid YAML frontmatter: {}", e.message);
            if let Some(line) = e.line {
                msg.push_str(&format!(" (line {})", line + split.yaml_first_line - 1));
            }
            StateError::new(StateCode::InvalidFrontmatter, msg)
        })?;
        let first_line_end = text.find('\n').unwrap_or(text.len());
        let crlf = text[..first_line_end].ends_with('\r');
        Ok(StateDoc {
            bom,
            crlf,
            fields,
            body: split.body.to_string(),
        })
    }

    pub fn fields(&self) -> &Map<String, Value> {
        &self.fields
    }

    pub fn fields_mut(&mut self) -> &mut Map<String, Value> {
        &mut self.fields
    }

    pub fn body(&self) -> &str {
        &self.body
    }

    /// The frontmatter as one JSON object.
    pub fn to_value(&self) -> Value {
        Value::Object(self.fields.clone())
    }

    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.fields.get(key).and_then(Value::as_str)
    }

    /// `currentNodeId` as written (possibly empty).
    pub fn current_node_id(&self) -> &str {
        self.get_str("currentNodeId").unwrap_or("")
    }

    /// `currentNodeId`, with an empty value meaning the graph's entry node.
    pub fn effective_node_id<'g>(&'g self, graph: &'g Graph) -> &'g str {
        match self.current_node_id() {
            "" => graph.entry_node_id(),
            id => id,
        }
    }

    pub fn string_list(&self, key: &str) -> Vec<&str> {
        self.fields
            .get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    }

    pub fn steps_completed(&self) -> Vec<&str> {
        self.string_list("stepsCompleted")
    }

    pub fn artifacts(&self) -> Vec<&str> {
        self.string_list("artifacts")
    }

    pub fn variables(&self) -> Option<&Map<String, Value>> {
        self.fields.get("variables").and_then(Value::as_object)
    }

    /// `variables.workflowStatus`, when it is a string.
    pub fn workflow_status(&self) -> Option<&str> {
        self.variables()
            .and_then(|v| v.get("workflowStatus"))
            .and_then(Value::as_str)
    }

    /// Complete when `variables.workflowStatus == "complete"`, or when the current node is an
    /// `end` node that is already in `stepsCompleted`.
    pub fn is_complete(&self, graph: &Graph) -> bool {
        if self.workflow_status() == Some("complete") {
            return true;
        }
        let current = self.effective_node_id(graph);
        graph
            .node(current)
            .is_some_and(|n| n.node_type == NodeType::End)
            && self.steps_completed().contains(&current)
    }

    /// Each graph node with its status in this run, in graph order.
    pub fn progress<'g>(&self, graph: &'g Graph) -> Vec<NodeProgress<'g>> {
        let done = self.steps_completed();
        let current = self.effective_node_id(graph);
        let complete = self.is_complete(graph);
        graph
            .nodes()
            .iter()
            .map(|n| NodeProgress {
                node_id: &n.id,
                node_type: n.node_type.as_str(),
                title: n.title.as_deref(),
                status: if done.contains(&n.id.as_str()) {
                    NodeStatus::Completed
                } else if n.id == current && !complete {
                    NodeStatus::Current
                } else {
                    NodeStatus::Pending
                },
            })
            .collect()
    }

    /// The file text: frontmatter rewritten, body untouched.
    pub fn render(&self) -> Result<String, StateError> {
        let yaml = if self.fields.is_empty() {
            String::new()
        } else {
            serde_saphyr::to_string(&Value::Object(self.fields.clone())).map_err(|e| {
                StateError::new(
                    StateCode::InvalidFrontmatter,
                    format!("cannot write the frontmatter: {e}"),
                )
            })?
        };
        let nl = if self.crlf { "\r\n" } else { "\n" };
        let mut out = String::with_capacity(yaml.len() + self.body.len() + 16);
        if self.bom {
            out.push('\u{feff}');
        }
        out.push_str("---");
        out.push_str(nl);
        for line in yaml.lines() {
            out.push_str(line);
            out.push_str(nl);
        }
        out.push_str("---");
        out.push_str(nl);
        out.push_str(&self.body);
        Ok(out)
    }

    /// Applies an `updateFrontmatter` update: `{"<key>": {"<op>": value}}` for each key.
    ///
    /// Operators: `stepsCompleted.append` and `artifacts.append` (no duplicates),
    /// `decisionLog.append`, `variables.set` (shallow merge), and `set` on any other top-level
    /// key (`currentNodeId`, `updatedAt`, …). Returns what changed.
    pub fn apply_update(&mut self, update: &Value) -> Result<UpdateSummary, StateError> {
        let Some(ops) = update.as_object() else {
            return Err(invalid_patch(
                "the update must be an object of {field: {operator: value}}",
            ));
        };
        let mut summary = UpdateSummary::default();
        for (key, op) in ops {
            let Some(op_map) = op.as_object().filter(|m| m.len() == 1) else {
                return Err(invalid_patch(format!(
                    "'{key}' must be an object with one operator, e.g. {{\"set\": …}} or {{\"append\": […]}}"
                )));
            };
            let (name, arg) = op_map
                .iter()
                .next()
                .ok_or_else(|| invalid_patch("empty operator"))?;
            match (key.as_str(), name.as_str()) {
                ("stepsCompleted" | "artifacts", "append") => {
                    let added = append_unique(&mut self.fields, key, arg)?;
                    if key == "stepsCompleted" {
                        summary.steps_completed_appended.extend(added);
                    } else {
                        summary.artifacts_appended.extend(added);
                    }
                }
                ("decisionLog", "append") => {
                    let items = as_items(arg);
                    let list = array_field(&mut self.fields, key)?;
                    summary.decisions_appended += items.len();
                    list.extend(items);
                }
                ("variables", "set") => {
                    let Some(values) = arg.as_object() else {
                        return Err(invalid_patch("variables.set takes an object of variables"));
                    };
                    let vars = self
                        .fields
                        .entry("variables")
                        .or_insert_with(|| Value::Object(Map::new()));
                    if !vars.is_object() {
                        *vars = Value::Object(Map::new());
                    }
                    if let Some(vars) = vars.as_object_mut() {
                        for (k, v) in values {
                            vars.insert(k.clone(), v.clone());
                            summary.variables_updated.push(k.clone());
                        }
                    }
                }
                (_, "set") => {
                    self.fields.insert(key.clone(), arg.clone());
                    if key == "currentNodeId" {
                        summary.current_node_id = arg.as_str().map(str::to_owned);
                    }
                }
                _ => {
                    return Err(invalid_patch(format!(
                        "unsupported operator '{key}.{name}'; use stepsCompleted.append, artifacts.append, decisionLog.append, variables.set or <field>.set"
                    )));
                }
            }
        }
        Ok(summary)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeStatus {
    Completed,
    Current,
    Pending,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeProgress<'g> {
    pub node_id: &'g str,
    #[serde(rename = "type")]
    pub node_type: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<&'g str>,
    pub status: NodeStatus,
}

/// What an update changed, for tool results (`stateFrontmatterAfter`) and audit lines.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateSummary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub current_node_id: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub steps_completed_appended: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub variables_updated: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub artifacts_appended: Vec<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub decisions_appended: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

fn invalid_patch(message: impl Into<String>) -> StateError {
    StateError::new(StateCode::InvalidPatch, message)
}

/// `append` accepts one item or a list of items.
fn as_items(arg: &Value) -> Vec<Value> {
    match arg {
        Value::Array(items) => items.clone(),
        other => vec![other.clone()],
    }
}

fn array_field<'m>(
    fields: &'m mut Map<String, Value>,
    key: &str,
) -> Result<&'m mut Vec<Value>, StateError> {
    let slot = fields
        .entry(key)
        .or_insert_with(|| Value::Array(Vec::new()));
    if slot.is_null() {
        *slot = Value::Array(Vec::new());
    }
    slot.as_array_mut()
        .ok_or_else(|| invalid_patch(format!("'{key}' is not a list in the state")))
}

fn append_unique(
    fields: &mut Map<String, Value>,
    key: &str,
    arg: &Value,
) -> Result<Vec<String>, StateError> {
    let items = as_items(arg);
    let list = array_field(fields, key)?;
    let mut added = Vec::new();
    for item in items {
        let Some(s) = item.as_str() else {
            return Err(invalid_patch(format!("{key}.append takes strings")));
        };
        if !list.iter().any(|v| v.as_str() == Some(s)) {
            added.push(s.to_string());
            list.push(item);
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const DOC: &str = "---\nschemaVersion: \"1.1\"\nworkflowType: demo\ncurrentNodeId: \"\"\nstepsCompleted: []\nvariables: {}\n---\n\n# Body\n\nkept  as is \n";

    #[test]
    fn round_trip_keeps_body_and_key_order() {
        let doc = StateDoc::parse(DOC).unwrap();
        let text = doc.render().unwrap();
        assert!(text.ends_with("---\n\n# Body\n\nkept  as is \n"), "{text}");
        let again = StateDoc::parse(&text).unwrap();
        assert_eq!(again, doc);
        let keys: Vec<&String> = again.fields().keys().collect();
        assert_eq!(
            keys,
            [
                "schemaVersion",
                "workflowType",
                "currentNodeId",
                "stepsCompleted",
                "variables"
            ]
        );
        assert_eq!(
            again.get_str("schemaVersion"),
            Some("1.1"),
            "stays a string"
        );
    }

    #[test]
    fn bom_and_crlf_survive() {
        let crlf = format!("\u{feff}{}", DOC.replace('\n', "\r\n"));
        let doc = StateDoc::parse(&crlf).unwrap();
        let text = doc.render().unwrap();
        assert!(text.starts_with("\u{feff}---\r\n"));
        assert!(text.ends_with("# Body\r\n\r\nkept  as is \r\n"));
        assert_eq!(StateDoc::parse(&text).unwrap(), doc);
    }

    #[test]
    fn empty_frontmatter_parses() {
        let doc = StateDoc::parse("---\n---\nbody").unwrap();
        assert!(doc.fields().is_empty());
        assert_eq!(doc.render().unwrap(), "---\n---\nbody");
    }

    #[test]
    fn operators() {
        let mut doc = StateDoc::parse(DOC).unwrap();
        let s = doc
            .apply_update(&json!({
                "stepsCompleted": {"append": ["a", "a", "b"]},
                "variables": {"set": {"x": "1", "y": 2}},
                "artifacts": {"append": "artifacts/a.md"},
                "decisionLog": {"append": [{"from": "a", "to": "b", "label": "next"}]},
                "currentNodeId": {"set": "b"},
                "updatedAt": {"set": "2025-12-25T00:00:00Z"},
            }))
            .unwrap();
        assert_eq!(s.steps_completed_appended, ["a", "b"]);
        assert_eq!(s.artifacts_appended, ["artifacts/a.md"]);
        assert_eq!(s.current_node_id.as_deref(), Some("b"));
        doc.apply_update(
            &json!({"stepsCompleted": {"append": ["b"]}, "variables": {"set": {"x": "3"}}}),
        )
        .unwrap();
        assert_eq!(doc.steps_completed(), ["a", "b"]);
        assert_eq!(doc.variables().unwrap()["x"], "3");
        assert_eq!(doc.variables().unwrap()["y"], 2);
        assert_eq!(doc.fields()["decisionLog"].as_array().unwrap().len(), 1);
        assert_eq!(doc.get_str("updatedAt"), Some("2025-12-25T00:00:00Z"));
    }

    #[test]
    fn bad_operators_are_refused() {
        let mut doc = StateDoc::parse(DOC).unwrap();
        for update in [
            json!([]),
            json!({"stepsCompleted": {"remove": ["a"]}}),
            json!({"stepsCompleted": ["a"]}),
            json!({"variables": {"set": "x"}}),
            json!({"stepsCompleted": {"append": [1]}}),
            json!({"currentNodeId": {"set": "a", "append": "b"}}),
        ] {
            let err = doc.apply_update(&update).unwrap_err();
            assert_eq!(err.code, StateCode::InvalidPatch, "{update}");
        }
    }

    #[test]
    fn invalid_frontmatter() {
        for text in [
            "no frontmatter",
            "---\na: [\n---\n",
            "---\n- a\n---\n",
            "---\na: 1\n",
        ] {
            assert_eq!(
                StateDoc::parse(text).unwrap_err().code,
                StateCode::InvalidFrontmatter,
                "{text:?}"
            );
        }
    }
}
