//! Putting work in the queue: the project as a git remote and a commit a worker can fetch, the
//! package pinned by content, the run's options as a [`RunPayload`].

use crate::payload::RunPayload;
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

/// A submitted unit.
#[derive(Debug, Clone)]
pub struct Submitted {
    pub unit: i64,
    pub package_sha256: String,
    /// The database, without its password.
    pub database: String,
}

/// Pins the package and queues one workflow run.
pub async fn submit_run(
    config: &DbConfig,
    queue_name: &str,
    package: &PinnedPackage,
    source: &ProjectSource,
    payload: &RunPayload,
) -> Result<Submitted, QueueError> {
    let queue = Queue::open(config).await?;
    let sha256 = queue
        .put_package(&package.name, &package.version, &package.bytes)
        .await?;
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
        database: queue.database().to_string(),
    })
}
