//! One tool-call round trip: offer `probe_echo`, ask the model to call it, send its result
//! back, expect a final text. baton's workflows are tool calls from end to end.

use super::failure::Outcome;
use super::prober::{Probe, TOOLS};
use super::report::{Check, Verdict};
use crate::error::LlmError;
use crate::types::{ChatResponse, Message, ToolDef};
use serde_json::{Value, json};

pub const TOOL_NAME: &str = "probe_echo";
/// The word the model is asked to pass.
const WORD: &str = "baton";

const NO_TOOLS: &str = "this model does not call tools; baton's workflows need tool calling";
const NO_TOOLS_HINT: &str = "choose a model that supports tool (function) calling on this \
     endpoint: on Ollama a model with the \"tools\" tag, on vLLM a server started with \
     --enable-auto-tool-choice and a --tool-call-parser for the model; see docs/models.md";

fn tool() -> ToolDef {
    ToolDef {
        name: TOOL_NAME.into(),
        description: "Echoes a word back. Used to check that tool calls work.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"word": {"type": "string", "description": "The word to echo."}},
            "required": ["word"],
        }),
    }
}

pub(crate) async fn check(probe: &Probe) -> Outcome {
    let mut messages = vec![
        Message::system(
            "You are checking a tool connection. Call tools when asked; do not describe the call.",
        ),
        Message::user(format!(
            "Call the tool {TOOL_NAME} with word \"{WORD}\". Do not answer in text."
        )),
    ];
    let first = match probe
        .chat(&probe.request(messages.clone(), vec![tool()]))
        .await
    {
        Ok(r) => r,
        Err(e) => return refused(probe, &e),
    };
    if first.message.tool_calls.is_empty() {
        return answered_in_text(probe, &first);
    }
    let calls = first.message.tool_calls.clone();
    let echoed = calls
        .iter()
        .any(|c| c.name == TOOL_NAME && word_of(&c.arguments).as_deref() == Some(WORD));
    messages.push(first.message.clone());
    // Every call gets its result: a strict endpoint refuses a call left unanswered.
    for call in &calls {
        let result = if call.name == TOOL_NAME {
            format!("echo: {}", word_of(&call.arguments).unwrap_or_default())
        } else {
            format!("no tool named {}", call.name)
        };
        messages.push(Message::tool_result(call.id.clone(), result));
    }
    let second = match probe.chat(&probe.request(messages, vec![tool()])).await {
        Ok(r) => r,
        Err(e) => return probe.failed(TOOLS, &e),
    };
    let figures = |c: Check| {
        c.figure("toolCalls", calls.len())
            .figure("argumentsAsAsked", echoed)
    };
    if !second.message.tool_calls.is_empty() {
        return figures(Check::new(
            TOOLS,
            Verdict::Warn,
            "the model called the tool, then called it again after its result instead of answering",
        ))
        .hint("workflows may loop on tools with this model; a stronger model follows tool results better")
        .into();
    }
    if !echoed {
        let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
        return figures(Check::new(
            TOOLS,
            Verdict::Warn,
            format!(
                "a round trip worked, but the call was not the one asked for ({}, arguments {})",
                names.join(", "),
                calls.first().map_or("", |c| c.arguments.as_str())
            ),
        ))
        .hint("the model calls tools unreliably: workflows may see refused or malformed calls")
        .into();
    }
    figures(Check::new(
        TOOLS,
        Verdict::Pass,
        format!("called {TOOL_NAME} with the asked arguments and answered its result"),
    ))
    .into()
}

/// The `word` argument of a call's arguments, when they are JSON with one.
fn word_of(arguments: &str) -> Option<String> {
    let v: Value = serde_json::from_str(arguments).ok()?;
    v.get("word")?.as_str().map(str::to_owned)
}

/// The request with tools failed: an endpoint that refuses the `tools` field (Ollama: "…
/// does not support tools"; OpenRouter: "No endpoints found that support tool use") says so.
fn refused(probe: &Probe, e: &LlmError) -> Outcome {
    match e {
        LlmError::Http { status, message }
            if matches!(status, 400 | 404 | 422) && mentions_tools(message) =>
        {
            Check::new(
                TOOLS,
                Verdict::Fail,
                format!("{NO_TOOLS}: the endpoint refused the tools (HTTP {status}: {message})"),
            )
            .hint(NO_TOOLS_HINT)
            .into()
        }
        other => probe.failed(TOOLS, other),
    }
}

fn mentions_tools(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("tool") || m.contains("function call") || m.contains("function_call")
}

/// The model answered in text where a tool call was asked for.
fn answered_in_text(probe: &Probe, response: &ChatResponse) -> Outcome {
    if response.finish_reason.as_deref() == Some("length") {
        return Check::new(
            TOOLS,
            Verdict::Warn,
            format!(
                "no verdict: the answer was cut at the probe's cap of {} tokens before any tool call",
                probe.options.max_tokens
            ),
        )
        .hint("a reasoning model may think longer than the probe allows; run a workflow to see")
        .into();
    }
    let text = response.message.text();
    let why = if text.contains(TOOL_NAME) {
        "it wrote the call as text (the server did not turn it into a tool call)"
    } else {
        "it answered in text when asked to call a tool"
    };
    Check::new(TOOLS, Verdict::Fail, format!("{NO_TOOLS}: {why}"))
        .hint(NO_TOOLS_HINT)
        .figure("answer", shortened(text))
        .into()
}

/// The start of a model's text, for the figures.
fn shortened(text: &str) -> String {
    let mut end = text.len().min(200);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}
