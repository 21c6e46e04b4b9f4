//! Unit-test setup shared by the verbs' tests: a context on a temporary project and a new
//! session in it.

use super::Context;
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
