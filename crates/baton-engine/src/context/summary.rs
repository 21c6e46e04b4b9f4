//! The rolling `CONVERSATION_SUMMARY`: the request that asks the model for it (no tools), the
//! message made of its answer, and the deterministic fallback when the model fails.

use super::groups::{CONVERSATION_SUMMARY, clip};
use super::tokens::TokenCounter;
use baton_llm::{ChatOptions, ChatRequest, Message, Role};
use std::time::Duration;

const INSTRUCTIONS: &str = include_str!("../prompts/conversation_summary.md");

/// The longest a summary model call may take before the deterministic summary is used.
pub const SUMMARY_TIMEOUT: Duration = Duration::from_secs(15);

/// Where a summary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Model,
    /// The model failed (code); baton wrote it from the material itself.
    Fallback(String),
}

/// The material as text: each message on its own, the oldest first.
pub fn material_text(material: &[Message]) -> String {
    let mut s = String::new();
    for m in material {
        let who = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::System => "system",
            Role::Tool => "tool",
        };
        s.push_str(&format!("[{who}]\n{}\n\n", m.text().trim_end()));
    }
    s
}

/// The request for a summary of `material`, itself cut to `max_material` tokens (the newest
/// part is kept; an earlier summary always comes first and stays).
pub fn request(
    material: &[Message],
    summary_tokens: usize,
    max_material: usize,
    counter: &mut TokenCounter,
) -> ChatRequest {
    let instructions = INSTRUCTIONS.replace("{max_words}", &(summary_tokens * 3 / 4).to_string());
    let text = fit_newest(&material_text(material), max_material, counter);
    ChatRequest {
        messages: vec![
            Message::system(instructions),
            Message::user(format!(
                "Summarize this earlier part of the conversation:\n\n{text}"
            )),
        ],
        tools: Vec::new(),
        options: ChatOptions {
            temperature: None,
            max_tokens: u32::try_from(summary_tokens).ok(),
            cache_key: None,
        },
    }
}

/// Keeps the end of `text` within `max` tokens.
fn fit_newest(text: &str, max: usize, counter: &mut TokenCounter) -> String {
    if counter.text(text) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut keep = chars.len();
    while keep > 0 {
        keep = keep * 3 / 4;
        let tail: String = chars[chars.len() - keep..].iter().collect();
        let cut = format!("[… earlier material omitted]\n{tail}");
        if counter.text(&cut) <= max {
            return cut;
        }
    }
    String::new()
}

/// Keeps the start of `text` within `max` tokens.
pub fn fit_oldest(text: &str, max: usize, counter: &mut TokenCounter) -> String {
    if counter.text(text) <= max {
        return text.to_string();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut keep = chars.len();
    while keep > 0 {
        keep = keep * 3 / 4;
        let head: String = chars[..keep].iter().collect();
        let cut = format!("{head}\n[… cut to fit the context budget]");
        if counter.text(&cut) <= max {
            return cut;
        }
    }
    String::new()
}

/// The summary message: the model's text, cut to `summary_tokens`.
pub fn message(
    text: &str,
    source: &Source,
    summary_tokens: usize,
    counter: &mut TokenCounter,
) -> Message {
    let header = match source {
        Source::Model => format!(
            "{CONVERSATION_SUMMARY}\n(the earlier part of this conversation, summarized; it replaces those messages)\n"
        ),
        Source::Fallback(code) => format!(
            "{CONVERSATION_SUMMARY}\n(the earlier part of this conversation, condensed by baton because the summary model failed: {}; it replaces those messages)\n",
            clip(code, 60)
        ),
    };
    let budget = summary_tokens.saturating_sub(counter.text(&header));
    Message::user(format!(
        "{header}{}",
        fit_oldest(text.trim(), budget, counter)
    ))
}

/// What baton writes when the model cannot summarize: the earlier summary (its first third of
/// the budget) and then the newest material that fits.
pub fn fallback_text(
    material: &[Message],
    summary_tokens: usize,
    counter: &mut TokenCounter,
) -> String {
    let (earlier, rest): (Vec<&Message>, Vec<&Message>) = material
        .iter()
        .partition(|m| m.text().starts_with(CONVERSATION_SUMMARY));
    let mut s = String::new();
    let mut used = 0;
    if let Some(prev) = earlier.last() {
        let body = prev.text().lines().skip(2).collect::<Vec<_>>().join("\n");
        let kept = fit_oldest(&body, summary_tokens / 3, counter);
        used += counter.text(&kept);
        s.push_str("Earlier summary:\n");
        s.push_str(&kept);
        s.push_str("\n\n");
    }
    // The newest entries are the most useful; keep as many as fit, in their order.
    let mut entries: Vec<String> = Vec::new();
    let mut omitted = 0;
    for m in rest.iter().rev() {
        let entry = clip(m.text(), 1_500).replace(" - ", "\n- ");
        let n = counter.text(&entry) + 1;
        if used + n > summary_tokens.saturating_sub(40) {
            omitted += 1;
            continue;
        }
        used += n;
        entries.push(entry);
    }
    entries.reverse();
    if omitted > 0 {
        s.push_str(&format!("({omitted} older entries omitted)\n"));
    }
    s.push_str(&entries.join("\n"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tokens::Encoding;

    #[test]
    fn the_request_has_no_tools_and_fits() {
        let mut c = TokenCounter::new(Encoding::Chars);
        let material: Vec<Message> = (0..500)
            .map(|i| Message::assistant(format!("TOOL_CALL_HISTORY_SUMMARY\n- purpose: step {i}")))
            .collect();
        let r = request(&material, 500, 2_000, &mut c);
        assert!(r.tools.is_empty());
        assert!(c.messages(&r.messages) < 2_000 + 400);
        let text = r.messages[1].text();
        assert!(text.contains("step 499") && !text.contains("step 0\n"));
    }

    #[test]
    fn a_hostile_summary_is_cut_to_its_budget() {
        let mut c = TokenCounter::new(Encoding::Chars);
        let m = message(&"word ".repeat(100_000), &Source::Model, 300, &mut c);
        assert!(c.text(m.text()) <= 300, "{}", c.text(m.text()));
        assert!(m.text().starts_with(CONVERSATION_SUMMARY));
    }

    #[test]
    fn the_fallback_keeps_the_earlier_summary_and_the_newest_entries() {
        let mut c = TokenCounter::new(Encoding::Chars);
        let mut material = vec![Message::user(
            "CONVERSATION_SUMMARY\n(x)\nUser goal: ship story 1-2",
        )];
        material.extend((0..200).map(|i| {
            Message::assistant(format!(
                "TOOL_CALL_HISTORY_SUMMARY - purpose: read file {i}"
            ))
        }));
        let text = fallback_text(&material, 400, &mut c);
        assert!(text.contains("User goal: ship story 1-2"));
        assert!(text.contains("read file 199"));
        assert!(!text.contains("read file 0\n"));
        assert!(text.contains("older entries omitted"));
        assert!(c.text(&text) <= 400);
        assert_eq!(text, fallback_text(&material, 400, &mut c), "deterministic");
    }
}
