//! The rules that keep a model from forging progress. "Completed" must mean the workflow ran:
//! orchestrators trust it.
//!
//! Each rule looks only at what a write adds or changes relative to the old state, so a state
//! written before a rule existed still loads and can progress. Together with the move rule
//! (an edge or a rewind to a completed node) they give, by induction over accepted writes:
//! every `stepsCompleted` entry was the current node at some point of the run, and a run is
//! complete only once an `end` node was reached along graph edges from the entry.

use super::artifact_path;
use crate::state::{StateCode, StateDoc, StateError};
use baton_package::graph::Graph;
use baton_package::model::NodeType;
use serde_json::{Map, Value, json};
use std::collections::HashMap;

/// Top-level fields baton sets when it creates the run; they say which run and workflow the
/// state belongs to.
pub const IMMUTABLE_FIELDS: [&str; 5] = [
    "runId",
    "workflowRef",
    "workflowType",
    "activeAgentId",
    "schemaVersion",
];

/// The label `workflow.rewind` gives its own `decisionLog` entry.
pub const REWIND_LABEL: &str = "rewind";

/// One write: the old and new state, the effective current node before (`from`) and after
/// (`to`) it, and whether it is a rewind.
pub struct Change<'a> {
    pub old: &'a StateDoc,
    pub new: &'a StateDoc,
    pub from: &'a str,
    pub to: &'a str,
    pub graph: &'a Graph,
    pub rewind: bool,
}

