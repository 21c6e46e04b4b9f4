//! The conversation log (`logs/conversation.jsonl`): every message of the model's context, in
//! order, with a `reset` line where the history restarted. It lets `answer` and `resume` put the
//! current window back, and tells a replay how far the run got.
//!
//! When the context is compressed, the record of that step also carries the compressed form
//! (`compaction: {covers, messages, summaryCalls}`): the history itself is never rewritten,
//! and a restore puts back both.

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
    compactions: u64,
    /// Each record fsynced as it is appended (a workflow run's log); otherwise records are
    /// written as they come and made durable in groups by [`Self::make_durable`].
    sync_each: bool,
    /// Records appended since the last fsync.
    unsynced: bool,
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
            compactions: machine.compactions(),
            sync_each: true,
            unsynced: false,
        })
    }

    /// A log for a history that is never reset nor compressed (a task run). Its records are
    /// written at once (a killed process loses none) and fsynced in groups, when the driver
    /// calls [`Self::make_durable`] or syncs [`Self::path`] with a phase change.
    pub fn open_plain(path: &Path, restored: usize) -> Result<ConversationLog, StoreError> {
        Ok(ConversationLog {
            writer: JsonlWriter::open(path)?,
            generation: 0,
            logged: restored,
            compactions: 0,
            sync_each: false,
            unsynced: false,
        })
    }

    pub fn path(&self) -> &Path {
        self.writer.path()
    }

    /// Records are no longer fsynced one by one: the driver makes them durable with the rest
    /// of a model turn (see [`Self::has_unsynced`] and [`Self::synced_elsewhere`]).
    pub fn defer_sync(&mut self) {
        self.sync_each = false;
    }

    /// Whether records were appended since the last fsync.
    pub fn has_unsynced(&self) -> bool {
        self.unsynced
    }

    /// fsyncs the records appended since the last fsync, if any: one device flush for all.
    pub fn make_durable(&mut self) -> Result<(), StoreError> {
        if self.unsynced {
            self.writer.sync()?;
            self.unsynced = false;
        }
        Ok(())
    }

    /// Says the records were fsynced by the caller (with a phase change).
    pub fn synced_elsewhere(&mut self) {
        self.unsynced = false;
    }

    /// Appends what the machine added to its history since the last call, as one record: a
    /// step is in the log whole or not at all (a torn last line is dropped by readers).
    pub fn sync(&mut self, machine: &mut Machine<'_>) -> Result<(), StoreError> {
        let reset = machine.generation() != self.generation;
        if reset {
            self.generation = machine.generation();
            self.logged = 0;
        }
        let compacted = machine.compactions() != self.compactions;
        let compaction = compacted.then(|| {
            let (view, covers) = machine.compaction();
            json!({
                "covers": covers,
                "messages": view,
                "summaryCalls": machine.take_summary_calls(),
            })
        });
        self.append(machine.history(), reset, compaction)?;
        self.compactions = machine.compactions();
        Ok(())
    }

    /// [`Self::sync`] for a plain history (a task run's): only what was added.
    pub fn sync_history(&mut self, history: &[Message]) -> Result<(), StoreError> {
        self.append(history, false, None)
    }

    fn append(
        &mut self,
        history: &[Message],
        reset: bool,
        compaction: Option<Value>,
    ) -> Result<(), StoreError> {
        let new: Vec<&Message> = history.iter().skip(self.logged).collect();
        if reset || compaction.is_some() || !new.is_empty() {
            let mut record = messages_record(&new, reset);
            if let Some(c) = compaction {
                record["compaction"] = c;
            }
            self.writer.append(&record, self.sync_each)?;
            self.unsynced = !self.sync_each;
        }
        self.logged = history.len();
        Ok(())
    }
}

fn messages_record(messages: &[&Message], reset: bool) -> Value {
    json!({"kind": "messages", "reset": reset, "messages": messages})
}

/// A new log holding `messages` as its first record (a task run's prompt, written with the
/// run's directory).
pub fn first_log(messages: &[Message]) -> Vec<u8> {
    let refs: Vec<&Message> = messages.iter().collect();
    let mut line = messages_record(&refs, false).to_string().into_bytes();
    line.push(b'\n');
    line
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
    /// Results added for interrupted calls at the end of `history` (not yet in the log).
    pub repaired: usize,
    /// Every tool-call id the run has used, in every window: new calls must not reuse one.
    pub call_ids: HashSet<String>,
    /// The compressed form of `history[..covers]`, when the window was compressed.
    pub compaction: Option<(Vec<Message>, usize)>,
}

