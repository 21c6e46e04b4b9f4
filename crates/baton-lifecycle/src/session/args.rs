//! A_RESOLVE_ARGS of seed 003, as code: before a step is claimed, the placeholders in its
//! args (`{phase}`, `{milestone}`, `{intent}`, `{description}`, `{analyze_macro_id}`,
//! `{blueprint_id}`, and the session's `context`
//! values such as `{scratch_dir}`) are filled from status.json and written back with the
//! claim, so the prompt `ralph next` prints names the real phase instead of asking the model
//! to guess it.
//! A placeholder without a value stays as it is (early stages have no phase yet).

use baton_ralph::session::Session;
use serde_json::{Map, Value, json};

/// Placeholders filled from the session's `context` object.
const CONTEXT_KEYS: [&str; 5] = [
    "scratch_dir",
    "plan_dir",
    "analysis_dir",
    "issue_id",
    "milestone_num",
];

/// Longest value put into args: a context value is written by a model's step.
const MAX_VALUE_CHARS: usize = 512;

/// A value as args text: strings and numbers only, one line, bounded.
fn text_of(value: Option<&Value>) -> Option<String> {
    let text = match value? {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let clean = text.trim();
    let bad = clean.is_empty()
        || clean.chars().count() > MAX_VALUE_CHARS
        || clean.chars().any(char::is_control);
    (!bad).then(|| clean.to_string())
}

/// The substitutions the session can give, in the seed's table order.
fn values(s: &Session) -> Vec<(String, String)> {
    values_of(&s.doc)
}

/// The substitutions a status.json document (or a plan's fields under the same names) gives.
pub fn values_of(doc: &Map<String, Value>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            out.push((format!("{{{name}}}"), v));
        }
    };
    put("phase", text_of(doc.get("phase")));
    put("milestone", text_of(doc.get("milestone")));
    let intent = text_of(doc.get("intent"));
    put("intent", intent.clone());
    put("description", intent);
    // Ids the build phase or the scope gate recorded (`--from analyze:{analyze_macro_id}`).
    put("analyze_macro_id", text_of(doc.get("analyze_macro_id")));
    put("blueprint_id", text_of(doc.get("blueprint_id")));
    let context = doc.get("context");
    for key in CONTEXT_KEYS {
        put(key, text_of(context.and_then(|c| c.get(key))));
    }
    out
}

/// `args` with every known placeholder replaced.
pub fn substitute(args: &str, values: &[(String, String)]) -> String {
    values
        .iter()
        .fold(args.to_string(), |acc, (from, to)| acc.replace(from, to))
}

/// Fills the args of the first pending step when it is an execution step, in `s` as read
/// under the claim's lock: `next` writes it with its claim (see [`baton_ralph::verbs::next::run_prepared`]), so
/// the filled args cost no status.json write of their own.
pub fn resolve_first_pending(s: &mut Session) {
    let Some((index, args)) = s
        .all_steps()
        .find(|st| st.status() == "pending")
        .filter(|st| st.decision().is_none())
        .map(|st| (st.index(), st.args().to_string()))
    else {
        return;
    };
    let resolved = substitute(&args, &values(s));
    if resolved != args {
        s.set_step(index, "args", json!(resolved));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn known_placeholders_are_filled_and_unknown_ones_kept() {
        let v = vals(&[("{phase}", "2"), ("{scratch_dir}", ".workflow/scratch/P2")]);
        assert_eq!(substitute("{phase}", &v), "2");
        assert_eq!(
            substitute("--dir {scratch_dir} --from analyze:{analyze_macro_id}", &v),
            "--dir .workflow/scratch/P2 --from analyze:{analyze_macro_id}"
        );
    }

    #[test]
    fn only_short_one_line_strings_and_numbers_are_values() {
        assert_eq!(text_of(Some(&json!(3))), Some("3".into()));
        assert_eq!(text_of(Some(&json!(" 1 "))), Some("1".into()));
        assert_eq!(text_of(Some(&json!("a\nb"))), None);
        assert_eq!(text_of(Some(&json!("x".repeat(600)))), None);
        assert_eq!(text_of(Some(&json!(null))), None);
        assert_eq!(text_of(Some(&json!({"a": 1}))), None);
        assert_eq!(text_of(None), None);
    }
}
