//! `baton session continue` and `baton session answer`: take the session (one driver at a
//! time), settle what waits for a person, tick on.

use super::args::{AnswerArgs, ContinueArgs, LoopArgs, Target};
use super::context::{context, print_warnings};
use super::drive::{self, load, settle_pause};
use super::errors;
use super::report::{self, Ended, Outcome};
use super::setup::{self, Setup};
use crate::exit;
use crate::failure::Failure;
use crate::progress::Progress;
use crate::signals;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::session::intervene::{self, Choice, Pause};
use baton_lifecycle::session::run::Spent;
use baton_lifecycle::session::step_run;
use tokio_util::sync::CancellationToken;

/// What the person said, for `answer`.
enum Said {
    Nothing,
    Text(String),
}

fn find(setup: &Setup, target: &Target) -> Result<Session, Failure> {
    discovery::find(&setup.ctx, target.session.as_deref(), Pick::Active)
        .and_then(|l| l.into_session())
        .map_err(|e| errors::failure(&e))
}

fn ended(setup: &Setup, id: &str, outcome: Outcome) -> Ended {
    Ended {
        outcome,
        session: load(setup, id),
        ticks: 0,
        spent: Spent::default(),
    }
}

/// A paused session with a person's answer: the answer is the choice (`retry`, `skip`,
/// `proceed`, `abort`; for a gate's verdict `accept`, `proceed`, `fix`, `escalate`, `abort`),
/// optionally followed by a note.
fn decide_pause(setup: &Setup, s: &Session, text: &str) -> Result<Option<Outcome>, Failure> {
    let (word, note) = text
        .trim()
        .split_once(char::is_whitespace)
        .unwrap_or((text.trim(), ""));
    let choices = intervene::why_paused(s)
        .map(|p| {
            p.choices()
                .iter()
                .map(|(c, _)| c.as_str())
                .collect::<Vec<_>>()
                .join("|")
        })
        .unwrap_or_default();
    let Some(choice) = Choice::parse(word) else {
        return Err(Failure::new(
            "CHOICE_INVALID",
            format!("session {} is paused; \"{word}\" is not a choice", s.id),
            exit::INVALID,
        )
        .hint(Some(format!(
            "answer one of {choices}, optionally followed by a note: baton session answer {} \"<note>\"",
            choices.split('|').next().unwrap_or("retry")
        ))));
    };
    intervene::decide(&setup.ctx, Some(&s.id), choice, note).map_err(|e| errors::failure(&e))?;
    Ok((choice == Choice::Abort).then_some(Outcome::Abandoned))
}

fn drive(target: &Target, args: &LoopArgs, verb: &str, said: Said) -> anyhow::Result<u8> {
    let json = args.json;
    // The session is looked for before the model: a project without one says so first.
    let mut step_runs = Vec::new();
    if target.project.is_dir() {
        // A store and a project that overlap are refused before anything is read.
        if let Ok(store) = baton_store::Store::open_default()
            && let Err(e) = store.check_apart(&target.project)
        {
            return Ok(Failure::from(&e).report(json));
        }
        let found = discovery::find(
            &context(&target.project),
            target.session.as_deref(),
            Pick::Active,
        )
        .and_then(|l| l.into_session());
        match found {
            Ok(s) => step_runs = step_run::linked_run_ids(&s),
            Err(e) => return Ok(errors::failure(&e).report(json)),
        }
    }
    let setup = match setup::prepare_continuing(&target.project, args, &step_runs)? {
        Ok(s) => s,
        Err(f) => return Ok(f.report(json)),
    };
    let s = match find(&setup, target) {
        Ok(s) => s,
        Err(f) => return Ok(f.report(json)),
    };
    let _lock = match setup::lock_session(&s.dir, &s.id, verb) {
        Ok(l) => l,
        Err(f) => return Ok(f.report(json)),
    };
    // Read again under the lock: the previous driver may have moved the session on.
    let s = match find(&setup, target) {
        Ok(s) => s,
        Err(f) => return Ok(f.report(json)),
    };
    let id = s.id.clone();
    if !matches!(s.status(), "running" | "paused" | "completed") {
        let f = Failure::new(
            "SESSION_NOT_ACTIVE",
            format!("session {id} is \"{}\": it was given up", s.status()),
            exit::INVALID,
        )
        .hint(Some(
            "start a new one: baton session start \"<intent>\"".into(),
        ));
        return Ok(f.report(json));
    }
    let runtime = crate::runtime::runtime()?;
    let cancel = CancellationToken::new();
    let _signals = signals::watch_with(&runtime, cancel.clone(), setup::SIGNAL_HINTS);
    let result = runtime.block_on(async {
        let mut answer = None;
        if s.status() == "paused" {
            let settled = match said {
                Said::Text(text) => decide_pause(&setup, &s, &text)?,
                // `continue` is the person's word to go on after a pause by hand.
                Said::Nothing if intervene::why_paused(&s) == Some(Pause::ByHand) => {
                    intervene::decide(&setup.ctx, Some(&id), Choice::Proceed, "")
                        .map_err(|e| errors::failure(&e))?;
                    None
                }
                Said::Nothing => {
                    let bar = Progress::new();
                    let r = settle_pause(&setup, &bar, &s);
                    bar.finish();
                    r?
                }
            };
            if let Some(outcome) = settled {
                return Ok(ended(&setup, &id, outcome));
            }
        } else if let Said::Text(text) = said {
            answer = Some(text);
        }
        drive::ticks(&setup, &id, answer, cancel.clone(), Spent::default()).await
    });
    print_warnings(&setup.ctx);
    match result {
        Ok(e) => report::finish(&e, json),
        Err(f) => Ok(f.report(json)),
    }
}

pub fn continue_(args: &ContinueArgs) -> anyhow::Result<u8> {
    drive(&args.target, &args.run, "continue", Said::Nothing)
}

pub fn answer(args: &AnswerArgs) -> anyhow::Result<u8> {
    drive(
        &args.target,
        &args.run,
        "answer",
        Said::Text(args.text.clone()),
    )
}