const INTERRUPTED: &str = r#"{"ok":false,"error":{"code":"E_INTERRUPTED","message":"The run stopped before this call finished. Read the state and redo what is missing."}}"#;

pub fn restore(path: &Path) -> Result<Restored, StoreError> {
    let records = jsonl::read(path)?.records;
    let mut out = Restored::default();
    let mut all: Vec<Message> = Vec::new();
    // Summary calls are model answers too: a replay skips them like turns.
    let mut summary_calls = 0u64;
    // A turn whose tools moved the run to a new node ends its window: the window restarts
    // before its results are logged, so the reset itself says those tools ran.
    let mut closed_by_reset = 0usize;
    for r in &records {
        if r.get("kind").and_then(Value::as_str) != Some("messages") {
            continue;
        }
        if r.get("reset").and_then(Value::as_bool) == Some(true) {
            if out
                .history
                .last()
                .is_some_and(|m| m.role == Role::Assistant && !m.tool_calls.is_empty())
            {
                closed_by_reset += 1;
            }
            out.history.clear();
            out.compaction = None;
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
            out.call_ids
                .extend(m.tool_calls.iter().map(|c| c.id.clone()));
            out.history.push(m.clone());
            all.push(m);
        }
        if let Some(c) = r.get("compaction") {
            let covers = c.get("covers").and_then(Value::as_u64).unwrap_or(0);
            let view: Vec<Message> = c
                .get("messages")
                .cloned()
                .and_then(|v| serde_json::from_value(v).ok())
                .unwrap_or_default();
            summary_calls += c.get("summaryCalls").and_then(Value::as_u64).unwrap_or(0);
            out.compaction = usize::try_from(covers)
                .ok()
                .filter(|n| *n > 0 && !view.is_empty())
                .map(|n| (view, n));
        }
    }
    out.complete_turns = pair_results(&all)
        .iter()
        .filter(|(_, missing)| missing.is_empty())
        .count()
        + all
            .iter()
            .filter(|m| m.role == Role::Assistant && m.tool_calls.is_empty())
            .count()
        + usize::try_from(summary_calls).unwrap_or(0)
        + closed_by_reset;
    out.repaired = repair_window(&mut out.history, &mut out.compaction);
    Ok(out)
}

/// [`repair`], keeping the compaction only while the part it stands for needed no repair (a
/// compaction is made between complete tool groups, so a gap there means a damaged log).
fn repair_window(
    history: &mut Vec<Message>,
    compaction: &mut Option<(Vec<Message>, usize)>,
) -> usize {
    let covers = match compaction {
        Some((_, covers)) if *covers <= history.len() => *covers,
        Some(_) => {
            *compaction = None;
            0
        }
        None => 0,
    };
    if covers > 0
        && pair_results(&history[..covers])
            .iter()
            .any(|(_, m)| !m.is_empty())
    {
        *compaction = None;
    }
    repair(history)
}

/// For each assistant message with tool calls: its index and the ids of its calls that no
/// `tool` message right after it answers. Calls are paired with results per message, never
/// across messages: providers without ids make every turn's ids `call_0, call_1, …` again,
/// and an old turn's result must not make a new, interrupted call look answered.
fn pair_results(messages: &[Message]) -> Vec<(usize, Vec<String>)> {
    let mut out = Vec::new();
    for (at, m) in messages.iter().enumerate() {
        if m.role != Role::Assistant || m.tool_calls.is_empty() {
            continue;
        }
        let answered: HashSet<&str> = messages[at + 1..]
            .iter()
            .take_while(|r| r.role == Role::Tool)
            .filter_map(|r| r.tool_call_id.as_deref())
            .collect();
        let missing = m
            .tool_calls
            .iter()
            .map(|c| c.id.clone())
            .filter(|id| !answered.contains(id.as_str()))
            .collect();
        out.push((at, missing));
    }
    out
}

