//! A loaded, validated session: the document as an ordered JSON map (so unknown fields and the
//! field order survive a write) with typed accessors for the fields ralph uses.

use serde_json::{Map, Value, json};
use std::path::PathBuf;

pub const STATUS_FILE: &str = "status.json";

#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub dir: PathBuf,
    pub doc: Map<String, Value>,
}

/// The claim `next` records beside `active_step_index`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub index: usize,
    pub owner: Option<String>,
    pub claimed_at: Option<String>,
}

impl Session {
    pub fn status_path(&self) -> PathBuf {
        self.dir.join(STATUS_FILE)
    }

    pub fn status(&self) -> &str {
        self.str("status").unwrap_or("")
    }

    pub fn str(&self, key: &str) -> Option<&str> {
        self.doc.get(key).and_then(Value::as_str)
    }

    /// Sets a field, keeping its position when it exists (appending it otherwise), as a
    /// JavaScript assignment does.
    pub fn set(&mut self, key: &str, value: Value) {
        self.doc.insert(key.to_string(), value);
    }

    pub fn steps(&self) -> &[Value] {
        self.doc
            .get("steps")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.steps().len()
    }

    pub fn is_empty(&self) -> bool {
        self.steps().is_empty()
    }

    pub fn steps_mut(&mut self) -> &mut Vec<Value> {
        let slot = self
            .doc
            .entry("steps")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !slot.is_array() {
            // Unreachable for a validated session; kept total instead of panicking.
            *slot = Value::Array(Vec::new());
        }
        match slot {
            Value::Array(a) => a,
            _ => unreachable!("slot was just made an array"),
        }
    }

    pub fn step(&self, i: usize) -> Option<Step<'_>> {
        self.steps().get(i).and_then(Value::as_object).map(Step)
    }

    pub fn all_steps(&self) -> impl Iterator<Item = Step<'_>> {
        self.steps().iter().filter_map(Value::as_object).map(Step)
    }

    /// Sets a field of step `i` (position kept when present).
    pub fn set_step(&mut self, i: usize, key: &str, value: Value) {
        if let Some(Value::Object(step)) = self.steps_mut().get_mut(i) {
            step.insert(key.to_string(), value);
        }
    }

    pub fn active_index(&self) -> Option<usize> {
        self.doc
            .get("active_step_index")
            .and_then(Value::as_u64)
            .map(|i| usize::try_from(i).unwrap_or(usize::MAX))
    }

    /// `active_step_index` as written, when it is an integer (negative included): what a
    /// message shows. [`Session::active_index`] is the step it names, if any.
    pub fn active_raw(&self) -> Option<i64> {
        let v = self.doc.get("active_step_index")?;
        v.as_i64()
            .or_else(|| v.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
    }

    pub fn set_active(&mut self, index: Option<usize>) {
        self.set("active_step_index", index.map_or(Value::Null, |i| json!(i)));
    }

    pub fn revision(&self) -> u64 {
        self.doc
            .get("revision")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    pub fn claim(&self) -> Option<Claim> {
        let c = self.doc.get("active_claim")?.as_object()?;
        Some(Claim {
            index: usize::try_from(c.get("index")?.as_u64()?).ok()?,
            owner: c.get("owner").and_then(Value::as_str).map(str::to_owned),
            claimed_at: c
                .get("claimed_at")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    /// The claim on `index`, when the recorded claim is about that step.
    pub fn claim_on(&self, index: usize) -> Option<Claim> {
        self.claim().filter(|c| c.index == index)
    }

    pub fn set_claim(&mut self, index: usize, owner: &str, at: &str) {
        self.set(
            "active_claim",
            json!({"index": index, "owner": owner, "claimed_at": at}),
        );
    }

    /// Releases the active pointer and the claim (the field stays, as null, so the field order
    /// of the file does not move).
    pub fn release(&mut self) {
        self.set_active(None);
        if self.doc.contains_key("active_claim") {
            self.set("active_claim", Value::Null);
        }
    }

    /// Renumbers `index` after an insert, and moves the active pointer and the claim with
    /// their step.
    pub fn reindex(&mut self, inserted_after: usize, count: usize) {
        for (i, step) in self.steps_mut().iter_mut().enumerate() {
            if let Value::Object(s) = step {
                s.insert("index".into(), json!(i));
            }
        }
        let shift = |i: usize| if i > inserted_after { i + count } else { i };
        if let Some(a) = self.active_index() {
            self.set_active(Some(shift(a)));
        }
        if let Some(Value::Object(c)) = self.doc.get_mut("active_claim")
            && let Some(i) = c.get("index").and_then(Value::as_u64)
        {
            let i = usize::try_from(i).unwrap_or(usize::MAX);
            c.insert("index".into(), json!(shift(i)));
        }
    }

    pub fn intent(&self) -> &str {
        self.str("intent").unwrap_or("")
    }
}

/// A read-only view of one step.
#[derive(Debug, Clone, Copy)]
pub struct Step<'a>(pub &'a Map<String, Value>);

impl<'a> Step<'a> {
    pub fn get(&self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.0.get(key).and_then(Value::as_str)
    }

    pub fn index(&self) -> usize {
        self.0
            .get("index")
            .and_then(Value::as_u64)
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(0)
    }

    pub fn skill(&self) -> &'a str {
        self.str("skill").unwrap_or("")
    }

    pub fn args(&self) -> &'a str {
        self.str("args").unwrap_or("")
    }

    pub fn stage(&self) -> &'a str {
        self.str("stage").unwrap_or("")
    }

    /// The gate name of a decision node. As in maestro, an empty string is not a decision.
    pub fn decision(&self) -> Option<&'a str> {
        self.str("decision").filter(|d| !d.is_empty())
    }

    pub fn status(&self) -> &'a str {
        self.str("status").unwrap_or("")
    }

    pub fn command_path(&self) -> Option<&'a str> {
        self.str("command_path").filter(|p| !p.is_empty())
    }

    pub fn command_scope(&self) -> Option<&'a str> {
        self.str("command_scope")
    }

    pub fn confirmed(&self) -> bool {
        self.0
            .get("completion_confirmed")
            .and_then(Value::as_bool)
            .unwrap_or(false)
    }

    pub fn retry_count(&self) -> u64 {
        self.0
            .get("retry_count")
            .and_then(Value::as_u64)
            .unwrap_or(0)
    }

    pub fn max_retries(&self) -> u64 {
        self.0
            .get("max_retries")
            .and_then(Value::as_u64)
            .unwrap_or(2)
    }

    /// What a listing shows: `◆ gate` for a decision, else the skill.
    pub fn label(&self) -> String {
        match self.decision() {
            Some(d) => format!("◆ {d}"),
            None => self.skill().to_string(),
        }
    }
}
