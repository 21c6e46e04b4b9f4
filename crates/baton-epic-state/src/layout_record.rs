//! The artifacts folder an epic works in, recorded in baton's store when the first epic of the
//! project starts, out of every model's reach. A later command whose configuration names
//! another folder (a phase's model that edited `_bmad/bmm/config.yaml` to point at a folder of
//! its own, with a forged `sprint-status.yaml`) is refused: the change is reported, never
//! followed. A stories-mode epic (`baton epic run --stories`) also records its spec folder
//! (`storiesFolder`): `baton epic resume` goes on only in the folder recorded.

use super::error::{EpicError, Result};
use baton_bmad::layout::Layout;
use baton_store::Store;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

const FILE_NAME: &str = "epic-layout.json";

/// Where the record of the project at `root` (canonical) lives.
pub fn path(store: &Store, root: &Path) -> PathBuf {
    store
        .home()
        .join("projects")
        .join(baton_store::projects::project_id(root))
        .join(FILE_NAME)
}

/// The record as stored; `None` when there is none.
fn read(path: &Path) -> Result<Option<Value>> {
    let bytes = match baton_autopilot::untrusted::read_path(
        path,
        baton_autopilot::untrusted::limit::CONFIG,
    ) {
        Ok(Some(b)) => b,
        Ok(None) => return Ok(None),
        Err(e) => {
            return Err(EpicError::failure(
                e.code(),
                format!("{}: {e}", path.display()),
            ));
        }
    };
    let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
        EpicError::failure(
            "EPIC_LAYOUT_RECORD_INVALID",
            format!("{}: {e}", path.display()),
        )
        .hint("remove the file: the next `baton epic` command records the folder again")
    })?;
    Ok(Some(value))
}

fn recorded(path: &Path) -> Result<Option<String>> {
    Ok(read(path)?
        .and_then(|v| v.get("implementationArtifacts").cloned())
        .and_then(|v| v.as_str().map(str::to_owned)))
}

/// Refuses a layout other than the recorded one.
pub fn check(store: &Store, root: &Path, layout: &Layout) -> Result<()> {
    let record = path(store, root);
    match recorded(&record)? {
        Some(rel) if rel != layout.rel => Err(EpicError::usage(
            "EPIC_LAYOUT_CHANGED",
            format!(
                "{} now names {:?} as the implementation artifacts folder, but this project's epics work in {:?}; baton does not follow the change",
                layout.from,
                layout.rel,
                rel
            ),
        )
        .hint(format!(
            "a phase's model may have changed it: restore the setting. If you moved the folder yourself, remove {} and run the command again",
            record.display()
        ))),
        _ => Ok(()),
    }
}

/// Records the layout (once; the same layout is not written again).
pub fn save(store: &Store, root: &Path, layout: &Layout) -> Result<()> {
    let record = path(store, root);
    if recorded(&record)?.as_deref() == Some(layout.rel.as_str()) {
        return Ok(());
    }
    let body = json!({
        "implementationArtifacts": layout.rel,
        "from": layout.from,
        "recordedAt": baton_store::time::now_rfc3339(),
    });
    let mut bytes = serde_json::to_vec_pretty(&body)
        .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
    bytes.push(b'\n');
    if let Some(dir) = record.parent() {
        std::fs::create_dir_all(dir).map_err(EpicError::io("create", dir))?;
    }
    baton_store::durable::atomic_write(&record, &bytes)?;
    Ok(())
}

/// The spec folder of the project's stories-mode epic, as recorded when it started (`None`: the
/// project's epic runs in sprint mode, or none started).
pub fn recorded_stories(store: &Store, root: &Path) -> Result<Option<String>> {
    Ok(read(&path(store, root))?
        .and_then(|v| v.get("storiesFolder").cloned())
        .and_then(|v| v.as_str().map(str::to_owned)))
}

/// Records the spec folder of the epic that starts (`None`: a sprint-mode epic), after
/// [`save`]; written only when it changes.
pub fn save_stories(store: &Store, root: &Path, folder: Option<&str>) -> Result<()> {
    let record = path(store, root);
    let Some(Value::Object(mut map)) = read(&record)? else {
        return Ok(());
    };
    if map.get("storiesFolder").and_then(Value::as_str) == folder {
        return Ok(());
    }
    match folder {
        Some(f) => map.insert("storiesFolder".into(), json!(f)),
        None => map.remove("storiesFolder"),
    };
    let mut bytes = serde_json::to_vec_pretty(&Value::Object(map))
        .map_err(|e| EpicError::failure("EPIC_IO_FAILED", e.to_string()))?;
    bytes.push(b'\n');
    baton_store::durable::atomic_write(&record, &bytes)?;
    Ok(())
}
