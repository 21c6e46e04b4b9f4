//! One line per tick on stderr: `[3/9] maestro-execute 1 · DONE · 12.4s`,
//! `[4/9] ◆ post-verify → fix (retry 0) · 0.3s`. The step is read back from status.json after
//! the tick, so the line shows what was recorded, not what the model said.

use super::setup::Setup;
use super::text;
use baton_lifecycle::ralph::discovery::{self, Pick};
use baton_lifecycle::ralph::session::Session;
use baton_lifecycle::session::run::Tick;
use baton_lifecycle::session::tick::StepEnd;
use std::sync::Mutex;
use std::time::Instant;

pub struct TickLines<'a> {
    setup: &'a Setup,
    id: &'a str,
    since: Mutex<Instant>,
}

impl<'a> TickLines<'a> {
    pub fn new(setup: &'a Setup, id: &'a str) -> TickLines<'a> {
        TickLines {
            setup,
            id,
            since: Mutex::new(Instant::now()),
        }
    }

    fn session(&self) -> Option<Session> {
        discovery::find(&self.setup.ctx, Some(self.id), Pick::Any)
            .and_then(|l| l.into_session())
            .ok()
    }

    pub fn print(&self, t: &Tick) {
        let now = Instant::now();
        let elapsed = match self.since.lock() {
            Ok(mut since) => now.duration_since(std::mem::replace(&mut *since, now)),
            Err(_) => std::time::Duration::ZERO,
        };
        eprintln!(
            "{} · {:.1}s",
            crate::ui::visible(&line(self.session().as_ref(), t)),
            elapsed.as_secs_f64()
        );
    }
}

/// The text of a tick's line, without the elapsed time.
pub fn line(s: Option<&Session>, t: &Tick) -> String {
    let total = s.map_or(0, Session::len);
    let head = |index: usize| {
        let label = s
            .and_then(|s| s.step(index))
            .map(|st| {
                if st.decision().is_some() || st.args().is_empty() {
                    st.label()
                } else {
                    format!("{} {}", st.label(), st.args())
                }
            })
            .unwrap_or_default();
        format!("[{index}/{total}] {}", text::line(&label, 120))
    };
    match t {
        Tick::Step { index, end } => {
            let what = match end {
                StepEnd::Recorded(c) => c.status.as_str().to_string(),
                StepEnd::Waiting { .. } => "waits for an answer".into(),
                StepEnd::Interrupted { code, .. } => format!("stopped ({code})"),
            };
            format!("{} · {what}", head(*index))
        }
        Tick::Gate { index, .. } => {
            let step = s.and_then(|s| s.step(*index));
            let verdict = step
                .and_then(|st| st.str("verdict"))
                .unwrap_or("settled")
                .to_string();
            let retry = step.map_or(0, |st| st.retry_count());
            format!("{} → {verdict} (retry {retry})", head(*index))
        }
        Tick::Paused { index } => format!("{} → paused for a person", head(*index)),
        Tick::Completed => "session completed".into(),
        Tick::Empty => "nothing to run".into(),
    }
}
