//! A model request as the gateway sends it on: the output cap set or lowered, its model, and
//! baton's estimate of its prompt.

use crate::count;
use crate::wire::Wire;
use bytes::Bytes;
use serde_json::Value;

/// A request body ready to send.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The body sent: the client's bytes unchanged unless the cap had to be set or lowered.
    pub body: Bytes,
    pub model: Option<String>,
    pub prompt_tokens: u64,
    /// The cap on the answer as sent; 0 when none.
    pub max_output_tokens: u64,
}

/// Prepares `body` (a model request of `wire`) under the gateway's `cap`.
pub fn prepare(wire: Wire, body: Bytes, cap: Option<u64>) -> Prepared {
    let Ok(Value::Object(mut map)) = serde_json::from_slice::<Value>(&body) else {
        // Not a JSON object: the upstream will refuse it; it is counted as text and sent as is.
        let prompt_tokens = count::body(&body, None);
        return Prepared {
            body,
            model: None,
            prompt_tokens,
            max_output_tokens: cap.unwrap_or(0),
        };
    };
    let model = map.get("model").and_then(Value::as_str).map(str::to_owned);
    let fields = wire.cap_fields();
    let asked: Vec<(&str, Option<u64>)> = fields
        .iter()
        .filter_map(|f| map.get(*f).map(|v| (*f, v.as_u64())))
        .collect();
    let mut changed = false;
    let max_output_tokens = match cap {
        None => asked.iter().filter_map(|(_, n)| *n).min().unwrap_or(0),
        Some(cap) if asked.is_empty() => {
            map.insert(fields[0].to_string(), Value::from(cap));
            changed = true;
            cap
        }
        Some(cap) => {
            // Every cap field the client sent is lowered (or replaced when it is not a count).
            for (field, n) in &asked {
                if n.is_none_or(|n| n > cap) {
                    map.insert((*field).to_string(), Value::from(cap));
                    changed = true;
                }
            }
            asked
                .iter()
                .map(|(_, n)| n.map_or(cap, |n| n.min(cap)))
                .min()
                .unwrap_or(cap)
        }
    };
    if changed && wire == Wire::AnthropicMessages {
        changed |= fit_thinking(&mut map, max_output_tokens);
    }
    let value = Value::Object(map);
    let prompt_tokens = count::json(&value);
    let body = if changed {
        Bytes::from(value.to_string())
    } else {
        body
    };
    Prepared {
        body,
        model,
        prompt_tokens,
        max_output_tokens,
    }
}

/// The Messages API's smallest thinking budget.
const MIN_THINKING: u64 = 1024;

/// Keeps a lowered Anthropic request valid: its thinking budget must stay below `max_tokens`
/// (Claude Code asks for 31,999 of thinking under 32,000 tokens), and at least
/// [`MIN_THINKING`], else thinking is turned off. True when the body changed.
fn fit_thinking(map: &mut serde_json::Map<String, Value>, max_tokens: u64) -> bool {
    let Some(thinking) = map.get_mut("thinking").and_then(Value::as_object_mut) else {
        return false;
    };
    let Some(budget) = thinking.get("budget_tokens").and_then(Value::as_u64) else {
        return false;
    };
    if budget < max_tokens {
        return false;
    }
    if max_tokens > MIN_THINKING {
        thinking.insert("budget_tokens".into(), Value::from(max_tokens - 1));
    } else {
        map.insert("thinking".into(), serde_json::json!({"type": "disabled"}));
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn prep(wire: Wire, body: Value, cap: Option<u64>) -> (Value, Prepared) {
        let p = prepare(wire, Bytes::from(body.to_string()), cap);
        (serde_json::from_slice(&p.body).unwrap(), p)
    }

    #[test]
    fn a_larger_cap_is_lowered_a_missing_one_set_a_smaller_one_kept() {
        let (sent, p) = prep(
            Wire::AnthropicMessages,
            json!({"model": "m", "max_tokens": 32000}),
            Some(4096),
        );
        assert_eq!(sent["max_tokens"], 4096);
        assert_eq!((p.max_output_tokens, p.model.as_deref()), (4096, Some("m")));
        let (sent, p) = prep(Wire::OpenAiResponses, json!({"input": "hi"}), Some(100));
        assert_eq!(sent["max_output_tokens"], 100);
        assert_eq!(p.max_output_tokens, 100);
        // A thinking budget above the lowered cap is lowered with it (or thinking turned off).
        let (sent, _) = prep(
            Wire::AnthropicMessages,
            json!({"model": "m", "max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 31999}}),
            Some(4096),
        );
        assert_eq!(sent["thinking"]["budget_tokens"], 4095);
        let (sent, _) = prep(
            Wire::AnthropicMessages,
            json!({"model": "m", "max_tokens": 32000, "thinking": {"type": "enabled", "budget_tokens": 31999}}),
            Some(1000),
        );
        assert_eq!(sent["thinking"], json!({"type": "disabled"}));
        let (sent, p) = prep(Wire::ChatCompletions, json!({"max_tokens": 50}), Some(100));
        assert_eq!(sent, json!({"max_tokens": 50}));
        assert_eq!(p.max_output_tokens, 50);
        let (sent, _) = prep(Wire::ChatCompletions, json!({"messages": []}), Some(100));
        assert_eq!(sent["max_completion_tokens"], 100);
        let (sent, _) = prep(
            Wire::ChatCompletions,
            json!({"max_tokens": 500, "max_completion_tokens": "lots"}),
            Some(100),
        );
        assert_eq!(
            (
                sent["max_tokens"].clone(),
                sent["max_completion_tokens"].clone()
            ),
            (json!(100), json!(100))
        );
    }

    #[test]
    fn without_a_cap_the_body_is_sent_byte_for_byte() {
        let raw = Bytes::from_static(b"{ \"model\" : \"m\",\n \"max_tokens\": 10 }");
        let p = prepare(Wire::AnthropicMessages, raw.clone(), None);
        assert_eq!(p.body, raw);
        assert_eq!(p.max_output_tokens, 10);
        let p = prepare(Wire::AnthropicMessages, raw.clone(), Some(20));
        assert_eq!(p.body, raw, "a cap above the request's changes nothing");
    }
}
