//! `baton session start "<intent>"`: the build phase (questions, the chain, confirmation), then
//! the ticks.

use super::args::{Quality, StartArgs};
use super::drive::{self, load};
use super::report::{self, Ended, Outcome};
use super::setup::{self, Setup};
use super::{errors, prompt, text};
use crate::exit;
use crate::failure::Failure;
use crate::signals;
use baton_lifecycle::session::build::BuildError;
use baton_lifecycle::session::infer::QualityMode;
use baton_lifecycle::session::run::Spent;
use baton_lifecycle::session::start::{self, Plan, StartOptions, StartOutcome};
use baton_lifecycle::session::step_run::Models;
use baton_llm::{ChatModel, RecordingModel};
use std::collections::BTreeMap;
use tokio_util::sync::CancellationToken;

/// The trace of the decomposition call in a `--record`/`--replay` directory.
pub const DECOMPOSE_TRACE: &str = "start.trace.json";

fn build_failure(e: &BuildError) -> Failure {
    if let BuildError::Ralph(r) = e {
        return errors::failure(r);
    }
    let code = match e {
        BuildError::DecompositionInvalid { .. }
        | BuildError::DecompositionCall { .. }
        | BuildError::Interrupted => exit::FAILURE,
        _ => exit::INVALID,
    };
    let hints = e.hints();
    Failure::new(e.code(), e.to_string(), code).hint((!hints.is_empty()).then(|| hints.join("; ")))
}

/// The chain on stderr, as A_CREATE_SESSION shows it.
fn show_chain(plan: &Plan) {
    let inf = &plan.inference;
    eprintln!(
        "\nchain for \"{}\" · position {} · quality {}{}",
        text::line(&plan.intent, 200),
        inf.position.name(),
        inf.quality.as_str(),
        inf.phase
            .map(|p| format!(" · phase {p}"))
            .unwrap_or_default()
    );
    for line in plan.chain_shown() {
        let shown = baton_lifecycle::session::late_bound::shown(&line.line());
        eprintln!("  {}", text::line(&shown, 200));
    }
    if let Some(d) = &plan.decomposition {
        eprintln!("sub-goals:");
        for g in &d.goals {
            eprintln!("  {}: {}", text::line(&g.id, 20), text::line(&g.goal, 200));
        }
    }
}

/// The plan, with the decomposition's model call answered by the live model or its trace
/// (and recorded with `--record`).
async fn plan(
    setup: &Setup,
    opts: &StartOptions,
    cancel: &CancellationToken,
) -> Result<(StartOutcome, baton_engine::spend::Counted), Failure> {
    let Some(source) = setup.source() else {
        return Err(Failure::new(
            "MODEL_MISSING",
            "no model and no recorded traces",
            exit::INVALID,
        ));
    };
    let models = Models::open(source, setup.record.as_deref(), DECOMPOSE_TRACE);
    // A replay without a decomposition trace is fine while no decomposition is needed; the
    // build phase says so when it calls the model.
    let models = match models {
        Ok(m) => Some(m),
        Err(e) if e.code() == "SESSION_TRACE_MISSING" => None,
        Err(e) => return Err(errors::failure(&e)),
    };
    let missing = MissingTrace;
    let model: &dyn ChatModel = match models.as_ref().and_then(|m| m.model(source)) {
        Some(m) => m,
        None => &missing,
    };
    let recording;
    let model: &dyn ChatModel = match models.as_ref().and_then(|m| m.recorder.clone()) {
        Some(rec) => {
            recording = RecordingModel::new(model, rec);
            &recording
        }
        None => model,
    };
    // The decomposition is the session's first model call: its budget applies to it too.
    let caps = baton_engine::spend::Cap {
        scope: "session".into(),
        tokens: setup.budget.tokens,
        usd: setup.budget.usd,
        spent_elsewhere: Default::default(),
    };
    let caps = if caps.is_empty() {
        Vec::new()
    } else {
        vec![caps]
    };
    let plan_cancel = cancel.child_token();
    let gated = baton_lifecycle::session::budget::Gated::new(model, caps, plan_cancel.clone());
    let outcome = start::plan(&setup.ctx, opts, &gated, &plan_cancel).await;
    if let Some(m) = &models
        && let Err(e) = m.save()
    {
        return Err(errors::failure(&e));
    }
    if let Some(stop) = gated.stopped() {
        return Err(
            Failure::new(stop.code, stop.message, exit::BUDGET_EXCEEDED).hint(Some(
                "nothing was created; start again with a larger --budget-tokens/--budget-usd"
                    .into(),
            )),
        );
    }
    // Baton's own count of the decomposition goes with it: the ledger charges the larger of
    // it and the provider's figures.
    outcome
        .map(|o| (o, gated.counted()))
        .map_err(|e| build_failure(&e))
}

/// A model that has no answer: the replay directory holds no decomposition trace.
struct MissingTrace;

impl ChatModel for MissingTrace {
    fn chat<'a>(
        &'a self,
        _request: &'a baton_llm::ChatRequest,
        _options: baton_llm::CallOptions<'a>,
    ) -> baton_llm::BoxFuture<'a, Result<baton_llm::ChatResponse, baton_llm::LlmError>> {
        Box::pin(async {
            Err(baton_llm::LlmError::Config(format!(
                "the replay directory has no {DECOMPOSE_TRACE}"
            )))
        })
    }

    fn model_name(&self) -> &str {
        "missing-trace"
    }
}

enum Built {
    /// The session, and what the build phase asked of the model.
    Created(String, Spent),
    Ended(Outcome, Spent),
}

