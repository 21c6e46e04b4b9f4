//! Putting work in the queue: the project as a git remote and a commit a worker can fetch, the
//! package pinned by content, the run's options as a [`RunPayload`].

use crate::payload::{ReplayPayload, RunPayload};
use baton_package::{ValidateOptions, pack, validate_path};
use baton_queue::{DbConfig, NewUnit, Queue, QueueError, UnitKind};
use std::path::Path;

pub use baton_queue::source::{
    ProjectSource, QUEUE_COMMIT_NOT_PUSHED, QUEUE_NO_REMOTE, QUEUE_PROJECT_NOT_GIT,
    QUEUE_REMOTE_UNREACHABLE, SubmitError, check_pushed, project_remote, project_source,
};

/// A package validated and packed, ready to be pinned.
pub struct PinnedPackage {
    pub name: String,
    pub version: String,
    pub bytes: Vec<u8>,
}

/// Validates the package (for `workflow` when given) and packs it as it will be pinned.
pub fn pack_package(path: &Path, workflow: Option<&str>) -> Result<PinnedPackage, SubmitError> {
    let report = validate_path(
        path,
        &ValidateOptions {
            workflow: workflow.map(str::to_owned),
            ..Default::default()
        },
    );
    let Some(package) = report.package else {
        return Err(SubmitError {
            code: "PACKAGE_INVALID",
            message: format!("{} is not a valid package", path.display()),
            hint: Some(format!("`baton validate {}` says why", path.display())),
            invalid: true,
        });
    };
    let packed = pack::pack(package.files()).map_err(|e| SubmitError {
        code: "PACKAGE_PACK_FAILED",
        message: format!("cannot pack {}: {e}", path.display()),
        hint: None,
        invalid: false,
    })?;
    Ok(PinnedPackage {
        name: package.name().to_string(),
        version: package.version().to_string(),
        bytes: packed.bytes,
    })
}

/// A recorded trace read and checked, ready to be pinned.
pub struct PinnedTrace {
    /// Its file name (no path travels).
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Reads the trace a queued run replays, refusing one that is not a trace before anything is
/// queued.
pub fn read_trace(path: &Path) -> Result<PinnedTrace, SubmitError> {
    let bytes = std::fs::read(path).map_err(|e| SubmitError {
        code: "TRACE_INVALID",
        message: format!("cannot read the trace {}: {e}", path.display()),
        hint: Some("give --replay the path of a trace recorded with --record".into()),
        invalid: true,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    baton_llm::Trace::parse(&text).map_err(|e| SubmitError {
        code: e.code(),
        message: format!("{} is not a trace baton can replay: {e}", path.display()),
        hint: Some("give --replay a trace recorded with --record".into()),
        invalid: true,
    })?;
    Ok(PinnedTrace {
        name: path
            .file_name()
            .map_or_else(|| "trace.json".into(), |n| n.to_string_lossy().into_owned()),
        bytes,
    })
}

/// A submitted unit.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub unit: i64,
    /// The package's content digest (as `baton package list` and `runs show` print it).
    pub package_sha256: String,
    /// The pinned trace (sha256 of its bytes), for a replayed run.
    pub trace_sha256: Option<String>,
    /// The payload as queued.
    pub payload: RunPayload,
    /// The database, without its password.
    pub database: String,
}

/// Pins the package (and the trace a replayed run answers from) and queues one workflow run.
pub async fn submit_run(
    config: &DbConfig,
    queue_name: &str,
    package: &PinnedPackage,
    trace: Option<&PinnedTrace>,
    source: &ProjectSource,
    payload: &RunPayload,
) -> Result<Submitted, QueueError> {
    let queue = Queue::open(config).await?;
    let sha256 = queue
        .put_package(&package.name, &package.version, &package.bytes)
        .await?;
    let mut payload = payload.clone();
    let mut trace_sha256 = None;
    if let Some(t) = trace {
        let sha = queue.put_trace(&t.name, &t.bytes).await?;
        payload.replay = Some(ReplayPayload {
            sha256: sha.clone(),
            name: t.name.clone(),
        });
        trace_sha256 = Some(sha);
    }
    let unit = queue
        .submit(&NewUnit {
            kind: UnitKind::Run,
            queue: queue_name.to_string(),
            payload: payload.to_value(),
            package_sha256: Some(sha256.clone()),
            project_remote: source.remote.clone(),
            base_commit: source.base_commit.clone(),
            max_attempts: None,
        })
        .await?;
    Ok(Submitted {
        unit,
        package_sha256: sha256,
        trace_sha256,
        payload,
        database: queue.database().to_string(),
    })
}
