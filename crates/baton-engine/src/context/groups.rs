//! A window cut into units that compression keeps or replaces whole: a tool group (an
//! assistant message with tool calls and the `tool` messages answering it) or one other
//! message; and the deterministic `TOOL_CALL_HISTORY_SUMMARY` of a tool group.

use baton_llm::{Message, Role};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;

pub const TOOL_SUMMARY: &str = "TOOL_CALL_HISTORY_SUMMARY";
pub const CONVERSATION_SUMMARY: &str = "CONVERSATION_SUMMARY";
/// The persona of an agent that takes over while the system layers stay those of the run's
/// agent (the carrying context policy).
pub const AGENT_PERSONA: &str = "AGENT_PERSONA";
/// Stands for the history of earlier nodes, left out in one step (the carrying policy).
pub const CONTEXT_RESTART: &str = "CONTEXT_RESTART";

/// A half-open range of message indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    pub start: usize,
    pub end: usize,
    pub group: bool,
}

/// Cuts `window` into units. A `tool` message that follows no call (an orphan) stays a unit of
/// its own; the protocol check finds it.
pub fn units(window: &[Message]) -> Vec<Unit> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < window.len() {
        let m = &window[i];
        if m.role == Role::Assistant && !m.tool_calls.is_empty() {
            let end = i
                + 1
                + window[i + 1..]
                    .iter()
                    .take_while(|r| r.role == Role::Tool)
                    .count();
            out.push(Unit {
                start: i,
                end,
                group: true,
            });
            i = end;
        } else {
            out.push(Unit {
                start: i,
                end: i + 1,
                group: false,
            });
            i += 1;
        }
    }
    out
}

/// What kind of message this is, for compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `RUN_DIRECTIVE`, `NODE_BRIEF`, a reminder or another instruction of the runtime: only
    /// the latest of each is needed.
    Shell(&'static str),
    /// A person's words (`USER_INPUT`, or a chat message).
    UserInput,
    ToolSummary,
    ConversationSummary,
    /// The model's text (a question, a remark).
    AssistantText,
    Other,
}

pub fn kind(m: &Message) -> Kind {
    let text = m.text();
    match m.role {
        Role::User => {
            for shell in [
                "RUN_DIRECTIVE",
                "NODE_BRIEF",
                AGENT_PERSONA,
                CONTEXT_RESTART,
                "Reminder:",
                "Finalize end node",
                "The workflow is complete.",
            ] {
                if text.starts_with(shell) {
                    return Kind::Shell(shell);
                }
            }
            if text.starts_with(CONVERSATION_SUMMARY) {
                Kind::ConversationSummary
            } else {
                Kind::UserInput
            }
        }
        Role::Assistant if m.tool_calls.is_empty() => {
            if text.starts_with(TOOL_SUMMARY) {
                Kind::ToolSummary
            } else {
                Kind::AssistantText
            }
        }
        _ => Kind::Other,
    }
}

/// `text` cut to at most `max` characters, with an ellipsis when cut.
pub fn clip(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.trim();
    if flat.chars().count() <= max {
        return flat.to_string();
    }
    let mut s: String = flat.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

const MAX_LISTED: usize = 8;

/// The deterministic summary of one tool group: purpose, tools, outcome, files touched and the
/// calls not to repeat. An assistant message without tool calls, so it can never break the
/// pairing of calls and results.
pub fn tool_group_summary(group: &[Message]) -> Message {
    let Some((call_msg, results)) = group.split_first() else {
        return Message::assistant(TOOL_SUMMARY);
    };
    let purpose = match call_msg.text().trim() {
        "" => "(no text)".to_string(),
        t => clip(t.lines().next().unwrap_or(t), 200),
    };
    let mut tools: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ok = 0;
    let mut failed = Vec::new();
    let mut files: Vec<String> = Vec::new();
    let mut calls = Vec::new();
    for call in &call_msg.tool_calls {
        *tools.entry(call.name.as_str()).or_default() += 1;
        let result = results
            .iter()
            .find(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()))
            .map(|r| serde_json::from_str::<Value>(r.text()).unwrap_or(Value::Null));
        let outcome = match &result {
            Some(v) if v.get("ok").and_then(Value::as_bool) == Some(true) => {
                ok += 1;
                "ok".to_string()
            }
            Some(v) => {
                let code = v
                    .pointer("/error/code")
                    .and_then(Value::as_str)
                    .map(|c| clip(c, 40))
                    .unwrap_or_else(|| "error".into());
                failed.push(code.clone());
                format!("failed: {code}")
            }
            None => {
                failed.push("no result".into());
                "no result".into()
            }
        };
        if let Ok(Value::Object(args)) = serde_json::from_str::<Value>(&call.arguments)
            && let Some(path) = args.get("path").and_then(Value::as_str)
        {
            let entry = format!("{} ({})", clip(path, 120), clip(&call.name, 40));
            if !files.contains(&entry) {
                files.push(entry);
            }
        }
        calls.push(format!(
            "{} {} ({outcome})",
            clip(&call.name, 40),
            clip(&call.arguments, 120)
        ));
    }
    let mut s = format!("{TOOL_SUMMARY}\n- purpose: {purpose}\n- tools: ");
    let listed: Vec<String> = tools
        .iter()
        .map(|(name, n)| match n {
            1 => clip(name, 40),
            n => format!("{} ×{n}", clip(name, 40)),
        })
        .collect();
    s.push_str(&listed.join(", "));
    let _ = write!(s, "\n- outcome: {ok} ok, {} failed", failed.len());
    if !failed.is_empty() {
        failed.dedup();
        let _ = write!(s, " ({})", failed.join(", "));
    }
    if !files.is_empty() {
        let _ = write!(s, "\n- files: {}", list(&files));
    }
    let _ = write!(s, "\n- do not repeat: {}", list(&calls));
    Message::assistant(s)
}

