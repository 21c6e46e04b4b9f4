//! The compression planner: given a window over the trigger, what to send instead.
//!
//! 1. Keep the preservation window: the last tool groups and messages, the person's inputs
//!    (run mode) and the latest of each runtime instruction; drop instructions a later one
//!    replaced.
//! 2. Turn every older tool group into one `TOOL_CALL_HISTORY_SUMMARY` (deterministic).
//! 3. Still over the target: replace the bulky arguments of executed calls by their size and
//!    sha256, oldest first (what they wrote is on disk).
//! 4. Still over the target: ask for a rolling `CONVERSATION_SUMMARY` of everything else
//!    older (one model call without tools; a deterministic fallback when it fails).
//! 5. Still too large: the same with a smaller preservation window, down to the latest input,
//!    the latest instructions and the last tool group, whose first calls are summarized when
//!    even it cannot fit. `CONTEXT_STILL_TOO_LARGE` only when that cannot fit either (an input
//!    or a node brief larger than the window).
//!
//! The result is checked against the tool protocol before it replaces anything.

use super::budget::Budget;
use super::elide;
use super::groups::{self, Kind, Unit, tool_group_summary, units};
use super::summary::{self, Source};
use super::tokens::TokenCounter;
use baton_llm::{ChatRequest, Message};
use serde::Serialize;

/// Whose window is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A workflow run: the person's inputs are always kept.
    Run,
    /// An agent chat: only the recent messages are kept; older ones are summarized.
    Chat,
}

/// What one compression did (the audit log records it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// `attempted_effective`, `attempted_noop` or `failed_fallback`.
    pub status: &'static str,
    pub tokens_before: usize,
    pub tokens_after: usize,
    pub budget: usize,
    pub target: usize,
    pub summarized_tool_groups: usize,
    pub dropped_instructions: usize,
    /// Executed calls whose bulky arguments were replaced by their size and sha256.
    #[serde(skip_serializing_if = "is_zero")]
    pub elided_arguments: usize,
    /// `model`, or `fallback: <code>`; none when no rolling summary was made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// `default`, `minimal` (only the last tool group kept whole) or `bare` (nothing kept but
    /// the latest input and the shells; the last tool group cut if it cannot fit).
    pub window: &'static str,
    pub target_exceeded: bool,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A compressed window.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    pub messages: Vec<Message>,
    pub report: Report,
}

/// A compression that waits for the summary model.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// The model call to make: no tools.
    pub request: ChatRequest,
    /// The new window, `None` where the summary goes.
    layout: Vec<Option<Message>>,
    material: Vec<Message>,
    fixed: usize,
    report: Report,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Under the trigger: send as it is.
    NotNeeded,
    Compressed(Compaction),
    NeedsSummary(Box<Pending>),
    TooLarge {
        tokens: usize,
        limit: usize,
    },
    /// The compressed window would break the tool protocol; nothing was replaced.
    Invalid {
        violation: String,
    },
}

/// How much of the recent window a compression pass keeps whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// The last tool groups and messages.
    Default,
    /// Only the last tool group (and, in a chat, the last two messages).
    Minimal,
    /// Nothing but the latest input and the shells; the last tool group is cut when even it
    /// cannot fit (its first calls summarized).
    Bare,
}

impl Pass {
    fn name(self) -> &'static str {
        match self {
            Pass::Default => "default",
            Pass::Minimal => "minimal",
            Pass::Bare => "bare",
        }
    }
}

