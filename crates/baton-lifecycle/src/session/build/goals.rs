//! The decomposition a model proposes (S_DECOMPOSE): `boundary_contract`,
//! `execution_criteria` and `task_decomposition`, parsed and validated strictly. Every problem
//! is located (`task_decomposition[2].lifecycle[0]`), sizes and counts are bounded, and unknown
//! fields are refused, so what reaches status.json is exactly the schema's shape.

use baton_autopilot::json_kind::json_kind;
use baton_ralph::chain::STAGES;
use serde_json::{Map, Value, json};
use std::fmt;

/// Largest answer parsed at all.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Most sub-goals one session carries (each may get a mini-loop at the goal audit).
pub const MAX_GOALS: usize = 20;
/// Most entries of one string list (scope, constraints, criteria).
pub const MAX_LIST: usize = 20;
/// Longest text field, in characters.
pub const MAX_TEXT: usize = 1000;
/// Most problems reported at once (the rest are counted).
const MAX_ISSUES: usize = 12;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BoundaryContract {
    pub in_scope: Vec<String>,
    pub out_of_scope: Vec<String>,
    pub constraints: Vec<String>,
    pub definition_of_done: String,
}

/// One outcome-oriented sub-goal (`G1`, `G2`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Goal {
    pub id: String,
    pub goal: String,
    pub boundary: String,
    pub done_when: String,
    pub evidence: String,
    /// The stages that produce its evidence; steps of these stages get `goal_ref = id`.
    pub lifecycle: Vec<String>,
}

impl Goal {
    /// `G7` → 7, the order of build rule 7.
    pub fn number(&self) -> u64 {
        baton_ralph::chain::goal_number(&self.id)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decomposition {
    pub boundary_contract: BoundaryContract,
    pub execution_criteria: Vec<String>,
    pub goals: Vec<Goal>,
}

impl Decomposition {
    /// The session fields, as the schema appendix writes them: every sub-goal pending and
    /// unconfirmed (a model cannot start a session with goals already met).
    pub fn fields(&self) -> Map<String, Value> {
        let b = &self.boundary_contract;
        let goals: Vec<Value> = self
            .goals
            .iter()
            .map(|g| {
                json!({
                    "id": g.id, "goal": g.goal, "boundary": g.boundary,
                    "done_when": g.done_when, "evidence": g.evidence,
                    "lifecycle": g.lifecycle, "status": "pending",
                    "completion_confirmed": false, "completed_at": null,
                })
            })
            .collect();
        let mut m = Map::new();
        m.insert(
            "boundary_contract".into(),
            json!({"in_scope": b.in_scope, "out_of_scope": b.out_of_scope,
                   "constraints": b.constraints, "definition_of_done": b.definition_of_done}),
        );
        m.insert("execution_criteria".into(), json!(self.execution_criteria));
        m.insert("task_decomposition".into(), Value::Array(goals));
        m.insert("task_decomposition_all_done".into(), json!(false));
        m
    }
}

/// One problem of an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub at: String,
    pub message: String,
}

/// Every problem found (at least one), located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected(pub Vec<Issue>);

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (n, issue) in self.0.iter().take(MAX_ISSUES).enumerate() {
            if n > 0 {
                f.write_str("; ")?;
            }
            write!(f, "at {}: {}", issue.at, issue.message)?;
        }
        if self.0.len() > MAX_ISSUES {
            write!(f, "; … and {} more", self.0.len() - MAX_ISSUES)?;
        }
        Ok(())
    }
}

fn issue(at: impl Into<String>, message: impl Into<String>) -> Issue {
    Issue {
        at: at.into(),
        message: message.into(),
    }
}

/// The JSON object of an answer: the whole text, or one ```json fenced block that is the whole
/// text (models add fences even when told not to; anything else around the object is refused).
fn body(answer: &str) -> &str {
    let t = answer.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return t;
    };
    let inner = inner.strip_prefix("json").unwrap_or(inner);
    inner.trim()
}