/// A tool group cut in two, for a last group too large to send whole: a summary of its first
/// calls, then its last `keep` calls (in a message of their own) with their results. Every
/// call of an executed group has its result, so both parts keep the tool protocol.
pub fn split_group(group: &[Message], keep: usize) -> Vec<Message> {
    let Some((call_msg, results)) = group.split_first() else {
        return Vec::new();
    };
    let n = call_msg.tool_calls.len();
    if keep >= n {
        return group.to_vec();
    }
    let (head, tail) = call_msg.tool_calls.split_at(n - keep);
    let of = |calls: &[baton_llm::ToolCall]| -> Vec<Message> {
        let ids: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
        results
            .iter()
            .filter(|r| r.tool_call_id.as_deref().is_some_and(|id| ids.contains(id)))
            .cloned()
            .collect()
    };
    let mut first = call_msg.clone();
    first.tool_calls = head.to_vec();
    let mut summarized = vec![first];
    summarized.extend(of(head));
    let mut out = vec![tool_group_summary(&summarized)];
    if !tail.is_empty() {
        let mut rest = Message::assistant("");
        rest.tool_calls = tail.to_vec();
        rest.extra = call_msg.extra.clone();
        out.push(rest);
        out.extend(of(tail));
    }
    out
}

fn list(items: &[String]) -> String {
    let mut s = items
        .iter()
        .take(MAX_LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > MAX_LISTED {
        let _ = write!(s, "; and {} more", items.len() - MAX_LISTED);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_llm::ToolCall;

    fn group() -> Vec<Message> {
        let mut call = Message::assistant("Reading the epics first.\nThen more.");
        call.tool_calls = vec![
            ToolCall {
                id: "a".into(),
                name: "fs.read".into(),
                arguments: r#"{"path":"@project/docs/epics.md"}"#.into(),
            },
            ToolCall {
                id: "b".into(),
                name: "fs.read".into(),
                arguments: r#"{"path":"@project/missing.md"}"#.into(),
            },
        ];
        vec![
            call,
            Message::tool_result("a", r#"{"ok":true,"content":"..."}"#),
            Message::tool_result(
                "b",
                r#"{"ok":false,"error":{"code":"ENOENT","message":"no"}}"#,
            ),
        ]
    }

    #[test]
    fn units_keep_tool_groups_whole() {
        let mut w = vec![Message::user("RUN_DIRECTIVE")];
        w.extend(group());
        w.push(Message::assistant("Which story?"));
        let u = units(&w);
        assert_eq!(
            u,
            [
                Unit {
                    start: 0,
                    end: 1,
                    group: false
                },
                Unit {
                    start: 1,
                    end: 4,
                    group: true
                },
                Unit {
                    start: 4,
                    end: 5,
                    group: false
                }
            ]
        );
    }

    #[test]
    fn a_tool_group_summary_is_deterministic_and_carries_no_calls() {
        let s = tool_group_summary(&group());
        assert_eq!(s.role, Role::Assistant);
        assert!(s.tool_calls.is_empty() && s.tool_call_id.is_none());
        assert_eq!(
            s.text(),
            "TOOL_CALL_HISTORY_SUMMARY\n- purpose: Reading the epics first.\n- tools: fs.read ×2\n- outcome: 1 ok, 1 failed (ENOENT)\n- files: @project/docs/epics.md (fs.read); @project/missing.md (fs.read)\n- do not repeat: fs.read {\"path\":\"@project/docs/epics.md\"} (ok); fs.read {\"path\":\"@project/missing.md\"} (failed: ENOENT)"
        );
        assert_eq!(tool_group_summary(&group()), s);
        assert_eq!(kind(&s), Kind::ToolSummary);
    }

    #[test]
    fn a_split_group_keeps_its_last_calls_whole_and_the_protocol() {
        let g = group();
        let split = split_group(&g, 1);
        assert_eq!(split.len(), 3);
        assert_eq!(kind(&split[0]), Kind::ToolSummary);
        assert!(split[0].text().contains("@project/docs/epics.md"));
        assert_eq!(split[1].tool_calls, g[0].tool_calls[1..]);
        assert_eq!(split[2], g[2]);
        assert_eq!(baton_llm::protocol::validate(&split), Ok(()));
        assert_eq!(split_group(&g, 2), g);
        let none = split_group(&g, 0);
        assert_eq!(none.len(), 1);
        assert_eq!(kind(&none[0]), Kind::ToolSummary);
    }

    #[test]
    fn hostile_arguments_are_clipped() {
        let mut g = group();
        g[0].tool_calls[0].arguments = format!("{{\"path\":\"{}\"}}", "x".repeat(100_000));
        let s = tool_group_summary(&g);
        assert!(s.text().len() < 2_000, "{}", s.text().len());
    }
}
