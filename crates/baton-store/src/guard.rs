//! The transition guard: every write of a run's state passes here first.
//!
//! Checked in order: the new frontmatter matches the schema (`E_SCHEMA_VALIDATION`), its
//! `currentNodeId` exists and, when it moved, an edge leads there from the old node, an empty id
//! meaning the entry node (`E_INVALID_TRANSITION` with `details.allowedNext`),
//! `stepsCompleted` keeps every entry it had (`E_INVALID_TRANSITION`), and the caller's
//! `ifMatchSha256` equals the hash of the file it read (`E_PRECONDITION_FAILED`). YAML syntax
//! (`E_INVALID_FRONTMATTER`) is checked when the new text is parsed.

use crate::state::{StateCode, StateDoc, StateError};
use baton_package::graph::Graph;
use baton_package::schema::{self, SchemaKind};
use serde_json::{Value, json};

#[derive(Debug, Clone, Copy, Default)]
pub struct GuardOptions {
    /// `workflow.rewind` moves back to a completed node and truncates `stepsCompleted`.
    pub rewind: bool,
}

pub fn check(
    old: &StateDoc,
    old_sha256: &str,
    new: &StateDoc,
    graph: &Graph,
    if_match: Option<&str>,
    options: GuardOptions,
) -> Result<(), StateError> {
    let issues = schema::validate(SchemaKind::WorkflowFrontmatter, &new.to_value());
    if !issues.is_empty() {
        let list: Vec<Value> = issues
            .iter()
            .map(|i| json!({"pointer": i.pointer, "message": i.message, "hint": i.hint}))
            .collect();
        let first = &issues[0];
        return Err(StateError::new(
            StateCode::SchemaValidation,
            format!(
                "the state frontmatter does not match the schema: {}",
                first.message
            ),
        )
        .with_details(json!({ "issues": list })));
    }

    let from = old.effective_node_id(graph);
    let to = new.effective_node_id(graph);
    if graph.node(to).is_none() {
        let nodes: Vec<&str> = graph.nodes().iter().map(|n| n.id.as_str()).collect();
        return Err(transition_error(
            format!("currentNodeId '{to}' is not a node of the workflow graph"),
            from,
            graph,
        )
        .with_nodes(&nodes));
    }
    if from != to && !options.rewind && !graph.has_edge(from, to) {
        return Err(transition_error(
            format!(
                "no edge leads from '{from}' to '{to}'; the graph decides which node comes next"
            ),
            from,
            graph,
        ));
    }

    if !options.rewind {
        let after = new.steps_completed();
        let lost: Vec<&str> = old
            .steps_completed()
            .into_iter()
            .filter(|s| !after.contains(s))
            .collect();
        if !lost.is_empty() {
            return Err(StateError::new(
                StateCode::InvalidTransition,
                format!(
                    "stepsCompleted cannot lose entries (would remove {})",
                    lost.join(", ")
                ),
            )
            .with_details(json!({ "removed": lost })));
        }
    }

    if let Some(expected) = if_match
        && !expected.eq_ignore_ascii_case(old_sha256)
    {
        return Err(StateError::new(
                StateCode::PreconditionFailed,
                "the state changed since it was read (ifMatchSha256 does not match); read it again and retry",
            )
            .with_details(json!({ "expected": expected, "actual": old_sha256 })));
    }
    Ok(())
}

trait WithNodes {
    fn with_nodes(self, nodes: &[&str]) -> Self;
}

impl WithNodes for StateError {
    fn with_nodes(mut self, nodes: &[&str]) -> Self {
        if let Some(Value::Object(d)) = self.details.as_mut() {
            d.insert("nodes".into(), json!(nodes));
        }
        self
    }
}

fn transition_error(message: String, from: &str, graph: &Graph) -> StateError {
    StateError::new(StateCode::InvalidTransition, message).with_details(json!({
        "fromNodeId": from,
        "allowedNext": graph.successors(from),
    }))
}
