//! `baton run <PKG> --queue URL`: put a workflow run in the PostgreSQL work queue instead of
//! running it. The package is pinned into the database by content; the project travels as its
//! git remote URL and the commit to start from; the model travels by name and endpoint (never
//! a key: the worker's own environment provides it).

use crate::cli::{ContextArg, RunArgs};
use crate::exit;
use crate::failure::Failure;
use crate::ui::{Paint, color::err};
use baton_engine::runner::{self, StartRun};
use baton_package::{ValidateOptions, pack, validate_path};
use baton_queue::{DEFAULT_QUEUE, DbConfig, NewUnit, Queue, QueueError, UnitKind, UrlSource};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The project is not inside a git repository (or has no commit).
pub const QUEUE_PROJECT_NOT_GIT: &str = "QUEUE_PROJECT_NOT_GIT";
/// The project's repository has no remote a worker could fetch it from.
pub const QUEUE_NO_REMOTE: &str = "QUEUE_NO_REMOTE";

/// Where a queued run's project comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectSource {
    /// The remote's URL (a local path made absolute).
    pub remote: String,
    /// The remote's name in the project's repository.
    pub remote_name: String,
    /// The commit the run starts from (HEAD).
    pub base_commit: String,
    /// The project directory inside the repository ("" for its root), with `/`.
    pub subdir: String,
    /// Whether the working tree has changes that do not travel.
    pub dirty: bool,
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Reads the project's git remote and base commit, or says why it cannot travel.
pub fn project_source(project: &Path) -> Result<ProjectSource, Failure> {
    let shown = project.display();
    let not_git = |what: String| {
        Failure::new(QUEUE_PROJECT_NOT_GIT, what, exit::INVALID).hint(Some(
            "a queued run's project travels as a git remote and a commit: run `git init`, commit the project, add a remote (`git remote add origin URL`) and push, or run it here without --queue".into(),
        ))
    };
    let Some(top) = git(project, &["rev-parse", "--show-toplevel"]) else {
        return Err(not_git(format!("{shown} is not in a git repository")));
    };
    let Some(base_commit) = git(project, &["rev-parse", "--verify", "HEAD^{commit}"]) else {
        return Err(not_git(format!(
            "the git repository of {shown} has no commit yet"
        )));
    };
    let remotes = git(project, &["remote"]).unwrap_or_default();
    let names: Vec<&str> = remotes.lines().filter(|l| !l.is_empty()).collect();
    let remote_name = if names.contains(&"origin") {
        "origin"
    } else if let Some(first) = names.first() {
        first
    } else {
        return Err(Failure::new(
            QUEUE_NO_REMOTE,
            format!("the git repository of {shown} has no remote, so no worker could fetch it"),
            exit::INVALID,
        )
        .hint(Some(
            "add one the workers can reach (`git remote add origin URL`; a path to a bare repository works on one machine or a shared disk) and push the commit to start from".into(),
        )));
    };
    let url = git(project, &["remote", "get-url", remote_name]).unwrap_or_default();
    let remote = absolute_remote(&url, Path::new(&top));
    let canonical_project = std::fs::canonicalize(project).unwrap_or(project.to_path_buf());
    let canonical_top = std::fs::canonicalize(&top).unwrap_or(PathBuf::from(&top));
    let subdir = canonical_project
        .strip_prefix(&canonical_top)
        .map(|p| {
            p.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        })
        .unwrap_or_default();
    let dirty = git(project, &["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|s| !s.is_empty());
    Ok(ProjectSource {
        remote,
        remote_name: remote_name.to_string(),
        base_commit,
        subdir,
        dirty,
    })
}

/// A remote that is a relative local path is made absolute (git reads it against the
/// repository's top); URLs and absolute paths are kept as they are.
fn absolute_remote(url: &str, top: &Path) -> String {
    let looks_local = !url.contains("://") && !url.contains(':') && !url.is_empty();
    if looks_local && Path::new(url).is_relative() {
        let joined = top.join(url);
        return std::fs::canonicalize(&joined)
            .unwrap_or(joined)
            .display()
            .to_string();
    }
    url.to_string()
}

fn queue_failure(e: &QueueError) -> Failure {
    let code = match e {
        QueueError::UrlInvalid { .. }
        | QueueError::EnvMissing { .. }
        | QueueError::InvalidInput(_) => exit::INVALID,
        _ => exit::FAILURE,
    };
    Failure::new(e.code(), e.to_string(), code).hint(e.hint())
}

/// The run's options as the worker needs them: no key, no host path.
fn payload(args: &RunArgs, source: &ProjectSource, package_name: &str) -> Value {
    let vars: serde_json::Map<String, Value> = args
        .vars
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let context = args.model.context.map(|c| match c {
        ContextArg::Node => "node",
        ContextArg::Full => "full",
    });
    json!({
        "package": package_name,
        "workflow": args.workflow,
        "agent": args.agent,
        "inputs": args.inputs,
        "autopilot": !args.no_autopilot,
        "vars": vars,
        "projectSubdir": source.subdir,
        "model": {
            "name": args.model.model.clone().or_else(|| std::env::var("BATON_MODEL").ok()),
            "baseUrl": args.model.base_url.clone().or_else(|| std::env::var("OPENAI_BASE_URL").ok()),
            "context": context,
            "contextTokens": args.model.context_tokens,
        },
        "budget": {
            "tokens": args.budget.budget_tokens,
            "usd": args.budget.budget_usd,
        },
    })
}

/// `baton run … --queue URL`.
pub fn run(args: &RunArgs) -> anyhow::Result<u8> {
    let json_out = args.model.json;
    match submit(args) {
        Ok(()) => Ok(exit::OK),
        Err(f) => Ok(f.report(json_out)),
    }
}

fn submit(args: &RunArgs) -> Result<(), Failure> {
    let config = match (&args.queue, &args.db_env) {
        (_, Some(name)) => DbConfig::from_env(name),
        (Some(url), None) => DbConfig::from_url(url, UrlSource::Flag),
        (None, None) => Err(QueueError::InvalidInput(
            "give the queue with --queue URL or --db-env NAME".into(),
        )),
    }
    .map_err(|e| queue_failure(&e))?;
    for w in config.warnings() {
        eprintln!("{} {w}", err(Paint::Warn, "warning:"));
    }
    // The package and the project first, as a run here checks them.
    let start = StartRun {
        package: &args.package,
        project: &args.project,
        workflow: args.workflow.as_deref(),
        agent: args.agent.as_deref(),
    };
    runner::check_start(&start).map_err(|e| Failure::from(&e))?;
    let source = project_source(&args.project)?;
    let report = validate_path(
        &args.package,
        &ValidateOptions {
            workflow: args.workflow.clone(),
            ..Default::default()
        },
    );
    let Some(package) = report.package else {
        return Err(Failure::new(
            "PACKAGE_INVALID",
            format!("{} is not a valid package", args.package.display()),
            exit::INVALID,
        ));
    };
    let packed = pack::pack(package.files()).map_err(|e| {
        Failure::new(
            "PACKAGE_PACK_FAILED",
            format!("cannot pack {}: {e}", args.package.display()),
            exit::FAILURE,
        )
    })?;
    if source.dirty {
        eprintln!(
            "{} the project has uncommitted changes; the run starts from commit {} without them",
            err(Paint::Warn, "warning:"),
            &source.base_commit[..12.min(source.base_commit.len())]
        );
    }
    let payload = payload(args, &source, package.name());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new("IO_ERROR", e.to_string(), exit::FAILURE))?;
    let (id, sha256, database) = runtime
        .block_on(async {
            let queue = Queue::open(&config).await?;
            let sha256 = queue
                .put_package(package.name(), package.version(), &packed.bytes)
                .await?;
            let id = queue
                .submit(&NewUnit {
                    kind: UnitKind::Run,
                    queue: DEFAULT_QUEUE.to_string(),
                    payload: payload.clone(),
                    package_sha256: Some(sha256.clone()),
                    project_remote: source.remote.clone(),
                    base_commit: source.base_commit.clone(),
                    max_attempts: None,
                })
                .await?;
            Ok::<_, QueueError>((id, sha256, queue.database().to_string()))
        })
        .map_err(|e| queue_failure(&e))?;
    if args.model.json {
        let doc = json!({
            "unit": id,
            "kind": "run",
            "queue": DEFAULT_QUEUE,
            "database": database,
            "package": {"name": package.name(), "version": package.version(), "sha256": sha256},
            "project": {
                "remote": source.remote,
                "remoteName": source.remote_name,
                "baseCommit": source.base_commit,
                "subdir": source.subdir,
            },
            "payload": payload,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
        );
    } else {
        outln!("queued unit {id} in {database}");
        outln!(
            "  package {} {} (sha256 {})",
            package.name(),
            package.version(),
            &sha256[..12]
        );
        outln!(
            "  project {} at {}",
            source.remote,
            &source.base_commit[..12.min(source.base_commit.len())]
        );
        outln!("  `baton worker` runs it; `baton queue status` follows it");
    }
    Ok(())
}
