//! `baton session adopt`: take over a session maestro started (its folder and files kept) so
//! `baton session continue` drives it to the end. The library does the work
//! (`baton_lifecycle::session::adopt`); `baton ralph import` is the same takeover.

use super::args::AdoptArgs;
use super::context::context;
use super::errors::failure;
use crate::exit;
use crate::failure::Failure;
use baton_lifecycle::ralph::check::Level;
use baton_lifecycle::session::adopt::{self, Adopted};
use serde_json::json;

pub fn run(args: &AdoptArgs) -> anyhow::Result<u8> {
    let project = &args.target.project;
    if !project.is_dir() {
        let f = Failure::new(
            "PROJECT_NOT_FOUND",
            format!("{} is not a directory", project.display()),
            exit::INVALID,
        )
        .hint(Some("pass the project directory with --project DIR".into()));
        return Ok(f.report(args.json));
    }
    let store = baton_store::Store::open_default()?;
    if let Err(e) = store.check_apart(project) {
        return Ok(Failure::from(&e).report(args.json));
    }
    let ctx = match context(project).with_bundled_skills(store.home()) {
        Ok(c) => c,
        Err(e) => return Ok(failure(&e).report(args.json)),
    };
    match adopt::adopt(&ctx, args.target.session.as_deref(), args.force) {
        Ok(a) => {
            if args.json {
                crate::ui::print_json(&to_json(&a))?;
            } else {
                out!(
                    "{}",
                    crate::ui::visible(&text(&a, "baton session continue"))
                );
            }
            Ok(exit::OK)
        }
        Err(e) => Ok(failure(&e).report(args.json)),
    }
}

pub fn to_json(a: &Adopted) -> serde_json::Value {
    json!({
        "ok": true,
        "session_id": a.session_id,
        "status": a.status,
        "changes": a.changes,
        "findings": a.findings,
    })
}

/// What was taken over and changed, then the command that goes on (`continue_with`).
pub fn text(a: &Adopted, continue_with: &str) -> String {
    let mut out = format!("adopted {} ({})\n", a.session_id, a.status);
    if a.changes.is_empty() {
        out.push_str("  nothing to change\n");
    }
    for c in &a.changes {
        out.push_str(&format!("  {c}\n"));
    }
    for f in a.findings.iter().filter(|f| f.level == Level::W) {
        out.push_str(&format!("  ! {}\n", f.line()));
    }
    out.push_str(&format!(
        "go on with: {continue_with} --session {}\n",
        a.session_id
    ));
    out
}
