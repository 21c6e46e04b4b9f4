//! Unit-test setup shared by the verbs' tests: a context on a temporary project and a new
//! session in it.

use super::Context;
use super::chain::PlanningMode;
use super::error::{RalphError, Result};
use super::milestone_gate::{MilestonePlanner, Outcome};
use super::session::Session;
use super::verbs::Output;
use super::verbs::new::{self, NewArgs};
use std::path::{Path, PathBuf};

/// A context on `project` that sees no home directory (no global command files).
pub(crate) fn context(project: &Path) -> Context {
    Context {
        project: project.to_path_buf(),
        home: None,
        maestro_home: None,
        cli: "baton ralph".into(),
        owner: "test".into(),
        lock_timeout: std::time::Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    }
}

/// Creates a session of `chain`; returns its status.json.
pub(crate) fn new_session(ctx: &Context, chain: &str) -> PathBuf {
    let args = NewArgs {
        intent: "x".into(),
        chain: chain.into(),
        ..Default::default()
    };
    let out = new::run(ctx, &args).unwrap();
    PathBuf::from(out.json["path"].as_str().unwrap())
}

/// A planner for tests that never reach the milestone gate.
struct NoMilestones;

impl MilestonePlanner for NoMilestones {
    fn evaluate(&self, _: &Context, _: &Session, _: Option<PlanningMode>) -> Result<Outcome> {
        Err(RalphError::usage(
            "NO_PLANNER",
            "no milestone planner in this test",
        ))
    }

    fn clear_current(&self, _: &Context, _: &str) -> Result<()> {
        Ok(())
    }
}

/// `decide` for gates other than the milestone gate (no planner).
pub(crate) mod decide {
    pub(crate) use crate::verbs::decide::DecideArgs;

    pub(crate) fn run(
        ctx: &super::Context,
        session: Option<&str>,
        args: &DecideArgs,
    ) -> super::Result<super::Output> {
        crate::verbs::decide::run(ctx, session, args, &super::NoMilestones)
    }
}