/// `fixed`: tokens of what is sent besides the window (system layers, tools).
pub fn plan(
    window: &[Message],
    fixed: usize,
    budget: &Budget,
    mode: Mode,
    counter: &mut TokenCounter,
) -> Plan {
    let before = fixed + counter.messages(window);
    if before <= budget.trigger() {
        return Plan::NotNeeded;
    }
    let cut = units(window);
    for pass in [Pass::Default, Pass::Minimal, Pass::Bare] {
        let protect = protected(window, &cut, budget, pass, mode);
        let mut report = Report {
            status: "attempted_effective",
            tokens_before: before,
            tokens_after: before,
            budget: budget.limit(),
            target: budget.target(),
            summarized_tool_groups: 0,
            dropped_instructions: 0,
            elided_arguments: 0,
            summary: None,
            window: pass.name(),
            target_exceeded: false,
        };
        let mut stage = stage(window, &cut, &protect, mode, pass, &mut report);
        let mut staged = fixed + count(&stage, counter);
        // Executed calls' bulky arguments go before any message is summarized: what they
        // wrote is on disk.
        if staged > budget.target() {
            let (n, _) = elide(&mut stage, staged - budget.target(), counter);
            report.elided_arguments = n;
            staged = fixed + count(&stage, counter);
        }
        if pass == Pass::Bare && staged > budget.limit() {
            staged = cut_last_group(&mut stage, window, &cut, fixed, budget, counter);
            report.summarized_tool_groups += 1;
        }
        let all: Vec<Message> = stage.iter().map(|(m, _)| m.clone()).collect();
        let material: Vec<Message> = stage
            .iter()
            .filter(|(_, is_material)| *is_material)
            .map(|(m, _)| m.clone())
            .collect();
        if staged <= budget.target() || (material.is_empty() && staged <= budget.trigger()) {
            return compressed(window, all, staged, report);
        }
        if material.is_empty() {
            if pass == Pass::Default {
                continue;
            }
            if staged <= budget.limit() {
                return compressed(window, all, staged, report);
            }
            if pass == Pass::Minimal {
                continue;
            }
            return Plan::TooLarge {
                tokens: staged,
                limit: budget.limit(),
            };
        }
        let kept: Vec<Message> = stage
            .iter()
            .filter(|(_, is_material)| !is_material)
            .map(|(m, _)| m.clone())
            .collect();
        // The summary is cut to `summary_tokens`, so this bounds the result.
        let estimate = fixed + counter.messages(&kept) + budget.summary_tokens;
        if pass == Pass::Default && estimate > budget.trigger() {
            continue;
        }
        if estimate > budget.limit() {
            if pass == Pass::Minimal {
                continue;
            }
            return Plan::TooLarge {
                tokens: estimate,
                limit: budget.limit(),
            };
        }
        let mut layout = Vec::with_capacity(kept.len() + 1);
        let mut placed = false;
        for (m, is_material) in stage {
            if !is_material {
                layout.push(Some(m));
            } else if !placed {
                layout.push(None);
                placed = true;
            }
        }
        // The summary request itself must fit the window: half of it for the material.
        let request = summary::request(
            &material,
            budget.summary_tokens,
            budget.context_tokens / 2,
            counter,
        );
        return Plan::NeedsSummary(Box::new(Pending {
            request,
            layout,
            material,
            fixed,
            report,
        }));
    }
    // Not reached: the bare pass always returns.
    Plan::TooLarge {
        tokens: before,
        limit: budget.limit(),
    }
}

fn count(stage: &[(Message, bool)], counter: &mut TokenCounter) -> usize {
    stage.iter().map(|(m, _)| counter.message(m)).sum()
}

/// [`elide::elide_oldest`] over the staged window.
fn elide(stage: &mut [(Message, bool)], over: usize, counter: &mut TokenCounter) -> (usize, usize) {
    let mut messages: Vec<Message> = stage.iter().map(|(m, _)| m.clone()).collect();
    let done = elide::elide_oldest(&mut messages, over, counter);
    for ((m, _), elided) in stage.iter_mut().zip(messages) {
        *m = elided;
    }
    done
}

/// The last unit, when it is a tool group, cut until the window reaches the target: its first
/// calls summarized, as many of its last calls kept whole as fit. Returns the new token count.
fn cut_last_group(
    stage: &mut Vec<(Message, bool)>,
    window: &[Message],
    cut: &[Unit],
    fixed: usize,
    budget: &Budget,
    counter: &mut TokenCounter,
) -> usize {
    let staged = fixed + count(stage, counter);
    let Some(last) = cut.last().filter(|u| u.group) else {
        return staged;
    };
    let len = last.end - last.start;
    if stage.len() < len {
        return staged;
    }
    // The last unit is always kept, so it ends the staged window (elided as staged).
    let group: Vec<Message> = stage[stage.len() - len..]
        .iter()
        .map(|(m, _)| m.clone())
        .collect();
    stage.truncate(stage.len() - len);
    let rest = fixed + count(stage, counter);
    let mut keep = window[last.start].tool_calls.len();
    loop {
        keep /= 2;
        let split = groups::split_group(&group, keep);
        let tokens = rest + counter.messages(&split);
        if tokens <= budget.target() || keep == 0 {
            stage.extend(split.into_iter().map(|m| (m, false)));
            return tokens;
        }
    }
}

