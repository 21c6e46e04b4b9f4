//! A gate's answer: the `---VERDICT--- … ---END---` block of seed 003, read by a strict
//! grammar instead of by the model (maestro leaves the parsing to the LLM, and it drifts).
//!
//! Grammar: exactly one block; inside it, lines `KEY: value` (or `KEY=value`) with the keys of
//! the gate's form, each at most once; a line that is not a key line continues the previous
//! value; text around the block is ignored (the model may explain itself). Quality gates
//! answer STATUS proceed|fix|escalate, REASON, GAP_SUMMARY, CONFIDENCE high|medium|low,
//! CONFIDENCE_SCORE 0–100 and WEAKEST_DIMENSION; the goal audit answers STATUS
//! all_met|has_unmet, UNMET (a JSON array of `{id, gap, target_phase}`) and CONFIDENCE_SCORE.
//! An answer that does not parse becomes `fix` (E004) — the guards of ralph's `decide` then
//! escalate it once the retries are spent.

use baton_ralph::verbs::decide::DecideArgs;
use serde_json::Value;

const OPEN: &str = "---VERDICT---";
const CLOSE: &str = "---END---";

/// Which form of the block a gate asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// post-verify, post-review, post-test, post-business-test.
    Quality,
    /// post-goal-audit.
    GoalAudit,
}

impl Form {
    fn keys(self) -> &'static [&'static str] {
        match self {
            Form::Quality => &[
                "STATUS",
                "REASON",
                "GAP_SUMMARY",
                "CONFIDENCE",
                "CONFIDENCE_SCORE",
                "WEAKEST_DIMENSION",
            ],
            Form::GoalAudit => &["STATUS", "REASON", "UNMET", "CONFIDENCE_SCORE"],
        }
    }
}

/// A parsed block, as ralph's `decide` takes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// proceed | fix | escalate
    pub verdict: &'static str,
    pub confidence_score: u8,
    pub reason: Option<String>,
    /// Quality gates: the GAP_SUMMARY; goal audit: one `G{n}: gap` per unmet sub-goal.
    pub gaps: Vec<String>,
    pub confidence: Option<&'static str>,
    pub weakest_dimension: Option<String>,
}

/// Why an answer did not parse (the message is recorded as the decision's reason).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("E004: the verdict could not be parsed: {0}")]
pub struct VerdictError(pub String);

impl VerdictError {
    pub const CODE: &'static str = "E004";
}

fn err(message: impl Into<String>) -> VerdictError {
    VerdictError(message.into())
}

/// The lines between the only `---VERDICT---` and its `---END---`.
fn block(answer: &str) -> Result<Vec<&str>, VerdictError> {
    let lines: Vec<&str> = answer.lines().map(str::trim).collect();
    let opens: Vec<usize> = (0..lines.len()).filter(|i| lines[*i] == OPEN).collect();
    let start = match opens.as_slice() {
        [] => return Err(err(format!("no {OPEN} line"))),
        [one] => *one,
        _ => {
            return Err(err(format!(
                "{} {OPEN} blocks; give exactly one",
                opens.len()
            )));
        }
    };
    let len = lines[start + 1..]
        .iter()
        .position(|l| *l == CLOSE)
        .ok_or_else(|| err(format!("the block has no {CLOSE} line")))?;
    Ok(lines[start + 1..start + 1 + len].to_vec())
}

/// `KEY: value` or `KEY=value` with an upper-case key, else `None`.
fn key_line(line: &str) -> Option<(&str, &str)> {
    let at = line.find([':', '='])?;
    let key = line[..at].trim();
    let is_key = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
    is_key.then(|| (key, line[at + 1..].trim()))
}

