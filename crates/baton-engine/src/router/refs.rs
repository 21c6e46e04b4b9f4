//! Turning a menu item's target into refs: which workflow, script, prompt or data file it
//! names, with the errors of a target that cannot be used.

use super::command::{ActionRef, DataRef, ExecRef, Kind, RouteError, WorkflowRef};
use super::menu::MenuItem;
use baton_package::Package;
use baton_package::model::Agent;

/// Builtin actions and what they do.
pub const BUILTINS: &[(&str, Kind)] = &[
    ("menu.show", Kind::ShowMenu),
    ("agent.dismiss", Kind::DismissAgent),
    ("run.resume", Kind::ResumeRun),
];

/// A path as a menu writes it, relative to the package root.
pub fn package_path(raw: &str) -> String {
    let mut p = raw.trim();
    for prefix in ["{package-root}/", "{package_root}/", "@pkg/", "./"] {
        if let Some(rest) = p.strip_prefix(prefix) {
            p = rest;
        }
    }
    p.to_string()
}

fn is_classic(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    [".yaml", ".yml", ".xml"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

fn classic(what: &str, raw: &str) -> RouteError {
    RouteError::new(
        "NOT_SUPPORTED_CLASSIC_WORKFLOW",
        format!(
            "{what} '{raw}' is a classic BMAD workflow (workflow.yaml / instructions.xml), which baton does not run"
        ),
        "convert it to a v1.1 micro-file workflow (workflow.md + workflow.graph.json + steps/) and point the menu item at it",
    )
}

/// `workflows[].id` first, then a `.md` path naming a workflow of the package.
pub fn workflow(package: &Package, raw: &str) -> Result<WorkflowRef, RouteError> {
    if is_classic(raw) {
        return Err(classic("workflow", raw));
    }
    let ids: Vec<&str> = package.workflows().iter().map(|w| w.id.as_str()).collect();
    if let Some(w) = package.workflows().iter().find(|w| w.id == raw.trim()) {
        return Ok(WorkflowRef::WorkflowId {
            workflow_id: w.id.clone(),
        });
    }
    let path = package_path(raw);
    if path.ends_with(".md")
        && let Some(w) = package.workflows().iter().find(|w| w.workflow_file == path)
    {
        return Ok(WorkflowRef::PackagePath {
            workflow_md_path: path,
            workflow_id: w.id.clone(),
        });
    }
    Err(RouteError::new(
        "UNKNOWN_WORKFLOW",
        format!(
            "the menu names workflow '{raw}', which is not in package '{}'",
            package.name()
        ),
        format!(
            "use a workflow id ({}) or the path of its workflow.md",
            ids.join(", ")
        ),
    ))
}

pub enum Exec {
    Script(ExecRef),
    /// The file is a workflow: the item starts it.
    Workflow(WorkflowRef),
}

/// An exec target: a markdown file of the package; one that is a workflow starts it.
pub fn exec(package: &Package, raw: &str) -> Result<Exec, RouteError> {
    if is_classic(raw) {
        return Err(classic("exec", raw));
    }
    let path = package_path(raw);
    let Some(bytes) = package.files().get(&path) else {
        return Err(RouteError::new(
            "DATA_LOAD_FAILED",
            format!(
                "the menu runs '{raw}', which is not a file of package '{}'",
                package.name()
            ),
            "fix the exec path of the menu item (relative to the package root)",
        ));
    };
    let text = String::from_utf8_lossy(bytes);
    let named_workflow = path == "workflow.md" || path.ends_with("/workflow.md");
    if named_workflow || looks_like_workflow(&text) {
        return workflow(package, &path).map(Exec::Workflow);
    }
    Ok(Exec::Script(ExecRef::Markdown { md_path: path }))
}

/// A frontmatter with `schemaVersion`, `workflowType` or `currentNodeId` is a workflow's.
fn looks_like_workflow(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("---") else {
        return false;
    };
    let front = rest.split("\n---").next().unwrap_or("");
    front.lines().any(|l| {
        let key = l.split(':').next().unwrap_or("").trim();
        matches!(key, "schemaVersion" | "workflowType" | "currentNodeId")
    })
}

/// `#id` names a prompt of the agent; a builtin name is a builtin; anything else is text.
pub fn action(agent: &Agent, raw: &str) -> Result<(Option<Kind>, ActionRef), RouteError> {
    let raw = raw.trim();
    if let Some(id) = raw.strip_prefix('#') {
        if agent.prompts.iter().any(|p| p.id == id) {
            return Ok((None, ActionRef::PromptId { id: id.to_string() }));
        }
        let known: Vec<&str> = agent.prompts.iter().map(|p| p.id.as_str()).collect();
        return Err(RouteError::new(
            "UNKNOWN_PROMPT_ID",
            format!(
                "the menu runs prompt '#{id}', which agent '{}' does not have",
                agent.id
            ),
            if known.is_empty() {
                "add it to the agent's prompts[]".to_string()
            } else {
                format!("use one of: {}", known.join(", "))
            },
        ));
    }
    if let Some((name, kind)) = BUILTINS.iter().find(|(n, _)| *n == raw) {
        return Ok((
            Some(*kind),
            ActionRef::Builtin {
                name: (*name).to_string(),
            },
        ));
    }
    Ok((
        None,
        ActionRef::Inline {
            text: raw.to_string(),
        },
    ))
}

pub fn data(raw: &str) -> DataRef {
    let path = package_path(raw);
    let lower = path.to_ascii_lowercase();
    let parse_as = [
        (".json", "json"),
        (".yaml", "yaml"),
        (".yml", "yaml"),
        (".csv", "csv"),
        (".xml", "xml"),
        (".md", "text"),
        (".txt", "text"),
    ]
    .iter()
    .find(|(ext, _)| lower.ends_with(ext))
    .map(|(_, kind)| *kind);
    DataRef {
        kind: "path",
        path,
        parse_as,
    }
}

/// `validate-workflow`: the workflow must resolve before the item starts anything.
pub fn validate(package: &Package, item: &MenuItem) -> Result<(), RouteError> {
    let Some(raw) = &item.validate_workflow else {
        return Ok(());
    };
    workflow(package, raw).map(|_| ()).map_err(|e| RouteError {
        code: if e.code == "NOT_SUPPORTED_CLASSIC_WORKFLOW" {
            e.code
        } else {
            "VALIDATION_FAILED"
        },
        message: format!("validate-workflow of '{}': {}", item.description, e.message),
        hint: e.hint,
    })
}