/// Completes a pending compression with the summary model's answer (`Err(code)` when it
/// failed).
pub fn finish(
    pending: Pending,
    answer: Result<String, String>,
    budget: &Budget,
    counter: &mut TokenCounter,
) -> Plan {
    let Pending {
        layout,
        material,
        fixed,
        mut report,
        ..
    } = pending;
    let (text, source) = match answer {
        Ok(t) if !t.trim().is_empty() => (t, Source::Model),
        Ok(_) => fallback(&material, "LLM_EMPTY_SUMMARY", budget, counter),
        Err(code) => fallback(&material, &code, budget, counter),
    };
    let summary = summary::message(&text, &source, budget.summary_tokens, counter);
    report.summary = Some(match &source {
        Source::Model => "model".to_string(),
        Source::Fallback(code) => format!("fallback: {code}"),
    });
    let messages: Vec<Message> = layout
        .into_iter()
        .map(|m| m.unwrap_or_else(|| summary.clone()))
        .collect();
    let after = fixed + counter.messages(&messages);
    if after > budget.limit() {
        return Plan::TooLarge {
            tokens: after,
            limit: budget.limit(),
        };
    }
    if let Err(violation) = check(&messages) {
        return Plan::Invalid { violation };
    }
    report.tokens_after = after;
    report.target_exceeded = after > budget.target();
    Plan::Compressed(Compaction { messages, report })
}

fn fallback(
    material: &[Message],
    code: &str,
    budget: &Budget,
    counter: &mut TokenCounter,
) -> (String, Source) {
    (
        summary::fallback_text(material, budget.summary_tokens, counter),
        Source::Fallback(code.to_string()),
    )
}

fn compressed(
    window: &[Message],
    messages: Vec<Message>,
    after: usize,
    mut report: Report,
) -> Plan {
    if let Err(violation) = check(&messages) {
        return Plan::Invalid { violation };
    }
    if messages == window {
        report.status = "attempted_noop";
    }
    report.tokens_after = after;
    report.target_exceeded = after > report.target;
    Plan::Compressed(Compaction { messages, report })
}

/// The tool protocol, and summaries that carry no tool calls.
pub fn check(messages: &[Message]) -> Result<(), String> {
    baton_llm::protocol::validate(messages).map_err(|v| v.to_string())?;
    for (i, m) in messages.iter().enumerate() {
        if matches!(
            groups::kind(m),
            Kind::ToolSummary | Kind::ConversationSummary
        ) && (!m.tool_calls.is_empty() || m.tool_call_id.is_some())
        {
            return Err(format!("message {i}: a summary carries tool calls"));
        }
    }
    Ok(())
}

/// Which units are kept whole: the last tool groups, the last messages, and always the last
/// unit (the loop in progress).
fn protected(
    window: &[Message],
    cut: &[Unit],
    budget: &Budget,
    pass: Pass,
    mode: Mode,
) -> Vec<bool> {
    let (recent_groups, recent_messages) = match (pass, mode) {
        (Pass::Default, _) => (budget.recent_groups, budget.min_recent_messages),
        (Pass::Minimal, Mode::Run) => (1, 0),
        (Pass::Minimal, Mode::Chat) => (1, 2),
        (Pass::Bare, _) => (0, 0),
    };
    let mut keep = vec![false; cut.len()];
    let mut groups_left = recent_groups;
    let tail = window.len().saturating_sub(recent_messages);
    for (i, u) in cut.iter().enumerate().rev() {
        if u.group && groups_left > 0 {
            keep[i] = true;
            groups_left -= 1;
        }
        if recent_messages > 0 && u.end > tail {
            keep[i] = true;
        }
    }
    if let Some(last) = keep.last_mut() {
        *last = true;
    }
    keep
}