/// Questions, chain, confirmation and creation.
async fn build(
    setup: &Setup,
    args: &StartArgs,
    cancel: &CancellationToken,
) -> Result<Built, Failure> {
    let mut opts = StartOptions {
        intent: args.intent.clone(),
        quality: args.quality.map(|q| match q {
            Quality::Full => QualityMode::Full,
            Quality::Standard => QualityMode::Standard,
            Quality::Quick => QualityMode::Quick,
        }),
        auto: args.yes,
        answers: args.answers.iter().cloned().collect::<BTreeMap<_, _>>(),
        platform: None,
    };
    let mut spent = Spent::default();
    loop {
        let (outcome, counted) = plan(setup, &opts, cancel).await?;
        spent.counted.add(counted);
        match outcome {
            StartOutcome::Questions(qs) => {
                if !setup.interactive {
                    let rerun = rerun(args, &opts.answers);
                    return Ok(Built::Ended(
                        Outcome::Questions {
                            questions: qs,
                            rerun,
                        },
                        spent,
                    ));
                }
                for q in &qs {
                    match prompt::ask(q) {
                        Some(a) => {
                            opts.answers.insert(q.id.clone(), a);
                        }
                        None => {
                            let rerun = rerun(args, &opts.answers);
                            let asked = Outcome::Questions {
                                questions: qs,
                                rerun,
                            };
                            return Ok(Built::Ended(asked, spent));
                        }
                    }
                }
            }
            StartOutcome::Planned(p) => {
                spent.model_calls += p.model_calls as usize;
                spent.usage.add(p.usage);
                // Without a terminal and without -y the final report shows the chain; once is
                // enough.
                if !setup.json && (opts.auto || setup.interactive) {
                    show_chain(&p);
                }
                if !opts.auto {
                    if !setup.interactive {
                        let chain = p.chain_shown();
                        let rerun = rerun(args, &opts.answers);
                        return Ok(Built::Ended(Outcome::Confirm { chain, rerun }, spent));
                    }
                    let choice = prompt::choose(
                        "Create this session and run it?",
                        &[
                            ("proceed", "create it and run the steps"),
                            ("cancel", "create nothing"),
                        ],
                    );
                    if choice != Some("proceed") {
                        return Ok(Built::Ended(Outcome::Cancelled(p.chain_shown()), spent));
                    }
                }
                // A chain built without asking the model (no decomposition): the model answers
                // before the session is written.
                if p.model_calls == 0
                    && let Some(m) = &setup.live
                {
                    baton_epic::model_check::check(m.as_dyn(), cancel, "no session was created")
                        .await
                        .map_err(|e| Failure::new(e.code, e.message, exit::FAILURE).hint(e.hint))?;
                }
                let created = start::create(&setup.ctx, *p).map_err(|e| build_failure(&e))?;
                return Ok(Built::Created(created.session_id, spent));
            }
            StartOutcome::Created(c) => return Ok(Built::Created(c.session_id, spent)),
        }
    }
}

/// The `baton session start …` command line that builds the same session again, with the
/// answers given so far, for a person to paste.
fn rerun(args: &StartArgs, answers: &BTreeMap<String, String>) -> String {
    let mut line = format!("baton session start {}", text::shell_word(&args.intent));
    if args.target_project != std::path::Path::new(".") {
        line.push_str(&format!(
            " -p {}",
            text::shell_word(&args.target_project.to_string_lossy())
        ));
    }
    if let Some(q) = args.quality {
        let name = match q {
            Quality::Full => "full",
            Quality::Standard => "standard",
            Quality::Quick => "quick",
        };
        line.push_str(&format!(" --quality {name}"));
    }
    for (id, answer) in answers {
        line.push_str(&format!(
            " --answer {}",
            text::shell_word(&format!("{id}={answer}"))
        ));
    }
    line
}

pub fn run(args: &StartArgs) -> anyhow::Result<u8> {
    let json = args.run.json;
    let setup = match setup::prepare(&args.target_project, &args.run)? {
        Ok(s) => s,
        Err(f) => return Ok(f.report(json)),
    };
    let runtime = crate::runtime::runtime()?;
    let cancel = CancellationToken::new();
    let _signals = signals::watch_with(&runtime, cancel.clone(), setup::SIGNAL_HINTS);
    let ended = runtime.block_on(async {
        let (id, spent) = match build(&setup, args, &cancel).await? {
            Built::Created(id, spent) => (id, spent),
            Built::Ended(outcome, spent) => {
                return Ok(Ended {
                    outcome,
                    session: None,
                    ticks: 0,
                    spent,
                });
            }
        };
        if !setup.json {
            eprintln!("created session {id}");
        }
        let Some(s) = load(&setup, &id) else {
            return Err(Failure::new(
                "SESSION_UNREADABLE",
                format!("session {id} cannot be read after it was created"),
                exit::FAILURE,
            ));
        };
        // The decomposition counts against the session's budget from now on.
        if spent.model_calls > 0 {
            let price = setup.live.as_ref().and_then(|m| m.as_dyn().price());
            baton_lifecycle::session::budget::record_call(
                &s,
                "decompose",
                Some(spent.usage),
                None,
                Some(spent.counted),
                price,
            );
        }
        let _lock = setup::lock_session(&s.dir, &id, "start")?;
        drive::ticks(&setup, &id, None, cancel.clone(), spent).await
    });
    match ended {
        Ok(e) => report::finish(&e, json),
        Err(f) => Ok(f.report(json)),
    }
}
