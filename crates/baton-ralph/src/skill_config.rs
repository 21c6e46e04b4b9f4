//! Per-skill parameter defaults (`skill-config.json`), injected into `next`'s prompt as maestro
//! does: `~/.maestro/skill-config.json` (or `$MAESTRO_HOME/`) merged with
//! `<project>/.maestro/skill-config.json`, the project winning per parameter.
//!
//! A parameter the step's args already give is left out. maestro tests that with a substring
//! match (so `method` is "given" by `--methodology` or by an intent that mentions the word);
//! here a parameter counts as given only when an argument token is that parameter (`--x`,
//! `--x=…`, `x=…`).

use super::context::Context;
use serde_json::{Map, Value};
use std::path::Path;

/// The merged defaults of one skill, in file order. Unreadable files are reported in
/// `warnings`, never fatal.
pub fn defaults(ctx: &Context, skill: &str, warnings: &mut Vec<String>) -> Map<String, Value> {
    let mut params = Map::new();
    let global = ctx
        .maestro_home
        .as_ref()
        .map(|h| h.join("skill-config.json"));
    let project = ctx.project.join(".maestro").join("skill-config.json");
    for path in global.iter().chain(std::iter::once(&project)) {
        if let Some(p) = read(path, skill, warnings) {
            for (k, v) in p {
                params.insert(k, v);
            }
        }
    }
    params
}

fn read(path: &Path, skill: &str, warnings: &mut Vec<String>) -> Option<Map<String, Value>> {
    if !path.is_file() {
        return None;
    }
    let parsed =
        baton_autopilot::untrusted::read_path(path, baton_autopilot::untrusted::limit::CONFIG)
            .map_err(|e| e.to_string())
            .and_then(|b| b.ok_or_else(|| "it disappeared while read".to_string()))
            .and_then(|b| serde_json::from_slice::<Value>(&b).map_err(|e| e.to_string()));
    match parsed {
        Ok(doc) => doc
            .get("skills")?
            .get(skill)?
            .get("params")?
            .as_object()
            .cloned(),
        Err(e) => {
            warnings.push(format!("W: ignoring {}: {e}", path.display()));
            None
        }
    }
}

/// The `## Skill Config Defaults (skill)` section, or `None` when nothing is left to inject.
pub fn section(skill: &str, args: &str, params: &Map<String, Value>) -> Option<String> {
    if skill.is_empty() {
        return None;
    }
    let tokens = tokenize(args);
    let lines: Vec<String> = params
        .iter()
        .filter(|(name, _)| !given(name, &tokens))
        .map(|(name, v)| format!("{name}: {}", show(v)))
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut out = vec![
        format!("## Skill Config Defaults ({skill})"),
        "The following parameter defaults are configured. Apply these unless the user explicitly specified otherwise:".to_string(),
    ];
    out.extend(lines);
    Some(out.join("\n"))
}

/// `String(value)` of JavaScript for JSON values.
fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "null".into(),
        other => other.to_string(),
    }
}

fn given(param: &str, tokens: &[String]) -> bool {
    let bare = param.trim_start_matches('-');
    if bare.is_empty() {
        return false;
    }
    tokens.iter().any(|t| {
        let key = t.split('=').next().unwrap_or(t);
        key == param
            || (key.trim_start_matches('-') == bare && (key.starts_with('-') || t.contains('=')))
    })
}

/// Shell-like split: whitespace separates, quotes group.
pub fn tokenize(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_parameter_is_given_by_a_token_not_by_a_substring() {
        let params = json!({"--method": "agent", "depth": 3, "-y": true})
            .as_object()
            .cloned()
            .unwrap();
        let s = section(
            "maestro-execute",
            "1 --methodology x \"use the method\"",
            &params,
        )
        .unwrap();
        assert!(s.contains("--method: agent"), "{s}");
        assert!(s.contains("depth: 3"));
        let s = section("maestro-execute", "1 --method=cli depth=5 -y", &params);
        assert_eq!(s, None);
    }

    #[test]
    fn tokens() {
        assert_eq!(tokenize(r#"a "b c" 'd' """#), ["a", "b c", "d", ""]);
    }
}