/// Gives every unanswered call of the window an `E_INTERRUPTED` result right after its
/// message's results, so the next request is well formed. Returns how many results were added
/// at the end of the window (those reach the log with the next step; a repair inside the
/// window is not logged and is made again, identically, by every restore).
fn repair(history: &mut Vec<Message>) -> usize {
    let mut trailing = 0;
    for (at, missing) in pair_results(history).into_iter().rev() {
        if missing.is_empty() {
            continue;
        }
        let insert_at = at
            + 1
            + history[at + 1..]
                .iter()
                .take_while(|r| r.role == Role::Tool)
                .count();
        let at_end = insert_at == history.len();
        for (k, id) in missing.into_iter().enumerate() {
            history.insert(insert_at + k, Message::tool_result(id, INTERRUPTED));
            if at_end {
                trailing += 1;
            }
        }
    }
    trailing
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_llm::ToolCall;

    fn calls(ids: &[&str]) -> Message {
        Message::assistant_calls(
            ids.iter()
                .map(|id| ToolCall::new(*id, "fs.read", "{}"))
                .collect(),
        )
    }

    fn log(dir: &Path, steps: &[Vec<Message>]) -> std::path::PathBuf {
        let path = dir.join("conversation.jsonl");
        let mut w = JsonlWriter::open(&path).unwrap();
        for (i, messages) in steps.iter().enumerate() {
            w.append(
                &json!({"kind": "messages", "reset": i == 0, "messages": messages}),
                true,
            )
            .unwrap();
        }
        path
    }

    #[test]
    fn an_interrupted_call_is_repaired_even_when_an_earlier_turn_used_its_id() {
        let dir = tempfile::tempdir().unwrap();
        // Turn 1 used call_0 and got its result; turn 2 reused call_0 and was cut off.
        let path = log(
            dir.path(),
            &[
                vec![Message::user("directive")],
                vec![calls(&["call_0"])],
                vec![Message::tool_result("call_0", "{}")],
                vec![calls(&["call_0", "call_1"])],
            ],
        );
        let r = restore(&path).unwrap();
        assert_eq!(r.repaired, 2);
        assert_eq!(r.complete_turns, 1, "only the first turn finished");
        assert_eq!(baton_llm::protocol::validate(&r.history), Ok(()));
        let last: Vec<&str> = r.history[r.history.len() - 2..]
            .iter()
            .filter_map(|m| m.tool_call_id.as_deref())
            .collect();
        assert_eq!(last, ["call_0", "call_1"]);
        assert_eq!(
            r.call_ids,
            HashSet::from(["call_0".to_string(), "call_1".to_string()])
        );
    }

    #[test]
    fn a_turn_that_moved_the_run_to_a_new_node_counts_as_complete() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("conversation.jsonl");
        let mut w = JsonlWriter::open(&path).unwrap();
        let records = [
            (true, vec![Message::user("directive")]),
            (false, vec![calls(&["a"])]),
            (false, vec![Message::tool_result("a", "{}")]),
            // Its results never reach the log: the window restarts after the transition.
            (false, vec![calls(&["b", "c"])]),
            (true, vec![Message::user("directive of the next node")]),
            (false, vec![calls(&["d"])]),
        ];
        for (reset, messages) in records {
            w.append(
                &json!({"kind": "messages", "reset": reset, "messages": messages}),
                true,
            )
            .unwrap();
        }
        let r = restore(&path).unwrap();
        assert_eq!(
            r.complete_turns, 2,
            "the first two turns finished; the last one was cut off"
        );
        assert_eq!(r.repaired, 1);
    }

    #[test]
    fn a_gap_inside_the_window_is_repaired_in_place_and_not_logged() {
        let dir = tempfile::tempdir().unwrap();
        let path = log(
            dir.path(),
            &[
                vec![Message::user("directive")],
                vec![calls(&["a", "b"])],
                vec![Message::tool_result("a", "{}"), Message::user("later")],
            ],
        );
        let r = restore(&path).unwrap();
        assert_eq!(r.repaired, 0, "nothing to log at the end of the window");
        assert_eq!(baton_llm::protocol::validate(&r.history), Ok(()));
        assert_eq!(r.history[3].tool_call_id.as_deref(), Some("b"));
    }
}
