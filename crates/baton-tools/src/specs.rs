//! The tools as the model sees them: names, descriptions and JSON Schemas for the arguments.
//! The same schemas validate the arguments before a tool runs.

use serde_json::{Value, json};
use std::sync::OnceLock;

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
}

/// Tools that start programs.
pub const TERMINAL_TOOLS: [&str; 2] = ["terminal.run", "shell.exec"];

pub const FS_TOOLS: [&str; 5] = [
    "fs.read",
    "fs.list",
    "fs.search",
    "fs.write",
    "fs.apply_patch",
];

fn path_param(what: &str) -> Value {
    json!({"type": "string", "description": format!("{what}: a mount path such as @project/artifacts/x.md, @pkg/steps/a.md or @state/workflow.md")})
}

pub fn all() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        vec![
            ToolSpec {
                name: "fs.read",
                description: "Read a text file. Large files are truncated: use fs.search, then fs.read with startLine/endLine for a window. Always returns bytes and sha256 (use it as ifMatchSha256 when writing back).",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": {
                        "path": path_param("File"),
                        "startLine": {"type": "integer", "minimum": 1, "description": "First line (1-based)"},
                        "endLine": {"type": "integer", "minimum": 1, "description": "Last line (inclusive)"}
                    }
                }),
            },
            ToolSpec {
                name: "fs.list",
                description: "List a directory: sorted names, directories end with '/', hidden entries skipped.",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": {"path": path_param("Directory")}
                }),
            },
            ToolSpec {
                name: "fs.search",
                description: "Search file contents under a directory (recursive, .gitignore aware; skips .git, node_modules and hidden directories). The pattern is a literal string, or a regex written /regex/ or /regex/i.",
                parameters: json!({
                    "type": "object", "additionalProperties": false,
                    "properties": {
                        "path": path_param("Directory or file to search"),
                        "pattern": {"type": "string", "minLength": 1},
                        "query": {"type": "string", "minLength": 1, "description": "Same as pattern"},
                        "globs": {"type": "array", "items": {"type": "string"}, "description": "Mount globs such as @project/**/*.md"},
                        "before": {"type": "integer", "minimum": 0, "maximum": 20},
                        "after": {"type": "integer", "minimum": 0, "maximum": 20},
                        "maxMatches": {"type": "integer", "minimum": 1, "maximum": 1000}
                    }
                }),
            },
            ToolSpec {
                name: "fs.write",
                description: "Write a whole file atomically under @project or @state (parents are created). mode 'append' adds to the end. A new file under @project/artifacts/ is recorded in the state's artifacts. Writes to @state/workflow.md are checked against the workflow graph.",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["path", "content"],
                    "properties": {
                        "path": path_param("File"),
                        "content": {"type": "string"},
                        "ifMatchSha256": {"type": "string", "pattern": "^[a-fA-F0-9]{64}$"},
                        "mode": {"enum": ["overwrite", "append"]}
                    }
                }),
            },
            ToolSpec {
                name: "fs.apply_patch",
                description: "Edit a file. operation 'updateFrontmatter' with 'update' ({field: {set|append: value}}) edits YAML frontmatter (use it to advance @state/workflow.md); 'replaceText' with find/replace/count; 'unifiedDiff' with diff. Arguments may be flat or nested under 'patch'.",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["path"],
                    "properties": {
                        "path": path_param("File"),
                        "operation": {"enum": ["updateFrontmatter", "replaceText", "unifiedDiff"]},
                        "update": {"type": "object"},
                        "find": {"type": "string", "minLength": 1},
                        "replace": {"type": "string"},
                        "count": {"type": "integer", "minimum": 1},
                        "diff": {"type": "string", "minLength": 1},
                        "ifMatchSha256": {"type": "string", "pattern": "^[a-fA-F0-9]{64}$"},
                        "patch": {"type": "object"}
                    }
                }),
            },
            ToolSpec {
                name: "ui.ask_user",
                description: "Ask the user for structured input and wait for the answer. Types: form (schema), selection (options, multi), confirmation, plan_review (planContent), feedback (items), action_selection (actions).",
                parameters: json!({
                    "type": "object", "required": ["widgetId", "type", "message"],
                    "properties": {
                        "widgetId": {"type": "string", "minLength": 1},
                        "type": {"enum": ["form", "selection", "confirmation", "plan_review", "feedback", "action_selection"]},
                        "message": {"type": "string", "minLength": 1},
                        "schema": {"type": "object"},
                        "options": {"type": "array"},
                        "multi": {"type": "boolean"},
                        "planContent": {"type": "string"},
                        "items": {"type": "array"},
                        "actions": {"type": "array"}
                    }
                }),
            },
            ToolSpec {
                name: "terminal.run",
                description: "Run a program in the project, without a shell: command is a program name (looked up in PATH) or a path (./run.sh, @project/bin/x), args are passed as they are (no globbing, no pipes, no variables). The sandbox lets it write only under @project and $HOME (a temporary directory), hides baton's files and secrets, and has no network unless the policy allows it. Returns exitCode, stdout and stderr (capped; stdoutTruncated/stderrTruncated say when) and durationMs.",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["command"],
                    "properties": {
                        "command": {"type": "string", "minLength": 1, "maxLength": 4096},
                        "args": {"type": "array", "items": {"type": "string"}, "maxItems": 4096},
                        "cwd": {"type": "string", "description": "Working directory: a mount path under @project (default @project)"},
                        "timeoutMs": {"type": "integer", "minimum": 1, "description": "At most the policy's timeout (the default)"},
                        "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables"}
                    }
                }),
            },
            ToolSpec {
                name: "shell.exec",
                description: "Run a script with /bin/sh -c in the same sandbox as terminal.run (only when the policy allows shell.exec). Prefer terminal.run.",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["script"],
                    "properties": {
                        "script": {"type": "string", "minLength": 1, "maxLength": 65536},
                        "cwd": {"type": "string", "description": "Working directory: a mount path under @project (default @project)"},
                        "timeoutMs": {"type": "integer", "minimum": 1},
                        "env": {"type": "object", "additionalProperties": {"type": "string"}}
                    }
                }),
            },
            ToolSpec {
                name: "workflow.rewind",
                description: "Go back to a completed node to redo it: it and every later step leave stepsCompleted and workflowStatus is cleared. Only with the user's explicit confirmation (confirmed: true).",
                parameters: json!({
                    "type": "object", "additionalProperties": false, "required": ["toNodeId", "reason", "confirmed"],
                    "properties": {
                        "toNodeId": {"type": "string", "minLength": 1},
                        "reason": {"type": "string", "minLength": 1},
                        "confirmed": {"type": "boolean"}
                    }
                }),
            },
        ]
    })
}

pub fn get(name: &str) -> Option<&'static ToolSpec> {
    all().iter().find(|s| s.name == name)
}

/// Checks arguments against the tool's schema; returns readable problems.
pub fn check_args(name: &str, args: &Value) -> Result<(), Vec<String>> {
    static VALIDATORS: OnceLock<Vec<(&'static str, Option<jsonschema::Validator>)>> =
        OnceLock::new();
    let validators = VALIDATORS.get_or_init(|| {
        all()
            .iter()
            .map(|s| (s.name, jsonschema::validator_for(&s.parameters).ok()))
            .collect()
    });
    let Some((_, Some(v))) = validators.iter().find(|(n, _)| *n == name) else {
        return Ok(());
    };
    let problems: Vec<String> = v
        .iter_errors(args)
        .map(|e| {
            let at = e.instance_path().as_str().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}
