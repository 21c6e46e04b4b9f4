//! The five v1.1 JSON Schemas, embedded in the crate and compiled once per process.

use jsonschema::error::ValidationErrorKind;
use serde_json::Value;
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaKind {
    Manifest,
    Graph,
    WorkflowFrontmatter,
    StepFrontmatter,
    Agents,
}

impl SchemaKind {
    pub const ALL: [SchemaKind; 5] = [
        SchemaKind::Manifest,
        SchemaKind::Graph,
        SchemaKind::WorkflowFrontmatter,
        SchemaKind::StepFrontmatter,
        SchemaKind::Agents,
    ];

    /// The schema text, as shipped (`baton` can print it for package authors).
    pub fn source(self) -> &'static str {
        match self {
            SchemaKind::Manifest => include_str!("../schemas/bmad.schema.json"),
            SchemaKind::Graph => include_str!("../schemas/workflow-graph.schema.json"),
            SchemaKind::WorkflowFrontmatter => {
                include_str!("../schemas/workflow-frontmatter.schema.json")
            }
            SchemaKind::StepFrontmatter => include_str!("../schemas/step-frontmatter.schema.json"),
            SchemaKind::Agents => include_str!("../schemas/agents.schema.json"),
        }
    }

    pub fn file_name(self) -> &'static str {
        match self {
            SchemaKind::Manifest => "bmad.schema.json",
            SchemaKind::Graph => "workflow-graph.schema.json",
            SchemaKind::WorkflowFrontmatter => "workflow-frontmatter.schema.json",
            SchemaKind::StepFrontmatter => "step-frontmatter.schema.json",
            SchemaKind::Agents => "agents.schema.json",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One schema violation, located by JSON pointer into the instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaIssue {
    pub pointer: String,
    pub message: String,
    pub hint: String,
}

type Compiled = Result<jsonschema::Validator, String>;

fn validators() -> &'static [Compiled; 5] {
    static CELL: OnceLock<[Compiled; 5]> = OnceLock::new();
    CELL.get_or_init(|| {
        SchemaKind::ALL.map(|kind| {
            let schema: Value = serde_json::from_str(kind.source())
                .map_err(|e| format!("embedded schema {} is not JSON: {e}", kind.file_name()))?;
            jsonschema::options()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&schema)
                .map_err(|e| format!("embedded schema {} does not compile: {e}", kind.file_name()))
        })
    })
}

/// Validates `instance` against the schema of `kind`, returning every violation.
pub fn validate(kind: SchemaKind, instance: &Value) -> Vec<SchemaIssue> {
    let validator = match &validators()[kind.index()] {
        Ok(v) => v,
        Err(message) => {
            // Only reachable if the crate was built with a broken schema; a unit test guards it.
            return vec![SchemaIssue {
                pointer: String::new(),
                message: message.clone(),
                hint: "this is a bug in baton; please report it".into(),
            }];
        }
    };
    let mut issues: Vec<SchemaIssue> = validator
        .iter_errors(instance)
        .map(|error| {
            let pointer = error.instance_path().as_str().to_string();
            let hint = hint_for(error.kind(), error.instance());
            SchemaIssue {
                message: message_for(&pointer, &error.to_string()),
                pointer,
                hint,
            }
        })
        .collect();
    issues.dedup();
    issues
}

fn message_for(pointer: &str, detail: &str) -> String {
    if pointer.is_empty() {
        detail.to_string()
    } else {
        format!("{pointer}: {detail}")
    }
}

fn hint_for(kind: &ValidationErrorKind, instance: &Value) -> String {
    match kind {
        ValidationErrorKind::AdditionalProperties { unexpected } => format!(
            "remove {}; v1.1 does not allow other keys here",
            quoted_list(unexpected)
        ),
        ValidationErrorKind::Required { property } => {
            format!("add the required field {property}")
        }
        ValidationErrorKind::Pattern { pattern } => {
            format!("the value must match the pattern {pattern}")
        }
        ValidationErrorKind::Enum { options } => format!("use one of {options}"),
        ValidationErrorKind::Type { .. } if instance.is_number() => {
            "quote the value to make it a string (for example \"1.1\")".into()
        }
        ValidationErrorKind::Type { kind } => format!("the value must be of type {kind:?}")
            .replace("Single(", "")
            .replace(')', "")
            .to_lowercase(),
        ValidationErrorKind::MinItems { limit } => format!("list at least {limit} item(s)"),
        ValidationErrorKind::MinLength { .. } => "the value must not be empty".into(),
        ValidationErrorKind::Format { format } => format!("the value must be a valid {format}"),
        _ => "see the v1.1 schema for this field".into(),
    }
}

fn quoted_list(items: &[String]) -> String {
    items
        .iter()
        .map(|s| format!("'{s}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_embedded_schema_compiles() {
        for (kind, compiled) in SchemaKind::ALL.iter().zip(validators()) {
            assert!(compiled.is_ok(), "{kind:?}: {compiled:?}");
        }
    }

    #[test]
    fn manifest_rejects_unknown_keys_with_a_hint() {
        let issues = validate(
            SchemaKind::Manifest,
            &json!({"schemaVersion": "1.1", "name": "x", "version": "1.0.0",
                    "entry": {"workflow": "w.md", "graph": "g.json", "agents": "a.json"},
                    "extra": 1}),
        );
        assert_eq!(issues.len(), 1, "{issues:?}");
        assert!(issues[0].hint.contains("'extra'"));
    }

    #[test]
    fn numeric_schema_version_suggests_quoting() {
        let issues = validate(
            SchemaKind::StepFrontmatter,
            &json!({"schemaVersion": 1.1, "nodeId": "a", "type": "step"}),
        );
        assert_eq!(issues[0].pointer, "/schemaVersion");
        assert!(issues[0].hint.contains("quote"));
    }

    #[test]
    fn formats_are_checked() {
        let issues = validate(
            SchemaKind::Manifest,
            &json!({"schemaVersion": "1.1", "name": "x", "version": "1.0.0", "createdAt": "yesterday",
                    "entry": {"workflow": "w.md", "graph": "g.json", "agents": "a.json"}}),
        );
        assert_eq!(issues.len(), 1);
        assert_eq!(issues[0].pointer, "/createdAt");
    }
}
