//! Which workflow of a package a run uses (the multi-workflow rules of package v1.1).
//!
//! - `workflows[]` non-empty: a name, if given, must be one of the ids. Without a name, a
//!   single listed workflow is used (every CrewAgent Builder export lists exactly one); with
//!   several, the run must name one.
//! - otherwise the entry workflow is used; a name, if given, must equal its derived id.

use crate::diagnostic::{Code, Diagnostic};
use crate::model::Manifest;

/// A workflow declared by the manifest, with its normalized paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkflowSlot {
    pub id: String,
    pub display_name: Option<String>,
    pub workflow: String,
    pub graph: String,
    /// JSON pointer of the declaration in bmad.json.
    pub pointer: String,
}

/// The id of the entry workflow of a single-workflow package: the `<id>` of
/// `workflows/<id>/workflow.md` when the entry follows that layout, else the package name
/// (made id-safe).
pub fn derived_entry_id(manifest: &Manifest) -> String {
    let entry = manifest.entry.workflow.trim_start_matches("./");
    if let Some(id) = entry
        .strip_prefix("workflows/")
        .and_then(|rest| rest.strip_suffix("/workflow.md"))
        .filter(|id| !id.is_empty() && !id.contains('/'))
    {
        return id.to_string();
    }
    let slug = crate::paths::slug(&manifest.name, "._:-");
    let slug = slug.trim_start_matches(|c: char| !c.is_ascii_alphanumeric());
    if slug.is_empty() {
        "default".to_string()
    } else {
        slug.to_string()
    }
}

/// Picks the index of the workflow a run should use among `ids` (declaration order).
pub fn select_index(
    manifest: &Manifest,
    ids: &[&str],
    wanted: Option<&str>,
) -> Result<usize, Diagnostic> {
    let wanted = wanted.filter(|w| !w.is_empty());
    let listed = ids.join(", ");
    if !manifest.workflows.is_empty() {
        let declared: Vec<&str> = manifest.workflows.iter().map(|w| w.id.as_str()).collect();
        let wanted = match (wanted, declared.as_slice()) {
            (Some(w), _) => w,
            // Nothing to choose between.
            (None, [only]) => *only,
            (None, _) => {
                return Err(Diagnostic::error(
                    Code::WorkflowRefRequired,
                    format!(
                        "package '{}' has {} workflows: {}; choose one with --workflow",
                        manifest.name,
                        declared.len(),
                        declared.join(", ")
                    ),
                )
                .hint(format!("pass --workflow with one of: {listed}")));
            }
        };
        return ids.iter().position(|id| *id == wanted).ok_or_else(|| {
            let hint = if ids.is_empty() {
                "fix the errors reported for workflows[]".to_string()
            } else {
                format!("use one of: {listed}")
            };
            Diagnostic::error(
                Code::WorkflowRefUnknown,
                format!("package '{}' has no workflow '{wanted}'", manifest.name),
            )
            .hint(hint)
        });
    }
    let derived = derived_entry_id(manifest);
    match wanted {
        Some(w) if w != derived => Err(Diagnostic::error(
            Code::WorkflowRefMismatch,
            format!(
                "package '{}' has a single workflow '{derived}', not '{w}'",
                manifest.name
            ),
        )
        .hint(format!("omit --workflow or pass --workflow {derived}"))),
        _ => ids.iter().position(|id| *id == derived).ok_or_else(|| {
            Diagnostic::error(
                Code::WorkflowFileNotFound,
                format!(
                    "the entry workflow of package '{}' is not usable",
                    manifest.name
                ),
            )
            .hint("fix the errors reported for the entry workflow")
        }),
    }
}

/// [`select_index`] over manifest slots.
pub fn select<'s>(
    manifest: &Manifest,
    slots: &'s [WorkflowSlot],
    wanted: Option<&str>,
) -> Result<&'s WorkflowSlot, Diagnostic> {
    let ids: Vec<&str> = slots.iter().map(|s| s.id.as_str()).collect();
    select_index(manifest, &ids, wanted).map(|i| &slots[i])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(workflows: serde_json::Value) -> Manifest {
        serde_json::from_value(json!({
            "schemaVersion": "1.1", "name": "My Pkg", "version": "1.0.0",
            "entry": {"workflow": "workflow.md", "graph": "workflow.graph.json", "agents": "agents.json"},
            "workflows": workflows,
        }))
        .unwrap()
    }

    #[test]
    fn single_workflow_rules() {
        let m = manifest(json!([]));
        assert_eq!(derived_entry_id(&m), "My-Pkg");
        assert_eq!(select_index(&m, &["My-Pkg"], None), Ok(0));
        assert_eq!(select_index(&m, &["My-Pkg"], Some("")), Ok(0));
        assert_eq!(select_index(&m, &["My-Pkg"], Some("My-Pkg")), Ok(0));
        assert_eq!(
            select_index(&m, &["My-Pkg"], Some("x")).unwrap_err().code,
            Code::WorkflowRefMismatch
        );
    }

    #[test]
    fn a_single_listed_workflow_is_used_without_a_name() {
        let m = manifest(json!([
            {"id": "only", "workflow": "workflows/only/workflow.md", "graph": "workflows/only/workflow.graph.json"}
        ]));
        assert_eq!(select_index(&m, &["only"], None), Ok(0));
        assert_eq!(select_index(&m, &["only"], Some("")), Ok(0));
        assert_eq!(select_index(&m, &["only"], Some("only")), Ok(0));
        assert_eq!(
            select_index(&m, &["only"], Some("other")).unwrap_err().code,
            Code::WorkflowRefUnknown
        );
        // Its declaration was refused (an unsafe path, say): no workflow to fall back on.
        assert_eq!(
            select_index(&m, &[], None).unwrap_err().code,
            Code::WorkflowRefUnknown
        );
    }

    #[test]
    fn multi_workflow_rules() {
        let m = manifest(json!([
            {"id": "a", "workflow": "workflows/a/workflow.md", "graph": "workflows/a/workflow.graph.json"},
            {"id": "b", "workflow": "workflows/b/workflow.md", "graph": "workflows/b/workflow.graph.json"}
        ]));
        assert_eq!(
            select_index(&m, &["a", "b"], None).unwrap_err().code,
            Code::WorkflowRefRequired
        );
        assert_eq!(select_index(&m, &["a", "b"], Some("b")), Ok(1));
        let err = select_index(&m, &["a", "b"], Some("c")).unwrap_err();
        assert_eq!(err.code, Code::WorkflowRefUnknown);
        assert!(err.hint.unwrap().contains("a, b"));
    }

    #[test]
    fn entry_under_workflows_dir_derives_its_id() {
        let mut m = manifest(json!([]));
        m.entry.workflow = "workflows/story/workflow.md".into();
        assert_eq!(derived_entry_id(&m), "story");
    }
}
