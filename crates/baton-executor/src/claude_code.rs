//! The ClaudeCode adapter (to be written).

use crate::{Adapter, Event, ExecutorKind, Invocation, Launch};

pub struct ClaudeCode;

impl Adapter for ClaudeCode {
    fn kind(&self) -> ExecutorKind {
        ExecutorKind::ClaudeCode
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
