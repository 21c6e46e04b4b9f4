//! `baton ralph …`: maestro's `ralph` CLI (lifecycle sessions in `.workflow/.maestro/`).
//! Parsing and printing only; the verbs live in `baton_lifecycle::ralph`.
//!
//! Output follows maestro: prompts, tables and JSON on stdout, diagnostics on stderr; a
//! refusal of one of maestro's verbs is `[ralph <verb>] CODE: message` with `→` hints, any
//! other error `error[CODE]: message` with `help:` lines. With `--json`, a failure is
//! `{"ok": false, "error": {"code", "message", "hint", "details"}}` on stdout.

use baton_lifecycle::ralph::lease::Lease;
use baton_lifecycle::ralph::verbs::{
    self, complete::CompleteArgs, decide::DecideArgs, insert::InsertArgs, ledger::LedgerArgs,
    new::NewArgs,
};
use baton_lifecycle::ralph::{Context, Output, RalphError};
use clap::{Args, Subcommand};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Args)]
pub struct RalphArgs {
    /// Project directory holding `.workflow/.maestro/` (default: the current directory).
    #[arg(long, short = 'p', global = true, value_name = "DIR")]
    pub project: Option<PathBuf>,
    #[command(subcommand)]
    pub command: RalphCommand,
}

#[derive(Debug, Args)]
pub struct Target {
    /// Session folder name under .workflow/.maestro/ (default: the newest running or paused).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// maestro v0.5.50's execution lease.
#[derive(Debug, Args)]
pub struct LeaseFlags {
    /// The session's execution owner: recorded by `next`, required by later calls once set.
    #[arg(long, value_name = "OWNER")]
    pub execution_owner: Option<String>,
    /// The lease holder's epoch; an older epoch than the recorded one is refused.
    #[arg(long, value_name = "N")]
    pub owner_epoch: Option<u64>,
    /// The lease id: recorded by `next`, required by later calls once set.
    #[arg(long, value_name = "ID")]
    pub lease_id: Option<String>,
}

impl LeaseFlags {
    fn lease(self) -> Lease {
        Lease {
            execution_owner: self.execution_owner,
            owner_epoch: self.owner_epoch,
            lease_id: self.lease_id,
        }
    }
}

#[derive(Debug, Args)]
pub struct Mutate {
    #[command(flatten)]
    pub target: Target,
    /// Refuse (exit 4) unless the session's `revision` is still N (compare-and-swap).
    #[arg(long, value_name = "N")]
    pub expect_revision: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub enum RalphCommand {
    /// List effective commands + skills (project overrides global).
    Skills {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// No header and no summary line.
        #[arg(long)]
        quiet: bool,
        /// claude, codex, agent (.agents/) or agy (.agy/).
        #[arg(long)]
        platform: Option<String>,
    },
    /// Health-check a session's status.json (exit 1 on any error finding).
    Check(Target),
    /// Show a session summary.
    Session(Target),
    /// Show the session board: every step with its state.
    Status(Target),
    /// Claim the next pending step and print its prompt (exit 2: nothing to load, 3: a step is active).
    Next {
        #[command(flatten)]
        w: Mutate,
        /// Who claims the step (default: --execution-owner, else <caller pid>@<host>).
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        lease: LeaseFlags,
    },
    /// Record the outcome of the active step.
    Complete {
        /// The step's index in status.json (0-based).
        #[arg(allow_hyphen_values = true)]
        index: String,
        /// DONE | DONE_WITH_CONCERNS | NEEDS_RETRY | BLOCKED
        #[arg(long)]
        status: String,
        /// Artifact path or output excerpt (repeatable).
        #[arg(long)]
        evidence: Vec<String>,
        /// Concerns (with DONE_WITH_CONCERNS).
        #[arg(long)]
        concerns: Option<String>,
        /// Reason (with BLOCKED).
        #[arg(long)]
        reason: Option<String>,
        /// One sentence: what the step accomplished (recorded as completion_summary).
        #[arg(long)]
        summary: Option<String>,
        /// A key decision made (repeatable; completion_decisions).
        #[arg(long)]
        decisions: Vec<String>,
        /// Warnings for the later steps (completion_caveats).
        #[arg(long)]
        caveats: Option<String>,
        /// Work left for later (repeatable; completion_deferred).
        #[arg(long)]
        deferred: Vec<String>,
        /// Refuse unless the step runs this skill.
        #[arg(long, value_name = "NAME")]
        expected_skill: Option<String>,
        /// Refuse unless the index is this one.
        #[arg(long, value_name = "N", allow_hyphen_values = true)]
        expected_step_index: Option<String>,
        /// Refuse unless the claim is held by this owner.
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        lease: LeaseFlags,
        #[command(flatten)]
        w: Mutate,
    },
    /// Mark the active step NEEDS_RETRY.
    Retry {
        /// The step's index in status.json (0-based).
        #[arg(allow_hyphen_values = true)]
        index: String,
        /// Refuse unless the claim is held by this owner.
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        lease: LeaseFlags,
        #[command(flatten)]
        w: Mutate,
    },
    /// The verification ledger: reuse a check made on unchanged files (maestro v0.5.50).
    Ledger {
        /// query | add
        #[arg(long)]
        action: Option<String>,
        /// Who checked, e.g. execute-gate.
        #[arg(long)]
        authority: Option<String>,
        /// What was checked, e.g. quality.
        #[arg(long)]
        dimension: Option<String>,
        /// A file path or id the check covers (repeatable).
        #[arg(long)]
        subject: Vec<String>,
        /// pass | fail | … (add)
        #[arg(long)]
        verdict: Option<String>,
        /// high | medium (default) | low
        #[arg(long)]
        confidence: Option<String>,
        /// Concerns text (add).
        #[arg(long)]
        concerns: Option<String>,
        /// low (default) | medium | high
        #[arg(long)]
        risk_ceiling: Option<String>,
        #[command(flatten)]
        target: Target,
    },
    /// Skip a pending or failed step (a running step or a gate needs --force).
    Skip {
        /// The step's index in status.json (0-based).
        #[arg(allow_hyphen_values = true)]
        index: String,
        /// Why it is skipped (recorded as the step's concerns).
        #[arg(long)]
        reason: Option<String>,
        /// Skip a running step or a decision gate too.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        w: Mutate,
    },
    /// Pause a running session.
    Pause(Mutate),
    /// Resume a paused session; clear a stale active step.
    Resume(Mutate),
    /// Stop a session for good (status failed, abandoned_at recorded).
    Abandon {
        /// Why (recorded as abandon_reason).
        #[arg(long)]
        reason: Option<String>,
        #[command(flatten)]
        w: Mutate,
    },
    /// Free the claimed step of a process that is gone (any claim with --force).
    Release {
        /// Free the claim even when its owner may still be alive.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        w: Mutate,
    },
    /// Insert a fix-loop template after a step.
    Insert {
        /// The step the template goes after.
        #[arg(long, allow_hyphen_values = true)]
        after: String,
        /// post-verify | post-business-test | post-review | post-test | post-goal-audit
        #[arg(long)]
        template: String,
        /// Gap summary (repeatable; for post-goal-audit one group per gap, `G2: …`).
        #[arg(long)]
        gap: Vec<String>,
        /// Retry count of the template's closing gate (default: the gate it follows + 1).
        #[arg(long)]
        retry: Option<u64>,
        #[command(flatten)]
        w: Mutate,
    },
    /// Settle a decision gate: guards, fix-loop insertion, decisions.ndjson.
    Decide {
        /// The step's index in status.json (0-based).
        #[arg(allow_hyphen_values = true)]
        index: String,
        /// proceed | fix | escalate
        #[arg(long)]
        verdict: String,
        /// 0-100
        #[arg(long, allow_hyphen_values = true)]
        confidence: String,
        /// Why (recorded in decisions.ndjson).
        #[arg(long)]
        reason: Option<String>,
        /// Gap summary (repeatable).
        #[arg(long)]
        gap: Vec<String>,
        /// Show the adjusted verdict without changing anything.
        #[arg(long)]
        dry_run: bool,
        /// post-milestone: how to plan a next milestone of several phases (unified|independent).
        #[arg(long)]
        planning_mode: Option<String>,
        #[command(flatten)]
        w: Mutate,
    },
    /// Settle the pending post-milestone gate: insert the next milestone's chain (from
    /// .workflow/state.json), or end the session when there is none.
    Advance {
        /// How to plan a next milestone of several phases: unified | independent.
        #[arg(long)]
        planning_mode: Option<String>,
        /// Show what would happen without changing anything.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        w: Mutate,
    },
    /// Take over a session maestro started so `baton session continue` drives it (the same
    /// as `baton session adopt`).
    Import {
        /// Take it over even when another agent holds its lease.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        target: Target,
    },
    /// Create a session from a stage list.
    New {
        /// What the session should achieve.
        intent: String,
        /// Stages, comma-separated, e.g. analyze,plan,execute,verify,review,test,milestone-complete
        #[arg(long)]
        chain: String,
        /// The phase the session works on (fills {phase} in step args).
        #[arg(long)]
        phase: Option<String>,
        /// The milestone the session belongs to (fills {milestone}).
        #[arg(long)]
        milestone: Option<String>,
        /// independent (default) | unified
        #[arg(long)]
        planning_mode: Option<String>,
        /// full | standard (default) | quick
        #[arg(long)]
        quality_mode: Option<String>,
        /// auto_mode: apply verdicts without asking.
        #[arg(long, short = 'y')]
        auto: bool,
        /// claude (default) | codex | agent | agy
        #[arg(long)]
        platform: Option<String>,
        /// Session id prefix: ralph (default) | maestro
        #[arg(long)]
        source: Option<String>,
        /// Create it even when a running or paused session exists.
        #[arg(long)]
        force: bool,
        /// Print JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

/// How prompts and hints spell the CLI: `$BATON_RALPH_CLI`, else `maestro ralph` when this
/// binary is installed as `maestro` (a drop-in), else `baton ralph`.
fn cli_name() -> String {
    if let Ok(name) = std::env::var("BATON_RALPH_CLI")
        && !name.trim().is_empty()
    {
        return name;
    }
    let argv0 = std::env::args_os().next().map(PathBuf::from);
    let stem = argv0
        .as_deref()
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned());
    match stem.as_deref() {
        Some("maestro") => "maestro ralph".into(),
        _ => "baton ralph".into(),
    }
}

pub fn run(args: RalphArgs) -> anyhow::Result<u8> {
    // Without --project, the project found from the current folder upward.
    let project = args
        .project
        .unwrap_or_else(|| crate::args::project::root(Path::new(".")));
    let ctx = Context::from_env(&project, cli_name());
    if let Some(refused) = overlap(&project) {
        // As main.rs does for a parse error: a script that asked for JSON gets JSON.
        let json = std::env::args_os().skip(1).any(|a| a == "--json");
        return Ok(report(&ctx, "start", json, &refused));
    }
    let (verb, json, result) = dispatch(&ctx, args.command);
    let code = match result {
        Ok(out) => print(&out, json),
        Err(e) => report(&ctx, verb, json, &e),
    };
    warn(&ctx, verb);
    Ok(code)
}

/// What the verb passed over on its way (a damaged session folder), on stderr after its own
/// output: `[ralph next] warning: …` for maestro's verbs, `warning: …` for baton's.
fn warn(ctx: &Context, verb: &str) {
    let mut stderr = std::io::stderr().lock();
    for w in ctx.warnings.take() {
        let line = if MAESTRO_VERBS.contains(&verb) {
            format!("[ralph {verb}] warning: {w}\n")
        } else {
            format!("warning: {w}\n")
        };
        let _ = stderr.write_all(crate::ui::visible(&line).as_bytes());
    }
}

/// The store and the project overlap (see `baton_store::apart`). Without a resolvable store
/// there is nothing to overlap: ralph verbs alone never need one.
fn overlap(project: &Path) -> Option<RalphError> {
    let home = baton_store::resolve_home().ok()?;
    let e = baton_store::Store::new(home).check_apart(project).err()?;
    Some(RalphError::Usage {
        code: e.code(),
        message: match e.hint() {
            Some(hint) => format!("{e}; {hint}"),
            None => e.to_string(),
        },
    })
}

fn dispatch(ctx: &Context, cmd: RalphCommand) -> (&'static str, bool, Result<Output, RalphError>) {
    use RalphCommand as C;
    let s = |t: &Target| t.session.clone();
    match cmd {
        C::Skills {
            json,
            quiet,
            platform,
        } => (
            "skills",
            json,
            verbs::skills::run(ctx, platform.as_deref(), quiet),
        ),
        C::Check(t) => ("check", t.json, verbs::check::run(ctx, s(&t).as_deref())),
        C::Session(t) => (
            "session",
            t.json,
            verbs::session::run(ctx, s(&t).as_deref()),
        ),
        C::Status(t) => ("status", t.json, verbs::status::run(ctx, s(&t).as_deref())),
        C::Next { w, owner, lease } => (
            "next",
            w.target.json,
            verbs::next::run_with(
                ctx,
                s(&w.target).as_deref(),
                owner.as_deref(),
                &lease.lease(),
                w.expect_revision,
                |_| {},
            ),
        ),
        C::Complete {
            index,
            status,
            evidence,
            concerns,
            reason,
            summary,
            decisions,
            caveats,
            deferred,
            expected_skill,
            expected_step_index,
            owner,
            lease,
            w,
        } => {
            let args = CompleteArgs {
                index,
                status,
                evidence,
                concerns,
                reason,
                summary,
                decisions,
                caveats,
                deferred,
                owner,
                lease: lease.lease(),
                expected_skill,
                expected_step_index,
                expect_revision: w.expect_revision,
            };
            let r = verbs::complete::run(ctx, s(&w.target).as_deref(), &args);
            ("complete", w.target.json, r)
        }
        C::Retry {
            index,
            owner,
            lease,
            w,
        } => {
            let args = CompleteArgs {
                index,
                status: "NEEDS_RETRY".into(),
                owner,
                lease: lease.lease(),
                expect_revision: w.expect_revision,
                ..CompleteArgs::default()
            };
            let r = verbs::complete::run(ctx, s(&w.target).as_deref(), &args);
            ("retry", w.target.json, r)
        }
        C::Ledger {
            action,
            authority,
            dimension,
            subject,
            verdict,
            confidence,
            concerns,
            risk_ceiling,
            target,
        } => {
            let args = LedgerArgs {
                action,
                authority,
                dimension,
                subjects: subject,
                verdict,
                confidence,
                concerns,
                risk_ceiling,
            };
            let r = verbs::ledger::run(ctx, s(&target).as_deref(), &args);
            ("ledger", target.json, r)
        }
        C::Skip {
            index,
            reason,
            force,
            w,
        } => {
            let r = verbs::control::skip(
                ctx,
                s(&w.target).as_deref(),
                &index,
                reason.as_deref(),
                force,
                w.expect_revision,
            );
            ("skip", w.target.json, r)
        }
        C::Pause(w) => (
            "pause",
            w.target.json,
            verbs::control::pause(ctx, s(&w.target).as_deref(), w.expect_revision),
        ),
        C::Resume(w) => (
            "resume",
            w.target.json,
            verbs::control::resume(ctx, s(&w.target).as_deref(), w.expect_revision),
        ),
        C::Abandon { reason, w } => {
            let r = verbs::control::abandon(
                ctx,
                s(&w.target).as_deref(),
                reason.as_deref(),
                w.expect_revision,
            );
            ("abandon", w.target.json, r)
        }
        C::Release { force, w } => {
            let r = verbs::control::release(ctx, s(&w.target).as_deref(), force, w.expect_revision);
            ("release", w.target.json, r)
        }
        C::Insert {
            after,
            template,
            gap,
            retry,
            w,
        } => {
            let args = InsertArgs {
                after,
                template,
                gaps: gap,
                retry,
                expect_revision: w.expect_revision,
            };
            let r = verbs::insert::run(ctx, s(&w.target).as_deref(), &args);
            ("insert", w.target.json, r)
        }
        C::Decide {
            index,
            verdict,
            confidence,
            reason,
            gap,
            dry_run,
            planning_mode,
            w,
        } => {
            let args = DecideArgs {
                index,
                verdict,
                confidence,
                reason,
                gaps: gap,
                dry_run,
                expect_revision: w.expect_revision,
                planning_mode,
            };
            let r = verbs::decide::run(ctx, s(&w.target).as_deref(), &args);
            ("decide", w.target.json, r)
        }
        C::Advance {
            planning_mode,
            dry_run,
            w,
        } => {
            let r = verbs::decide::advance(
                ctx,
                s(&w.target).as_deref(),
                planning_mode,
                dry_run,
                w.expect_revision,
            );
            ("advance", w.target.json, r)
        }
        C::Import { force, target } => ("import", target.json, import(ctx, &target, force)),
        C::New {
            intent,
            chain,
            phase,
            milestone,
            planning_mode,
            quality_mode,
            auto,
            platform,
            source,
            force,
            json,
        } => {
            let args = NewArgs {
                intent,
                chain,
                phase,
                milestone,
                planning_mode,
                quality_mode,
                auto,
                platform,
                source,
                force,
            };
            ("new", json, verbs::new::run(ctx, &args))
        }
    }
}

/// `import`: `baton session adopt` under ralph (command files resolved with baton's bundled
/// skills as the last fallback, as the session loop resolves them).
fn import(ctx: &Context, target: &Target, force: bool) -> Result<Output, RalphError> {
    // RalphError has a `From<StoreError>` (IO_FAILED).
    let home = baton_store::resolve_home()?;
    let bundled = ctx.clone().with_bundled_skills(&home)?;
    let a = baton_lifecycle::session::adopt::adopt(&bundled, target.session.as_deref(), force)?;
    Ok(Output::new(super::session::adopt::to_json(&a))
        .out(super::session::adopt::text(&a, "baton session continue")))
}

/// Prints a verb's output; a closed pipe is not an error worth reporting.
fn print(out: &Output, json: bool) -> u8 {
    let mut stdout = std::io::stdout().lock();
    let mut stderr = std::io::stderr().lock();
    if json {
        let text = if out.json_lines {
            out.json
                .as_array()
                .map(|items| items.iter().map(|v| format!("{v}\n")).collect::<String>())
                .unwrap_or_default()
        } else {
            format!(
                "{}\n",
                serde_json::to_string_pretty(&out.json).unwrap_or_else(|_| out.json.to_string())
            )
        };
        let _ = stdout.write_all(text.as_bytes());
    } else {
        // Prompts, boards and tables quote the session's files and the model's words.
        let _ = stdout.write_all(crate::ui::visible(&out.stdout).as_bytes());
    }
    let _ = stderr.write_all(crate::ui::visible(&out.stderr).as_bytes());
    let _ = stdout.flush();
    out.exit
}

fn report(ctx: &Context, verb: &str, json: bool, e: &RalphError) -> u8 {
    let hints = e.hints(&ctx.cli);
    if json {
        let mut body = json!({
            "ok": false,
            "error": {
                "code": e.code(),
                "message": e.to_string(),
                "hint": if hints.is_empty() { None } else { Some(hints.join("; ")) },
                "details": e.details(),
            }
        });
        if let RalphError::Findings(findings) = e {
            body["findings"] = json!(findings);
        }
        if let RalphError::Corrupt { issues, .. } = e {
            body["issues"] = json!(issues);
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&body).unwrap_or_else(|_| body.to_string())
        );
    } else {
        let text = if MAESTRO_VERBS.contains(&verb) {
            maestro_text(verb, e, &hints)
        } else {
            baton_text(e, &hints)
        };
        let _ = std::io::stderr()
            .lock()
            .write_all(crate::ui::visible(&text).as_bytes());
    }
    e.exit_code()
}

/// Whether `args` (the process arguments after the program name) call one of maestro's verbs
/// under `ralph`: a parse error there (`complete 0` without `--status`, an unknown option)
/// exits 1, as maestro's parser does, instead of clap's 2.
pub fn is_maestro_verb_call(args: &[std::ffi::OsString]) -> bool {
    let mut words = args.iter().map(|a| a.to_string_lossy());
    let mut takes_value = false;
    let mut seen_ralph = false;
    for w in words.by_ref() {
        if takes_value {
            takes_value = false;
            continue;
        }
        if w.starts_with('-') {
            // `--project DIR`, `-p DIR`, `--color WHEN` take the next word.
            takes_value = matches!(w.as_ref(), "--project" | "-p" | "--color");
            continue;
        }
        if !seen_ralph {
            if w != "ralph" {
                return false;
            }
            seen_ralph = true;
            continue;
        }
        return MAESTRO_VERBS.contains(&w.as_ref());
    }
    false
}

/// The verbs maestro's `ralph` has. Their refusals keep maestro's `[ralph <verb>] CODE:` lines
/// (skills and agents parse them; the compatibility suite pins them); the verbs baton added
/// and baton's own checks report as every other baton command does.
const MAESTRO_VERBS: [&str; 7] = [
    "skills", "check", "session", "next", "complete", "retry", "ledger",
];

fn maestro_text(verb: &str, e: &RalphError, hints: &[String]) -> String {
    // Alternatives line up under the hint they follow, as maestro prints them.
    error_text(
        &format!("[ralph {verb}] {}", e.code()),
        e,
        hints,
        "  → ",
        "    ",
    )
}

/// `error[CODE]: message`, the details indented below it, then `help:` lines.
fn baton_text(e: &RalphError, hints: &[String]) -> String {
    error_text(
        &format!("error[{}]", e.code()),
        e,
        hints,
        "  help: ",
        "        ",
    )
}

/// `{head}: message`, the error's details, then each hint after `hint_mark` (an `or:`
/// alternative after `alternative_mark`).
fn error_text(
    head: &str,
    e: &RalphError,
    hints: &[String],
    hint_mark: &str,
    alternative_mark: &str,
) -> String {
    let mut text = format!("{head}: {e}\n");
    for line in e.details() {
        text.push_str(&line);
        text.push('\n');
    }
    for h in hints {
        let mark = if h.starts_with("or:") {
            alternative_mark
        } else {
            hint_mark
        };
        text.push_str(&format!("{mark}{h}\n"));
    }
    text
}
