//! The Codex adapter (to be written).

use crate::{Adapter, Event, ExecutorKind, Invocation, Launch};

pub struct Codex;

impl Adapter for Codex {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::Codex
    }

    fn launch(&self, inv: &Invocation<'_>) -> Launch {
        Launch {
            program: inv.program.to_path_buf(),
            ..Launch::default()
        }
    }

    fn parse_line(&self, _line: &str) -> Vec<Event> {
        Vec::new()
    }
}