/// The window after step 1 and 2, each message flagged when it is material for the rolling
/// summary.
fn stage(
    window: &[Message],
    cut: &[Unit],
    protect: &[bool],
    mode: Mode,
    pass: Pass,
    report: &mut Report,
) -> Vec<(Message, bool)> {
    // The bare pass keeps only the person's latest input; earlier ones are summarized.
    let latest_input = cut
        .iter()
        .rposition(|u| !u.group && groups::kind(&window[u.start]) == Kind::UserInput);
    let mut out = Vec::with_capacity(window.len());
    for (i, u) in cut.iter().enumerate() {
        let messages = &window[u.start..u.end];
        if protect[i] {
            out.extend(messages.iter().map(|m| (m.clone(), false)));
            continue;
        }
        if u.group {
            report.summarized_tool_groups += 1;
            out.push((tool_group_summary(messages), true));
            continue;
        }
        let m = &messages[0];
        match groups::kind(m) {
            Kind::Shell(shell) => {
                let superseded = window[u.end..]
                    .iter()
                    .any(|later| groups::kind(later) == Kind::Shell(shell));
                if superseded {
                    report.dropped_instructions += 1;
                } else {
                    out.push((m.clone(), false));
                }
            }
            Kind::UserInput
                if mode == Mode::Run && (pass != Pass::Bare || latest_input == Some(i)) =>
            {
                out.push((m.clone(), false))
            }
            _ => out.push((m.clone(), true)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tokens::Encoding;
    use baton_llm::ToolCall;

    fn group(i: usize, result_chars: usize) -> Vec<Message> {
        let mut call = Message::assistant("");
        call.tool_calls = vec![ToolCall {
            id: format!("c{i}"),
            name: "fs.read".into(),
            arguments: format!("{{\"path\":\"@project/f{i}.md\"}}"),
        }];
        vec![
            call,
            Message::tool_result(
                format!("c{i}"),
                format!(
                    "{{\"ok\":true,\"content\":\"{}\"}}",
                    "x".repeat(result_chars)
                ),
            ),
        ]
    }

    fn window(groups: usize) -> Vec<Message> {
        let mut w = vec![
            Message::user("RUN_DIRECTIVE\n- intent: start"),
            Message::user("NODE_BRIEF\n- currentNodeId: a"),
        ];
        for i in 0..groups {
            w.extend(group(i, 400));
        }
        w
    }

    fn counter() -> TokenCounter {
        TokenCounter::new(Encoding::Chars)
    }

    #[test]
    fn under_the_trigger_nothing_changes() {
        let mut c = counter();
        assert_eq!(
            plan(&window(3), 100, &Budget::new(4_000), Mode::Run, &mut c),
            Plan::NotNeeded
        );
    }

    #[test]
    fn old_tool_groups_become_summaries_and_the_recent_ones_stay() {
        let mut c = counter();
        let mut w = window(0);
        for i in 0..20 {
            w.extend(group(i, 1_200));
        }
        let budget = Budget::new(7_000);
        let Plan::Compressed(done) = plan(&w, 100, &budget, Mode::Run, &mut c) else {
            panic!("{:?}", plan(&w, 100, &budget, Mode::Run, &mut c));
        };
        assert_eq!(done.report.summarized_tool_groups, 14);
        assert!(
            done.report.tokens_after <= budget.target(),
            "{:?}",
            done.report
        );
        assert_eq!(check(&done.messages), Ok(()));
        // The shells and the six last groups are unchanged, in order.
        assert_eq!(done.messages[..2], w[..2]);
        assert_eq!(done.messages[done.messages.len() - 12..], w[w.len() - 12..]);
        let summaries = done
            .messages
            .iter()
            .filter(|m| m.text().starts_with("TOOL_CALL_HISTORY_SUMMARY"))
            .count();
        assert_eq!(summaries, 14);
    }

    #[test]
    fn a_rolling_summary_is_asked_for_and_a_failure_falls_back() {
        let mut c = counter();
        let w = window(200);
        let budget = Budget::new(4_000);
        let Plan::NeedsSummary(pending) = plan(&w, 300, &budget, Mode::Run, &mut c) else {
            panic!("expected a summary request");
        };
        assert!(pending.request.tools.is_empty());
        let by_model = finish(
            (*pending).clone(),
            Ok("User goal: read everything.".into()),
            &budget,
            &mut c,
        );
        let Plan::Compressed(done) = by_model else {
            panic!("{by_model:?}")
        };
        assert!(done.report.tokens_after <= budget.trigger());
        assert_eq!(done.report.summary.as_deref(), Some("model"));
        assert_eq!(check(&done.messages), Ok(()));
        let summary = done
            .messages
            .iter()
            .find(|m| m.text().starts_with("CONVERSATION_SUMMARY"))
            .unwrap();
        assert!(summary.text().contains("User goal: read everything."));
        assert_eq!(done.messages[..2], w[..2], "the shells stay first");

        let Plan::Compressed(fallback) =
            finish(*pending, Err("LLM_TIMEOUT".into()), &budget, &mut c)
        else {
            panic!()
        };
        assert_eq!(
            fallback.report.summary.as_deref(),
            Some("fallback: LLM_TIMEOUT")
        );
        assert!(fallback.report.tokens_after <= budget.limit());
        assert_eq!(check(&fallback.messages), Ok(()));
    }

    #[test]
    fn an_input_that_cannot_fit_is_refused() {
        let mut c = counter();
        let mut w = window(2);
        w.push(Message::user(format!(
            "USER_INPUT\n- forNodeId: a\n{}",
            "y".repeat(40_000)
        )));
        let plan = plan(&w, 300, &Budget::new(4_000), Mode::Run, &mut c);
        assert!(
            matches!(plan, Plan::TooLarge { limit: 4_000, .. }),
            "{plan:?}"
        );
    }

    #[test]
    fn superseded_instructions_are_dropped_and_person_inputs_kept() {
        let mut c = counter();
        let mut w = window(10);
        for i in 0..3 {
            w.push(Message::assistant(format!("Question {i}?")));
            w.push(Message::user("RUN_DIRECTIVE\n- intent: continue"));
            w.push(Message::user(format!(
                "USER_INPUT\n- forNodeId: a\nanswer {i}"
            )));
            w.push(Message::user("Reminder: a requires"));
            w.extend(group(100 + i, 400));
        }
        w.extend((200..207).flat_map(|i| group(i, 400)));
        let budget = Budget::new(3_000);
        let out = match plan(&w, 100, &budget, Mode::Run, &mut c) {
            Plan::Compressed(d) => d.messages,
            Plan::NeedsSummary(p) => match finish(*p, Ok("summary".into()), &budget, &mut c) {
                Plan::Compressed(d) => d.messages,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        for i in 0..3 {
            assert!(
                out.iter()
                    .any(|m| m.text().ends_with(&format!("answer {i}")))
            );
        }
        let directives = out
            .iter()
            .filter(|m| m.text().starts_with("RUN_DIRECTIVE"))
            .count();
        assert_eq!(directives, 1, "only the latest directive stays");
        assert_eq!(check(&out), Ok(()));
    }

    fn writes(calls: usize, content: &str) -> Vec<Message> {
        let mut call = Message::assistant("");
        call.tool_calls = (0..calls)
            .map(|i| ToolCall {
                id: format!("w{i}"),
                name: "fs.write".into(),
                arguments:
                    serde_json::json!({"path": format!("@project/out/f{i}.md"), "content": content})
                        .to_string(),
            })
            .collect();
        let mut g = vec![call];
        g.extend((0..calls).map(|i| {
            Message::tool_result(
                format!("w{i}"),
                format!(
                    "{{\"ok\":true,\"path\":\"@project/out/f{i}.md\",\"bytesWritten\":{},\"sha256After\":\"{}\"}}",
                    content.len(),
                    "a".repeat(64)
                ),
            )
        }));
        g
    }

    /// Compresses like the window does: a summary request is answered.
    fn settle(w: &[Message], budget: &Budget, c: &mut TokenCounter) -> Compaction {
        match plan(w, 2_000, budget, Mode::Run, c) {
            Plan::Compressed(d) => d,
            Plan::NeedsSummary(p) => match finish(*p, Ok("summary".into()), budget, c) {
                Plan::Compressed(d) => d,
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_3mb_refused_write_is_elided_from_the_window() {
        let mut c = counter();
        let mut w = window(0);
        let mut call = Message::assistant("");
        call.tool_calls = vec![ToolCall {
            id: "big".into(),
            name: "fs.write".into(),
            arguments:
                serde_json::json!({"path": "@project/out/big.md", "content": "q".repeat(3 << 20)})
                    .to_string(),
        }];
        w.push(call);
        w.push(Message::tool_result(
            "big",
            r#"{"ok":false,"error":{"code":"E_WRITE_LIMIT","message":"over the limit"}}"#,
        ));
        let budget = Budget::default();
        let done = settle(&w, &budget, &mut c);
        assert_eq!(done.report.elided_arguments, 1);
        assert!(
            done.report.tokens_after <= budget.target(),
            "{:?}",
            done.report
        );
        assert_eq!(check(&done.messages), Ok(()));
        let args: serde_json::Value =
            serde_json::from_str(&done.messages[2].tool_calls[0].arguments).unwrap();
        assert_eq!(args["path"], "@project/out/big.md");
        assert_eq!(args["content"]["bytes"], 3 << 20);
        assert_eq!(done.messages[3], w[3], "the result is untouched");
    }

    #[test]
    fn a_turn_of_400_writes_fits_the_default_window() {
        let mut c = counter();
        let mut w = window(3);
        w.extend(writes(400, &"n".repeat(1_000)));
        let budget = Budget::default();
        let done = settle(&w, &budget, &mut c);
        assert!(
            done.report.tokens_after <= budget.limit(),
            "{:?}",
            done.report
        );
        assert!(done.report.elided_arguments > 0);
        assert_eq!(check(&done.messages), Ok(()));
        assert_eq!(done.report.window, "bare", "{:?}", done.report);
        // The latest calls are kept whole with their results; the first ones summarized.
        let last = done.messages.last().unwrap();
        assert_eq!(last.tool_call_id.as_deref(), Some("w399"));
        assert!(
            done.messages
                .iter()
                .any(|m| m.text().starts_with("TOOL_CALL_HISTORY_SUMMARY")
                    && m.text().contains("fs.write ×"))
        );
        // Fewer writes fit by elision alone, every call and result kept.
        let mut w = window(0);
        w.extend(writes(100, &"n".repeat(4_000)));
        let done = settle(&w, &budget, &mut c);
        // Oldest first, only as many as needed: the newest writes are still whole.
        assert!(done.report.elided_arguments > 50, "{:?}", done.report);
        assert!(done.report.elided_arguments < 100, "{:?}", done.report);
        assert_eq!(done.report.window, "default");
        assert_eq!(done.messages.len(), w.len());
        assert!(done.messages[2].tool_calls[0].arguments.len() < 200);
        assert!(done.messages[2].tool_calls[99].arguments.len() > 4_000);
        assert!(
            done.report.tokens_after <= budget.target(),
            "{:?}",
            done.report
        );
    }

    #[test]
    fn only_an_input_or_a_brief_larger_than_the_window_is_refused() {
        let mut c = counter();
        let mut w = vec![
            Message::user("RUN_DIRECTIVE\n- intent: start"),
            Message::user(format!(
                "NODE_BRIEF\n- currentNodeId: a\n{}",
                "b".repeat(200_000)
            )),
        ];
        w.extend(writes(3, "x"));
        assert!(matches!(
            plan(&w, 2_000, &Budget::default(), Mode::Run, &mut c),
            Plan::TooLarge { .. }
        ));
        // Older inputs and their groups give way to the latest input in the bare pass.
        let mut w = window(0);
        for i in 0..6 {
            w.push(Message::user(format!(
                "USER_INPUT\n- forNodeId: a\n{i}{}",
                "i".repeat(24_000)
            )));
            w.extend(group(i, 100));
        }
        let budget = Budget::default();
        let done = settle(&w, &budget, &mut c);
        assert!(
            done.report.tokens_after <= budget.limit(),
            "{:?}",
            done.report
        );
        assert!(
            done.messages
                .iter()
                .any(|m| m.text().starts_with("USER_INPUT\n- forNodeId: a\n5"))
        );
    }

    #[test]
    fn a_broken_window_is_never_returned() {
        let mut c = counter();
        let mut w = window(30);
        // An orphan result inside the recent part: the result would break the protocol.
        w.push(Message::tool_result("nobody", "{}"));
        let p = plan(&w, 100, &Budget::new(3_000), Mode::Run, &mut c);
        assert!(
            matches!(p, Plan::Invalid { .. } | Plan::NeedsSummary(_)),
            "{p:?}"
        );
        if let Plan::NeedsSummary(p) = p {
            let budget = Budget::new(3_000);
            assert!(matches!(
                finish(*p, Ok("s".into()), &budget, &mut c),
                Plan::Invalid { .. }
            ));
        }
    }
}