impl Change<'_> {
    /// Identity first (a write that changes which run this is says nothing valid about its
    /// progress), then steps (unknown, duplicate, not visited: the most specific diagnosis
    /// first), completion, artifacts and decisions.
    pub fn check(&self) -> Result<(), StateError> {
        self.immutable_fields()?;
        self.steps_completed()?;
        self.completion()?;
        self.artifacts()?;
        self.decision_log()
    }

    fn immutable_fields(&self) -> Result<(), StateError> {
        for field in IMMUTABLE_FIELDS {
            let before = self.old.fields().get(field);
            let after = self.new.fields().get(field);
            if before != after {
                let what = if after.is_none() {
                    "removed"
                } else {
                    "changed"
                };
                return Err(StateError::new(
                    StateCode::ImmutableField,
                    format!(
                        "'{field}' is set by baton when the run is created and cannot be {what}"
                    ),
                )
                .with_details(json!({
                    "field": field,
                    "before": before.cloned().unwrap_or(Value::Null),
                    "after": after.cloned().unwrap_or(Value::Null),
                    "hint": format!("keep {field} as it is in the state you read"),
                })));
            }
        }
        Ok(())
    }

    /// New entries, in the order they were written: an entry occurring more often than in the
    /// old list is new from its extra occurrences on. Returns `(entry, is_duplicate)`.
    fn added_steps(&self) -> Vec<(&str, bool)> {
        let mut old_counts: HashMap<&str, usize> = HashMap::new();
        for s in self.old.steps_completed() {
            *old_counts.entry(s).or_default() += 1;
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut added = Vec::new();
        for s in self.new.steps_completed() {
            let n = seen.entry(s).or_default();
            *n += 1;
            if *n > old_counts.get(s).copied().unwrap_or(0) {
                added.push((s, *n > 1));
            }
        }
        added
    }

    fn steps_completed(&self) -> Result<(), StateError> {
        let added = self.added_steps();
        if added.is_empty() {
            return Ok(());
        }
        let unknown: Vec<&str> = added
            .iter()
            .filter(|(s, _)| self.graph.node(s).is_none())
            .map(|(s, _)| *s)
            .collect();
        if let Some(first) = unknown.first() {
            let nodes: Vec<&str> = self.graph.nodes().iter().map(|n| n.id.as_str()).collect();
            return Err(StateError::new(
                StateCode::UnknownNode,
                format!("stepsCompleted entry '{first}' is not a node of the workflow graph"),
            )
            .with_details(json!({
                "field": "stepsCompleted",
                "entries": unknown,
                "nodes": nodes,
            })));
        }
        let duplicates: Vec<&str> = added
            .iter()
            .filter(|(_, dup)| *dup)
            .map(|(s, _)| *s)
            .collect();
        if let Some(first) = duplicates.first() {
            return Err(StateError::new(
                StateCode::DuplicateStep,
                format!("'{first}' is already in stepsCompleted"),
            )
            .with_details(json!({
                "entries": duplicates,
                "stepsCompleted": self.old.steps_completed(),
            })));
        }
        let not_visited: Vec<&str> = added
            .iter()
            .filter(|(s, _)| *s != self.from && *s != self.to)
            .map(|(s, _)| *s)
            .collect();
        if let Some(first) = not_visited.first() {
            let mut allowed = vec![self.from];
            if self.to != self.from {
                allowed.push(self.to);
            }
            return Err(StateError::new(
                StateCode::StepNotVisited,
                if self.from == self.to {
                    format!(
                        "'{first}' cannot be marked completed: only the current node ('{}') can",
                        self.from
                    )
                } else {
                    format!(
                        "'{first}' cannot be marked completed: only the node being left ('{}') or the one being entered ('{}') can",
                        self.from, self.to
                    )
                },
            )
            .with_details(json!({
                "entry": first,
                "entries": not_visited,
                "currentNodeIdBefore": self.from,
                "currentNodeIdAfter": self.to,
                "allowed": allowed,
                "hint": "move along the graph with currentNodeId and complete each node as you leave it",
            })));
        }
        Ok(())
    }

    /// `workflowStatus: complete` when it becomes so, or when the node moves while it is so.
    fn completion(&self) -> Result<(), StateError> {
        if self.new.workflow_status() != Some("complete") {
            return Ok(());
        }
        if self.old.workflow_status() == Some("complete") && self.from == self.to {
            return Ok(());
        }
        let node_type = self.graph.node(self.to).map(|n| n.node_type);
        if node_type == Some(NodeType::End) {
            return Ok(());
        }
        let ends: Vec<&str> = self
            .graph
            .nodes()
            .iter()
            .filter(|n| n.node_type == NodeType::End)
            .map(|n| n.id.as_str())
            .collect();
        Err(StateError::new(
            StateCode::CompletionNotAtEnd,
            format!(
                "workflowStatus can be 'complete' only at an end node; the current node '{}' is not one",
                self.to
            ),
        )
        .with_details(json!({
            "currentNodeId": self.to,
            "nodeType": node_type.map(NodeType::as_str),
            "endNodes": ends,
            "allowedNext": self.graph.successors(self.to),
            "hint": "follow the graph to an end node first",
        })))
    }

    fn artifacts(&self) -> Result<(), StateError> {
        let before = self.old.artifacts();
        for entry in self.new.artifacts() {
            if before.contains(&entry) {
                continue;
            }
            if let Some(reason) = artifact_path::problem(entry) {
                return Err(StateError::new(
                    StateCode::ArtifactPathInvalid,
                    format!(
                        "artifacts entry '{}' is not a normalized project-relative path: {reason}",
                        entry.escape_debug()
                    ),
                )
                .with_details(json!({
                    "entry": entry,
                    "reason": reason,
                    "hint": "record files relative to the project root, e.g. artifacts/stories/story.md",
                })));
            }
        }
        Ok(())
    }

    fn decision_log(&self) -> Result<(), StateError> {
        let before = decisions(self.old);
        let after = decisions(self.new);
        // Appends keep the old log as a prefix; skipping it keeps a long log cheap to check.
        let kept = before.iter().zip(after).take_while(|(a, b)| a == b).count();
        for entry in &after[kept..] {
            if before.contains(entry) {
                continue;
            }
            if let Err(reason) = self.decision(entry) {
                let from = entry.get("from").and_then(Value::as_str).unwrap_or("");
                let mut details = json!({"entry": entry, "reason": reason});
                if self.graph.node(from).is_some() {
                    details["allowedNext"] = json!(self.graph.successors(from));
                }
                return Err(StateError::new(
                    StateCode::DecisionLogInvalid,
                    format!("decisionLog entry refused: {reason}"),
                )
                .with_details(details));
            }
        }
        Ok(())
    }

    /// One new entry. Its label may differ from the edge's (models paraphrase), its ends may
    /// not; only this write's own rewind record may go against the edges.
    fn decision(&self, entry: &Value) -> Result<(), String> {
        let Some(entry) = entry.as_object() else {
            return Err("an entry is an object {from, to, label, reason?}".into());
        };
        let from = node_field(entry, "from")?;
        let to = node_field(entry, "to")?;
        for id in [from, to] {
            if self.graph.node(id).is_none() {
                return Err(format!("'{id}' is not a node of the workflow graph"));
            }
        }
        let label = entry.get("label").and_then(Value::as_str);
        if self.rewind && label == Some(REWIND_LABEL) {
            if from == self.from && to == self.to {
                return Ok(());
            }
            return Err(format!(
                "a rewind entry records this rewind: from '{}' to '{}'",
                self.from, self.to
            ));
        }
        if !self.graph.has_edge(from, to) {
            return Err(format!("no edge leads from '{from}' to '{to}'"));
        }
        Ok(())
    }
}

fn decisions(doc: &StateDoc) -> &[Value] {
    doc.fields()
        .get("decisionLog")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

fn node_field<'m>(entry: &'m Map<String, Value>, key: &str) -> Result<&'m str, String> {
    entry
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("'{key}' must name a node of the workflow graph"))
}
