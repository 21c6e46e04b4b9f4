//! The conversation log (`logs/conversation.jsonl`): every message of the model's context, in
//! order, with a `reset` line where the history restarted. It lets `answer` and `resume` put the
//! current window back, and tells a replay how far the run got.

use crate::machine::Machine;
use baton_llm::{Message, Role};
use baton_store::StoreError;
use baton_store::jsonl::{self, JsonlWriter};
use serde_json::{Value, json};
use std::collections::HashSet;
use std::path::Path;

pub struct ConversationLog {
    writer: JsonlWriter,
    generation: u64,
    logged: usize,
}

impl ConversationLog {
    /// `restored` is how many messages of the machine's history are already in the log.
    pub fn open(
        path: &Path,
        machine: &Machine<'_>,
        restored: usize,
    ) -> Result<ConversationLog, StoreError> {
        Ok(ConversationLog {
            writer: JsonlWriter::open(path)?,
            generation: machine.generation(),
            logged: restored,
        })
    }

    /// Appends what the machine added to its history since the last call, as one record: a
    /// step is in the log whole or not at all (a torn last line is dropped by readers).
    pub fn sync(&mut self, machine: &Machine<'_>) -> Result<(), StoreError> {
        let reset = machine.generation() != self.generation;
        if reset {
            self.generation = machine.generation();
            self.logged = 0;
        }
        let history = machine.history();
        let new: Vec<&Message> = history.iter().skip(self.logged).collect();
        if reset || !new.is_empty() {
            self.writer.append(
                &json!({"kind": "messages", "reset": reset, "messages": new}),
                true,
            )?;
        }
        self.logged = history.len();
        Ok(())
    }
}

/// What a previous invocation left.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Restored {
    /// The window since the last reset, with interrupted tool calls answered.
    pub history: Vec<Message>,
    /// Model answers whose tool calls all finished (or that had none).
    pub complete_turns: usize,
    /// `USER_INPUT` messages in the log: the questions answered so far.
    pub answers: usize,
    /// Results added for interrupted calls (in `history`, not yet in the log).
    pub repaired: usize,
}

const INTERRUPTED: &str = r#"{"ok":false,"error":{"code":"E_INTERRUPTED","message":"The run stopped before this call finished. Read the state and redo what is missing."}}"#;

pub fn restore(path: &Path) -> Result<Restored, StoreError> {
    let records = jsonl::read(path)?.records;
    let mut out = Restored::default();
    let mut answered_ids: HashSet<String> = HashSet::new();
    let mut all: Vec<Message> = Vec::new();
    for r in &records {
        if r.get("kind").and_then(Value::as_str) != Some("messages") {
            continue;
        }
        if r.get("reset").and_then(Value::as_bool) == Some(true) {
            out.history.clear();
        }
        for m in r
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Ok(m) = serde_json::from_value::<Message>(m.clone()) else {
                continue;
            };
            // Answers are counted from the conversation itself, so an answer counts exactly
            // when its message was logged.
            if m.role == Role::User && m.text().starts_with("USER_INPUT") {
                out.answers += 1;
            }
            if m.role == Role::Tool
                && let Some(id) = &m.tool_call_id
            {
                answered_ids.insert(id.clone());
            }
            out.history.push(m.clone());
            all.push(m);
        }
    }
    out.complete_turns = all
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .filter(|m| m.tool_calls.iter().all(|c| answered_ids.contains(&c.id)))
        .count();
    // Pair every tool call of the window with a result, so the next request is well formed.
    let open: Vec<String> = out
        .history
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(|m| m.tool_calls.iter().map(|c| c.id.clone()))
        .filter(|id| !answered_ids.contains(id))
        .collect();
    for id in open {
        out.history.push(Message::tool_result(id, INTERRUPTED));
        out.repaired += 1;
    }
    Ok(out)
}
