//! The transition guard: every write of a run's state passes here first.
//!
//! Checked in order, the first failing rule refusing the write:
//! 1. YAML syntax (`E_INVALID_FRONTMATTER`), checked when the new text is parsed;
//! 2. the new frontmatter matches the schema (`E_SCHEMA_VALIDATION`);
//! 3. `currentNodeId` exists and, when it moved, an edge leads there from the old node, an empty
//!    id meaning the entry node; a rewind may only go back to a completed node
//!    (`E_INVALID_TRANSITION` with `details.allowedNext`);
//! 4. `stepsCompleted` keeps every entry it had, except in a rewind (`E_INVALID_TRANSITION`);
//! 5. the model cannot forge progress ([`progress`]): identity fields are immutable
//!    (`E_IMMUTABLE_FIELD`), new `stepsCompleted` entries are graph nodes (`E_UNKNOWN_NODE`),
//!    listed once (`E_STEP_DUPLICATE`), that are current now or were until this write
//!    (`E_STEP_NOT_VISITED`), `workflowStatus: complete` only at an `end` node
//!    (`E_COMPLETION_NOT_AT_END`), new `artifacts` are normalized project-relative paths
//!    (`E_ARTIFACT_PATH_INVALID`), new `decisionLog` entries follow graph edges
//!    (`E_DECISION_LOG_INVALID`);
//! 6. the caller's `ifMatchSha256` equals the hash of the file it read (`E_PRECONDITION_FAILED`).
//!
//! Rules 5 look only at what the write adds or changes, so a state written before they existed
//! still loads and progresses. The precondition stays last, as before: a stale write that is
//! also invalid is told what is invalid, which it must fix whatever it reads again.

mod artifact_path;
mod progress;

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
    check_schema(new)?;
    let from = old.effective_node_id(graph);
    let to = new.effective_node_id(graph);
    check_move(old, from, to, graph, options)?;
    if !options.rewind {
        check_no_shrink(old, new)?;
    }
    let change = progress::Change {
        old,
        new,
        from,
        to,
        graph,
        rewind: options.rewind,
    };
    change.check()?;
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

fn check_schema(new: &StateDoc) -> Result<(), StateError> {
    let issues = schema::validate(SchemaKind::WorkflowFrontmatter, &new.to_value());
    let Some(first) = issues.first() else {
        return Ok(());
    };
    let list: Vec<Value> = issues
        .iter()
        .map(|i| json!({"pointer": i.pointer, "message": i.message, "hint": i.hint}))
        .collect();
    Err(StateError::new(
        StateCode::SchemaValidation,
        format!(
            "the state frontmatter does not match the schema: {}",
            first.message
        ),
    )
    .with_details(json!({ "issues": list })))
}

/// `currentNodeId`: a node of the graph, reached along an edge, or by a rewind to a node the
/// run completed (the guard re-checks what `workflow.rewind` promises, so no other caller can
/// use the rewind option to jump ahead).
fn check_move(
    old: &StateDoc,
    from: &str,
    to: &str,
    graph: &Graph,
    options: GuardOptions,
) -> Result<(), StateError> {
    if graph.node(to).is_none() {
        let nodes: Vec<&str> = graph.nodes().iter().map(|n| n.id.as_str()).collect();
        return Err(transition_error(
            format!("currentNodeId '{to}' is not a node of the workflow graph"),
            from,
            graph,
        )
        .with_nodes(&nodes));
    }
    if from == to {
        return Ok(());
    }
    if options.rewind {
        if !old.steps_completed().contains(&to) {
            return Err(StateError::new(
                StateCode::InvalidTransition,
                format!("a rewind goes back to a completed node; '{to}' is not in stepsCompleted"),
            )
            .with_details(json!({
                "fromNodeId": from,
                "toNodeId": to,
                "stepsCompleted": old.steps_completed(),
            })));
        }
    } else if !graph.has_edge(from, to) {
        return Err(transition_error(
            format!(
                "no edge leads from '{from}' to '{to}'; the graph decides which node comes next"
            ),
            from,
            graph,
        ));
    }
    Ok(())
}

fn check_no_shrink(old: &StateDoc, new: &StateDoc) -> Result<(), StateError> {
    let after = new.steps_completed();
    let lost: Vec<&str> = old
        .steps_completed()
        .into_iter()
        .filter(|s| !after.contains(s))
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    Err(StateError::new(
        StateCode::InvalidTransition,
        format!(
            "stepsCompleted cannot lose entries (would remove {})",
            lost.join(", ")
        ),
    )
    .with_details(json!({ "removed": lost })))
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