/// Parses and validates a model's answer.
pub fn parse(answer: &str) -> Result<Decomposition, Rejected> {
    if answer.len() > MAX_ANSWER_BYTES {
        return Err(Rejected(vec![issue(
            "$",
            format!(
                "the answer is {} bytes, over the {MAX_ANSWER_BYTES}-byte limit",
                answer.len()
            ),
        )]));
    }
    let doc: Value = serde_json::from_str(body(answer)).map_err(|e| {
        Rejected(vec![issue(
            "$",
            format!(
                "not a JSON object: {} (line {}, column {})",
                e,
                e.line(),
                e.column()
            ),
        )])
    })?;
    let mut v = Validator::default();
    let d = v.decomposition(&doc);
    match d {
        Some(d) if v.issues.is_empty() => Ok(d),
        _ => Err(Rejected(v.issues)),
    }
}

#[derive(Default)]
struct Validator {
    issues: Vec<Issue>,
}

impl Validator {
    fn push(&mut self, at: impl Into<String>, message: impl Into<String>) {
        self.issues.push(issue(at, message));
    }

    /// An object with exactly the `required` keys (plus `optional` ones).
    fn object<'v>(
        &mut self,
        at: &str,
        v: &'v Value,
        required: &[&str],
        optional: &[&str],
    ) -> Option<&'v Map<String, Value>> {
        let Some(m) = v.as_object() else {
            self.push(at, format!("must be an object, found {}", json_kind(v)));
            return None;
        };
        for key in required {
            if !m.contains_key(*key) {
                self.push(at, format!("missing field \"{key}\""));
            }
        }
        for key in m.keys() {
            if !required.contains(&key.as_str()) && !optional.contains(&key.as_str()) {
                let shown: String = key.chars().take(40).collect();
                self.push(at, format!("unknown field \"{shown}\""));
            }
        }
        Some(m)
    }

    fn text(&mut self, at: &str, v: Option<&Value>, may_be_empty: bool) -> String {
        match v {
            Some(Value::String(s)) => {
                let n = s.chars().count();
                if n > MAX_TEXT {
                    self.push(at, format!("{n} characters, over the limit of {MAX_TEXT}"));
                } else if !may_be_empty && s.trim().is_empty() {
                    self.push(at, "must not be empty");
                } else if s.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
                    self.push(at, "contains control characters");
                }
                s.clone()
            }
            Some(other) => {
                self.push(at, format!("must be a string, found {}", json_kind(other)));
                String::new()
            }
            // Reported by `object`.
            None => String::new(),
        }
    }

    fn list(&mut self, at: &str, v: Option<&Value>, may_be_empty: bool) -> Vec<String> {
        let Some(v) = v else {
            return Vec::new();
        };
        let Some(items) = v.as_array() else {
            self.push(
                at,
                format!("must be an array of strings, found {}", json_kind(v)),
            );
            return Vec::new();
        };
        if items.len() > MAX_LIST {
            self.push(
                at,
                format!("{} entries, over the limit of {MAX_LIST}", items.len()),
            );
            return Vec::new();
        }
        if items.is_empty() && !may_be_empty {
            self.push(at, "must list at least one entry");
        }
        items
            .iter()
            .enumerate()
            .map(|(i, item)| self.text(&format!("{at}[{i}]"), Some(item), false))
            .collect()
    }

    fn decomposition(&mut self, doc: &Value) -> Option<Decomposition> {
        let m = self.object(
            "$",
            doc,
            &[
                "boundary_contract",
                "execution_criteria",
                "task_decomposition",
            ],
            &[],
        )?;
        let boundary_contract = m.get("boundary_contract").and_then(|b| self.boundary(b));
        let execution_criteria = self.list("execution_criteria", m.get("execution_criteria"), true);
        let goals = m.get("task_decomposition").map(|g| self.goals(g));
        Some(Decomposition {
            boundary_contract: boundary_contract?,
            execution_criteria,
            goals: goals?,
        })
    }

    fn boundary(&mut self, v: &Value) -> Option<BoundaryContract> {
        let at = "boundary_contract";
        let m = self.object(
            at,
            v,
            &[
                "in_scope",
                "out_of_scope",
                "constraints",
                "definition_of_done",
            ],
            &[],
        )?;
        Some(BoundaryContract {
            in_scope: self.list(&format!("{at}.in_scope"), m.get("in_scope"), false),
            out_of_scope: self.list(&format!("{at}.out_of_scope"), m.get("out_of_scope"), true),
            constraints: self.list(&format!("{at}.constraints"), m.get("constraints"), true),
            definition_of_done: self.text(
                &format!("{at}.definition_of_done"),
                m.get("definition_of_done"),
                false,
            ),
        })
    }

    fn goals(&mut self, v: &Value) -> Vec<Goal> {
        let at = "task_decomposition";
        let Some(items) = v.as_array() else {
            self.push(
                at,
                format!("must be an array of sub-goals, found {}", json_kind(v)),
            );
            return Vec::new();
        };
        if items.is_empty() {
            self.push(at, "must list at least one sub-goal");
        }
        if items.len() > MAX_GOALS {
            // Checked before looking at any item: 10,000 sub-goals cost one message.
            self.push(
                at,
                format!("{} sub-goals, over the limit of {MAX_GOALS}", items.len()),
            );
            return Vec::new();
        }
        items
            .iter()
            .enumerate()
            .filter_map(|(i, g)| self.goal(i, g))
            .collect()
    }

    fn goal(&mut self, i: usize, v: &Value) -> Option<Goal> {
        let at = format!("task_decomposition[{i}]");
        let m = self.object(
            &at,
            v,
            &[
                "id",
                "goal",
                "boundary",
                "done_when",
                "evidence",
                "lifecycle",
            ],
            &["status", "completion_confirmed", "completed_at"],
        )?;
        let expected = format!("G{}", i + 1);
        let id = self.text(&format!("{at}.id"), m.get("id"), false);
        if m.get("id").is_some_and(Value::is_string) && id != expected {
            let shown: String = id.chars().take(20).collect();
            self.push(
                format!("{at}.id"),
                format!("must be \"{expected}\" (ids run G1, G2, … in order), found \"{shown}\""),
            );
        }
        let goal = self.text(&format!("{at}.goal"), m.get("goal"), false);
        let boundary = self.text(&format!("{at}.boundary"), m.get("boundary"), true);
        let done_when = self.text(&format!("{at}.done_when"), m.get("done_when"), false);
        let evidence = self.text(&format!("{at}.evidence"), m.get("evidence"), false);
        let lifecycle = self.lifecycle(&format!("{at}.lifecycle"), m.get("lifecycle"));
        match m.get("status") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s == "pending" => {}
            Some(_) => self.push(
                format!("{at}.status"),
                "a new sub-goal is \"pending\"; only the goal audit marks one done",
            ),
        }
        if !matches!(
            m.get("completion_confirmed"),
            None | Some(Value::Null) | Some(Value::Bool(false))
        ) {
            self.push(
                format!("{at}.completion_confirmed"),
                "a new sub-goal is not confirmed (false)",
            );
        }
        if !matches!(m.get("completed_at"), None | Some(Value::Null)) {
            self.push(
                format!("{at}.completed_at"),
                "a new sub-goal has no completed_at (null)",
            );
        }
        Some(Goal {
            id,
            goal,
            boundary,
            done_when,
            evidence,
            lifecycle,
        })
    }

    fn lifecycle(&mut self, at: &str, v: Option<&Value>) -> Vec<String> {
        let stages = self.list(at, v, false);
        let mut seen: Vec<String> = Vec::new();
        for (i, s) in stages.iter().enumerate() {
            if s.is_empty() {
                // Not a string, or empty: reported by `list` already.
                continue;
            }
            // goal-audit is a gate, not a stage that produces evidence.
            if !STAGES.contains(&s.as_str()) || s == "goal-audit" {
                let shown: String = s.chars().take(40).collect();
                self.push(
                    format!("{at}[{i}]"),
                    format!("\"{shown}\" is not a lifecycle stage"),
                );
            } else if seen.contains(s) {
                self.push(format!("{at}[{i}]"), format!("\"{s}\" is listed twice"));
            } else {
                seen.push(s.clone());
            }
        }
        seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub fn valid() -> Value {
        json!({
            "boundary_contract": {
                "in_scope": ["src/export/"], "out_of_scope": ["the UI"],
                "constraints": ["public API frozen"],
                "definition_of_done": "CSV export passes its tests"
            },
            "execution_criteria": ["backward-compatible", "incremental commits"],
            "task_decomposition": [
                {"id": "G1", "goal": "CSV writer", "boundary": "src/export only",
                 "done_when": "verification.json passed", "evidence": "verification.json",
                 "lifecycle": ["execute", "verify"], "status": "pending"},
                {"id": "G2", "goal": "header row", "boundary": "",
                 "done_when": "review.json verdict PASS", "evidence": "review.json",
                 "lifecycle": ["review"]}
            ]
        })
    }

    fn at(answer: &Value) -> Vec<String> {
        parse(&answer.to_string())
            .unwrap_err()
            .0
            .into_iter()
            .map(|i| i.at)
            .collect()
    }

    #[test]
    fn a_valid_answer_parses_fenced_or_not() {
        let d = parse(&valid().to_string()).unwrap();
        assert_eq!(d.goals.len(), 2);
        assert_eq!(d.goals[1].lifecycle, ["review"]);
        let fenced = format!("```json\n{}\n```", valid());
        assert_eq!(parse(&fenced).unwrap(), d);
        let fields = d.fields();
        assert_eq!(fields["task_decomposition"][1]["status"], "pending");
        assert_eq!(
            fields["task_decomposition"][1]["completion_confirmed"],
            false
        );
        assert_eq!(fields["task_decomposition_all_done"], false);
    }

    #[test]
    fn prose_around_the_object_is_refused() {
        let e = parse(&format!("Here it is: {}", valid())).unwrap_err();
        assert!(e.to_string().starts_with("at $: not a JSON object"), "{e}");
    }

    #[test]
    fn problems_are_located() {
        let mut v = valid();
        v["task_decomposition"][0]["id"] = json!("G7");
        v["task_decomposition"][1]["lifecycle"] = json!(["deploy", "review", "review"]);
        v["task_decomposition"][1]["status"] = json!("done");
        v["boundary_contract"]["in_scope"] = json!("src");
        v["extra"] = json!(1);
        assert_eq!(
            at(&v),
            [
                "$",
                "boundary_contract.in_scope",
                "task_decomposition[0].id",
                "task_decomposition[1].lifecycle[0]",
                "task_decomposition[1].lifecycle[2]",
                "task_decomposition[1].status",
            ]
        );
    }

    #[test]
    fn wrong_types_and_missing_fields() {
        let v = json!({"boundary_contract": [], "execution_criteria": [1],
                       "task_decomposition": {}});
        assert_eq!(
            at(&v),
            [
                "boundary_contract",
                "execution_criteria[0]",
                "task_decomposition"
            ]
        );
        let mut v = valid();
        v["task_decomposition"][0]
            .as_object_mut()
            .unwrap()
            .remove("done_when");
        let e = parse(&v.to_string()).unwrap_err();
        assert_eq!(e.0[0].message, "missing field \"done_when\"");
    }

    #[test]
    fn sizes_and_counts_are_bounded() {
        let mut v = valid();
        let one = v["task_decomposition"][0].clone();
        v["task_decomposition"] = Value::Array(vec![one; 10_000]);
        let e = parse(&v.to_string());
        // 10,000 sub-goals are over the byte limit before they are over the count limit.
        assert!(e.unwrap_err().to_string().contains("byte limit"));
        // Small enough in bytes: the count is refused in one message, no item looked at.
        let mut v = valid();
        v["task_decomposition"] = Value::Array(vec![json!({}); 10_000]);
        let e = parse(&v.to_string()).unwrap_err();
        assert_eq!(e.0.len(), 1, "{e}");
        assert_eq!(e.0[0].message, "10000 sub-goals, over the limit of 20");
        let mut v = valid();
        v["boundary_contract"]["definition_of_done"] = json!("x".repeat(MAX_TEXT + 1));
        assert_eq!(at(&v), ["boundary_contract.definition_of_done"]);
        let mut v = valid();
        v["task_decomposition"] = json!([]);
        assert_eq!(at(&v), ["task_decomposition"]);
    }

    #[test]
    fn many_problems_are_summarised() {
        let mut v = valid();
        v["execution_criteria"] = Value::Array(vec![json!(1); MAX_LIST]);
        let text = parse(&v.to_string()).unwrap_err().to_string();
        assert!(text.ends_with("… and 8 more"), "{text}");
    }
}