/// The fields of the block, in order, continuation lines joined to their key's value.
fn fields(lines: &[&str], form: Form) -> Result<Vec<(&'static str, String)>, VerdictError> {
    let mut out: Vec<(&'static str, String)> = Vec::new();
    for line in lines {
        match key_line(line) {
            Some((key, value)) => {
                let known = form
                    .keys()
                    .iter()
                    .find(|k| **k == key)
                    .ok_or_else(|| err(format!("unknown key {key}")))?;
                if out.iter().any(|(k, _)| k == known) {
                    return Err(err(format!("{key} is given twice")));
                }
                out.push((known, value.to_string()));
            }
            None if line.is_empty() => {}
            None => match out.last_mut() {
                Some((_, value)) => {
                    value.push('\n');
                    value.push_str(line);
                }
                None => return Err(err(format!("text before the first key: {line:?}"))),
            },
        }
    }
    Ok(out)
}

fn get<'a>(fields: &'a [(&'static str, String)], key: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

fn score(fields: &[(&'static str, String)]) -> Result<u8, VerdictError> {
    let raw = get(fields, "CONFIDENCE_SCORE").ok_or_else(|| err("CONFIDENCE_SCORE is missing"))?;
    raw.parse::<u8>()
        .ok()
        .filter(|s| *s <= 100)
        .ok_or_else(|| err(format!("CONFIDENCE_SCORE must be 0-100 (got {raw:?})")))
}

/// Reads a gate's answer.
pub fn parse(answer: &str, form: Form) -> Result<Verdict, VerdictError> {
    let fields = fields(&block(answer)?, form)?;
    let status = get(&fields, "STATUS").ok_or_else(|| err("STATUS is missing"))?;
    let confidence_score = score(&fields)?;
    let reason = get(&fields, "REASON").map(str::to_owned);
    match form {
        Form::Quality => {
            let verdict = ["proceed", "fix", "escalate"]
                .into_iter()
                .find(|v| v.eq_ignore_ascii_case(status))
                .ok_or_else(|| {
                    err(format!(
                        "STATUS must be proceed, fix or escalate (got {status:?})"
                    ))
                })?;
            let confidence = match get(&fields, "CONFIDENCE") {
                None => None,
                Some(c) => Some(
                    ["high", "medium", "low"]
                        .into_iter()
                        .find(|v| v.eq_ignore_ascii_case(c))
                        .ok_or_else(|| {
                            err(format!(
                                "CONFIDENCE must be high, medium or low (got {c:?})"
                            ))
                        })?,
                ),
            };
            let gap = get(&fields, "GAP_SUMMARY")
                .filter(|g| !matches!(g.to_ascii_lowercase().as_str(), "none" | "n/a" | "-"));
            Ok(Verdict {
                verdict,
                confidence_score,
                reason,
                gaps: gap.map(|g| vec![g.to_string()]).unwrap_or_default(),
                confidence,
                weakest_dimension: get(&fields, "WEAKEST_DIMENSION").map(str::to_owned),
            })
        }
        Form::GoalAudit => {
            let verdict = match status.to_ascii_lowercase().as_str() {
                "all_met" => "proceed",
                "has_unmet" => "fix",
                _ => {
                    return Err(err(format!(
                        "STATUS must be all_met or has_unmet (got {status:?})"
                    )));
                }
            };
            let gaps = unmet(get(&fields, "UNMET"))?;
            if verdict == "fix" && gaps.is_empty() {
                return Err(err("has_unmet without any UNMET sub-goal"));
            }
            if verdict == "proceed" && !gaps.is_empty() {
                return Err(err("all_met but UNMET lists sub-goals"));
            }
            Ok(Verdict {
                verdict,
                confidence_score,
                reason,
                gaps,
                confidence: None,
                weakest_dimension: None,
            })
        }
    }
}

/// `UNMET=[{id, gap, target_phase}]` as ralph's goal gaps (`G2: what is missing`).
fn unmet(raw: Option<&str>) -> Result<Vec<String>, VerdictError> {
    let Some(raw) = raw else {
        return Ok(Vec::new());
    };
    let items: Vec<Value> =
        serde_json::from_str(raw).map_err(|e| err(format!("UNMET is not a JSON array: {e}")))?;
    items
        .iter()
        .map(|item| {
            let id = match item.get("id") {
                Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return Err(err("an UNMET item has no id")),
            };
            let gap = item
                .get("gap")
                .and_then(Value::as_str)
                .map(|g| g.trim().replace(['\n', '\r'], " "))
                .filter(|g| !g.is_empty())
                .ok_or_else(|| err(format!("UNMET item {id} has no gap")))?;
            let id = if id.starts_with(['G', 'g']) {
                format!("G{}", &id[1..])
            } else {
                format!("G{id}")
            };
            Ok(format!("{id}: {gap}"))
        })
        .collect()
}

/// The `decide` arguments for gate `index`: the parsed verdict, or `fix` with the parse error
/// as its reason (E004) and no confidence to lean on.
pub fn decide_args(index: usize, parsed: &Result<Verdict, VerdictError>) -> DecideArgs {
    match parsed {
        Ok(v) => DecideArgs {
            index: index.to_string(),
            verdict: v.verdict.to_string(),
            confidence: v.confidence_score.to_string(),
            reason: v.reason.clone(),
            gaps: v.gaps.clone(),
            ..DecideArgs::default()
        },
        Err(e) => DecideArgs {
            index: index.to_string(),
            verdict: "fix".into(),
            confidence: "0".into(),
            reason: Some(e.to_string()),
            gaps: Vec::new(),
            ..DecideArgs::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "Checked verification.json.\n\
        ---VERDICT---\n\
        STATUS: fix\n\
        REASON: two tests fail\n\
        GAP_SUMMARY: login rejects valid tokens\n\
        CONFIDENCE: medium\n\
        CONFIDENCE_SCORE: 72\n\
        WEAKEST_DIMENSION: correctness\n\
        ---END---\n\
        Thanks.";

    #[test]
    fn a_quality_block_parses_field_by_field() {
        let v = parse(GOOD, Form::Quality).unwrap();
        assert_eq!(v.verdict, "fix");
        assert_eq!(v.confidence_score, 72);
        assert_eq!(v.reason.as_deref(), Some("two tests fail"));
        assert_eq!(v.gaps, vec!["login rejects valid tokens"]);
        assert_eq!(v.confidence, Some("medium"));
        assert_eq!(v.weakest_dimension.as_deref(), Some("correctness"));
    }

    #[test]
    fn equals_signs_case_and_continuation_lines_are_accepted() {
        let v = parse(
            "---VERDICT---\nSTATUS=Proceed\nREASON: all green\nand reviewed\nCONFIDENCE_SCORE=96\nGAP_SUMMARY: none\n---END---",
            Form::Quality,
        )
        .unwrap();
        assert_eq!(v.verdict, "proceed");
        assert_eq!(v.reason.as_deref(), Some("all green\nand reviewed"));
        assert!(v.gaps.is_empty());
        assert_eq!(v.confidence, None);
    }

    #[test]
    fn answers_that_do_not_follow_the_grammar_are_refused() {
        for bad in [
            "STATUS: proceed\nCONFIDENCE_SCORE: 90",
            "---VERDICT---\nSTATUS: proceed\nCONFIDENCE_SCORE: 90",
            "---VERDICT---\nSTATUS: maybe\nCONFIDENCE_SCORE: 90\n---END---",
            "---VERDICT---\nSTATUS: proceed\n---END---",
            "---VERDICT---\nSTATUS: proceed\nCONFIDENCE_SCORE: 101\n---END---",
            "---VERDICT---\nSTATUS: proceed\nCONFIDENCE_SCORE: high\n---END---",
            "---VERDICT---\nSTATUS: proceed\nSTATUS: fix\nCONFIDENCE_SCORE: 90\n---END---",
            "---VERDICT---\nSTATUS: proceed\nMOOD: good\nCONFIDENCE_SCORE: 90\n---END---",
            "---VERDICT---\nI think it is fine\nSTATUS: proceed\nCONFIDENCE_SCORE: 90\n---END---",
            "---VERDICT---\nSTATUS: proceed\nCONFIDENCE: sure\nCONFIDENCE_SCORE: 90\n---END---",
            "---VERDICT---\nSTATUS: fix\nCONFIDENCE_SCORE: 9\n---END---\n---VERDICT---\nSTATUS: proceed\nCONFIDENCE_SCORE: 99\n---END---",
        ] {
            assert!(parse(bad, Form::Quality).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_goal_audit_turns_unmet_sub_goals_into_goal_gaps() {
        let v = parse(
            "---VERDICT---\nSTATUS=has_unmet\nUNMET=[{\"id\":\"G2\",\"gap\":\"no export\",\"target_phase\":\"2\"},{\"id\":3,\"gap\":\"docs\"}]\nCONFIDENCE_SCORE=80\n---END---",
            Form::GoalAudit,
        )
        .unwrap();
        assert_eq!(v.verdict, "fix");
        assert_eq!(v.gaps, vec!["G2: no export", "G3: docs"]);
        let done = parse(
            "---VERDICT---\nSTATUS=all_met\nUNMET=[]\nCONFIDENCE_SCORE=90\n---END---",
            Form::GoalAudit,
        )
        .unwrap();
        assert_eq!(done.verdict, "proceed");
        for bad in [
            "---VERDICT---\nSTATUS=has_unmet\nCONFIDENCE_SCORE=80\n---END---",
            "---VERDICT---\nSTATUS=all_met\nUNMET=[{\"id\":1,\"gap\":\"x\"}]\nCONFIDENCE_SCORE=80\n---END---",
            "---VERDICT---\nSTATUS=has_unmet\nUNMET=[{\"gap\":\"x\"}]\nCONFIDENCE_SCORE=80\n---END---",
            "---VERDICT---\nSTATUS=has_unmet\nUNMET=not json\nCONFIDENCE_SCORE=80\n---END---",
            "---VERDICT---\nSTATUS=proceed\nCONFIDENCE_SCORE=80\n---END---",
            "---VERDICT---\nSTATUS=all_met\nGAP_SUMMARY: x\nCONFIDENCE_SCORE=80\n---END---",
        ] {
            assert!(parse(bad, Form::GoalAudit).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_unparsable_answer_becomes_fix_with_e004() {
        let parsed = parse("looks fine to me", Form::Quality);
        let args = decide_args(4, &parsed);
        assert_eq!(args.index, "4");
        assert_eq!(args.verdict, "fix");
        assert_eq!(args.confidence, "0");
        assert!(args.reason.unwrap().starts_with("E004"));
        let ok = decide_args(4, &parse(GOOD, Form::Quality));
        assert_eq!((ok.verdict.as_str(), ok.confidence.as_str()), ("fix", "72"));
        assert_eq!(ok.gaps, vec!["login rejects valid tokens"]);
    }
}
