//! A finished response as the Responses API streams it: `response.created`,
//! `response.in_progress`, then per output item `response.output_item.added`, its parts and
//! deltas (text, function arguments, custom tool input) and `response.output_item.done`, then
//! `response.completed` with the usage. Every event carries its `sequence_number`.

use serde_json::{Value, json};

/// The SSE body (`event:` and `data:` lines) of `response` (status `completed`).
pub fn stream(response: &Value) -> String {
    let mut out = String::new();
    let mut sequence = 0u64;
    let mut event = |mut data: Value| {
        data["sequence_number"] = json!(sequence);
        sequence += 1;
        let name = data["type"].as_str().unwrap_or_default().to_string();
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    let mut pending = response.clone();
    pending["status"] = json!("in_progress");
    pending["output"] = json!([]);
    pending["usage"] = Value::Null;
    event(json!({"type": "response.created", "response": pending}));
    event(json!({"type": "response.in_progress", "response": pending}));
    for (index, item) in response["output"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let id = item["id"].clone();
        let mut started = item.clone();
        started["status"] = json!("in_progress");
        match item["type"].as_str().unwrap_or_default() {
            "message" => {
                started["content"] = json!([]);
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": started}),
                );
                for (part_index, part) in
                    item["content"].as_array().into_iter().flatten().enumerate()
                {
                    let text = part["text"].as_str().unwrap_or_default();
                    let mut empty = part.clone();
                    empty["text"] = json!("");
                    let at = json!({"item_id": id, "output_index": index,
                        "content_index": part_index});
                    event(with(
                        &at,
                        json!({"type": "response.content_part.added", "part": empty}),
                    ));
                    for piece in pieces(text) {
                        event(with(
                            &at,
                            json!({"type": "response.output_text.delta",
                            "delta": piece, "logprobs": []}),
                        ));
                    }
                    event(with(
                        &at,
                        json!({"type": "response.output_text.done", "text": text,
                        "logprobs": []}),
                    ));
                    event(with(
                        &at,
                        json!({"type": "response.content_part.done", "part": part}),
                    ));
                }
            }
            "function_call" => {
                started["arguments"] = json!("");
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": started}),
                );
                let arguments = item["arguments"].as_str().unwrap_or_default();
                let at = json!({"item_id": id, "output_index": index});
                for piece in pieces(arguments) {
                    event(with(
                        &at,
                        json!({"type": "response.function_call_arguments.delta",
                        "delta": piece}),
                    ));
                }
                event(with(
                    &at,
                    json!({"type": "response.function_call_arguments.done",
                    "arguments": arguments}),
                ));
            }
            "custom_tool_call" => {
                started["input"] = json!("");
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": started}),
                );
                let input = item["input"].as_str().unwrap_or_default();
                let at = json!({"item_id": id, "output_index": index});
                for piece in pieces(input) {
                    event(with(
                        &at,
                        json!({"type": "response.custom_tool_call_input.delta",
                        "delta": piece}),
                    ));
                }
                event(with(
                    &at,
                    json!({"type": "response.custom_tool_call_input.done",
                    "input": input}),
                ));
            }
            _ => {
                event(
                    json!({"type": "response.output_item.added", "output_index": index,
                    "item": started}),
                );
            }
        }
        event(json!({"type": "response.output_item.done", "output_index": index, "item": item}));
    }
    event(json!({"type": "response.completed", "response": response}));
    out
}

/// `fields` with the item's position added.
fn with(at: &Value, mut fields: Value) -> Value {
    for (k, v) in at.as_object().into_iter().flatten() {
        fields[k] = v.clone();
    }
    fields
}

/// Up to three pieces of `s`, cut at character boundaries (nothing for an empty string).
fn pieces(s: &str) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    let size = chars.len().div_ceil(3).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}
