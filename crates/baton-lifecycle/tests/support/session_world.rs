//! A project and a home with the sample skills, and a fresh ralph session in it: what the
//! session tests start from.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use baton_lifecycle::ralph::Context;
use baton_lifecycle::ralph::check::{self, Scope};
use baton_lifecycle::ralph::verbs::{self, new::NewArgs};
use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub struct World {
    pub tmp: tempfile::TempDir,
    pub ctx: Context,
    /// The session's `status.json`.
    pub status: PathBuf,
}

impl World {
    /// The session's `status.json`, which must pass `ralph check` without an error.
    pub fn doc(&self) -> Value {
        let doc: Value = serde_json::from_slice(&std::fs::read(&self.status).unwrap()).unwrap();
        let findings = check::check(&self.ctx, doc.as_object(), &[], Scope::All);
        assert!(!check::has_errors(&findings), "{findings:?}");
        doc
    }

    /// The session's decision log, one value per line.
    pub fn decisions(&self) -> Vec<Value> {
        std::fs::read_to_string(self.status.with_file_name("decisions.ndjson"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// An auto-mode (`-y`) session made by `ralph new` from the stage list `chain`, claimed in
/// the name of `owner`: its gates are settled without asking anybody.
pub fn world(chain: &str, owner: &str) -> World {
    world_with(chain, owner, true)
}

/// [`world`] with `auto_mode` chosen: without it, a gate's verdict waits for a person.
pub fn world_with(chain: &str, owner: &str, auto: bool) -> World {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let project = tmp.path().join("project");
    let skills = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/skills");
    baton_testkit::copy_dir(&skills.join("claude"), &home.join(".claude"));
    baton_testkit::copy_dir(&skills.join("maestro"), &home.join(".maestro"));
    std::fs::create_dir_all(&project).unwrap();
    let ctx = Context {
        project,
        home: Some(home.clone()),
        maestro_home: Some(home.join(".maestro")),
        cli: "baton ralph".into(),
        owner: owner.into(),
        lock_timeout: Duration::from_secs(5),
        bundled_commands: None,
        warnings: Default::default(),
    };
    let out = verbs::new::run(
        &ctx,
        &NewArgs {
            intent: "add CSV export".into(),
            chain: chain.into(),
            auto,
            ..NewArgs::default()
        },
    )
    .unwrap();
    let status = PathBuf::from(out.json["path"].as_str().unwrap());
    World { tmp, ctx, status }
}
