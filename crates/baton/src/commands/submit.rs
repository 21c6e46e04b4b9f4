//! `baton run <PKG> --queue URL`: put a workflow run in the PostgreSQL work queue instead of
//! running it (the work is `baton_worker::submit`). The package is pinned into the database by
//! content; the project travels as its git remote URL and the commit to start from; the model
//! travels by name and endpoint (never a key: the worker's own environment provides it), or,
//! with `--replay`, as the recorded trace pinned by content beside the package.

use crate::args::ContextArg;
use crate::args::run::RunArgs;
use crate::exit;
use crate::failure::Failure;
use crate::ui::{Paint, color::err};
use baton_engine::runner::{self, StartRun};
use baton_queue::DEFAULT_QUEUE;
use baton_worker::RunPayload;
use baton_worker::payload::{BaseUrlFrom, BudgetPayload, ModelPayload};
use baton_worker::submit::{self as submission, ProjectSource, SubmitError};
use serde_json::{Value, json};

fn submit_failure(e: SubmitError) -> Failure {
    let code = if e.invalid {
        exit::INVALID
    } else {
        exit::FAILURE
    };
    Failure::new(e.code, e.message, code).hint(e.hint)
}

/// The run's options as the worker needs them: no key, no host path.
fn payload(args: &RunArgs, source: &ProjectSource, package_name: &str) -> RunPayload {
    let base_url = match &args.model.base_url {
        Some(url) => Some((url.clone(), BaseUrlFrom::Flag)),
        None if args.model.replay.is_none() => std::env::var("OPENAI_BASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .map(|url| (url, BaseUrlFrom::Env)),
        None => None,
    };
    RunPayload {
        package: package_name.to_string(),
        workflow: args.workflow.clone(),
        agent: args.agent.clone(),
        inputs: args.inputs.clone(),
        autopilot: !args.no_autopilot,
        vars: args
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect(),
        project_subdir: source.subdir.clone(),
        model: ModelPayload {
            // A replayed run names no model: the trace answers (a worker's --model can still
            // run it live).
            name: args.model.model.clone().or_else(|| {
                std::env::var("BATON_MODEL")
                    .ok()
                    .filter(|_| args.model.replay.is_none())
            }),
            base_url: base_url.as_ref().map(|(url, _)| url.clone()),
            base_url_from: base_url.map(|(_, from)| from),
            api: crate::args::ApiArg::api(args.model.api).map(|a| a.as_str().to_string()),
            context: args.model.context.map(|c| {
                match c {
                    ContextArg::Node => "node",
                    ContextArg::Full => "full",
                }
                .to_string()
            }),
            context_tokens: args.model.context_tokens,
        },
        budget: BudgetPayload {
            tokens: args.budget.budget_tokens,
            usd: args.budget.budget_usd,
        },
        // Set once the trace is pinned.
        replay: None,
    }
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
    let config =
        crate::queue_db::db_config(args.queue.as_deref(), args.db_env.as_deref(), "--queue URL")
            .map_err(|e| crate::queue_db::failure(&e))?;
    // The package and the project first, as a run here checks them.
    let start = StartRun {
        package: &args.package,
        project: &args.project,
        workflow: args.workflow.as_deref(),
        agent: args.agent.as_deref(),
    };
    runner::check_start(&start).map_err(|e| Failure::from(&e))?;
    let source = submission::project_source(&args.project).map_err(submit_failure)?;
    let package = submission::pack_package(&args.package, args.workflow.as_deref())
        .map_err(submit_failure)?;
    let trace = args
        .model
        .replay
        .as_deref()
        .map(submission::read_trace)
        .transpose()
        .map_err(submit_failure)?;
    if source.dirty {
        eprintln!(
            "{} the project has uncommitted changes; the run starts from commit {} without them",
            err(Paint::Warn, "warning:"),
            &source.base_commit[..12.min(source.base_commit.len())]
        );
    }
    let payload = payload(args, &source, &package.name);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::new("IO_ERROR", e.to_string(), exit::FAILURE))?;
    let submitted = runtime
        .block_on(submission::submit_run(
            &config,
            DEFAULT_QUEUE,
            &package,
            trace.as_ref(),
            &source,
            &payload,
        ))
        .map_err(|e| crate::queue_db::failure(&e))?;
    let (id, sha256, database) = (
        submitted.unit,
        &submitted.package_sha256,
        &submitted.database,
    );
    let replay = submitted.payload.replay.as_ref();
    if args.model.json {
        let doc = json!({
            "unit": id,
            "kind": "run",
            "queue": DEFAULT_QUEUE,
            "database": database,
            "package": {"name": package.name, "version": package.version, "sha256": sha256},
            "project": {
                "remote": source.remote,
                "remoteName": source.remote_name,
                "baseCommit": source.base_commit,
                "subdir": source.subdir,
            },
            "trace": replay.map(|r| json!({"name": r.name, "sha256": r.sha256})),
            "payload": submitted.payload.to_value(),
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).unwrap_or_else(|_| doc.to_string())
        );
    } else {
        outln!("queued unit {id} in {database}");
        // The package's content digest, cut as `runs show` cuts it.
        outln!(
            "  package {} {} (sha256 {})",
            package.name,
            package.version,
            &sha256[..16.min(sha256.len())]
        );
        if let Some(r) = replay {
            outln!(
                "  replays {} (sha256 {}): a worker answers from it, offline",
                r.name,
                &r.sha256[..16.min(r.sha256.len())]
            );
        }
        outln!(
            "  project {} at {}",
            source.remote,
            &source.base_commit[..12.min(source.base_commit.len())]
        );
        outln!("  `baton worker` runs it; `baton queue status` follows it");
    }
    Ok(())
}
