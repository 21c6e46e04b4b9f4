//! `{story_key}.agent-state.json` (seed 004 §2): a phase's resume state and its questions for a
//! person. A question whose `answer` is null is pending; the loop pauses on the first one. The
//! phase agents write it when they escalate; the orchestrator writes the questions of a run that
//! stopped to ask, and the answers. Unknown fields are kept.

use super::error::{EpicError, Result};
use super::jsonfile::{self, Fields};
use baton_autopilot::untrusted::{count, limit};
use baton_bmad::layout::{ArtifactFile, Artifacts};
use serde_json::{Map, Value, json};

pub const SUFFIX: &str = ".agent-state.json";
const CODE: &str = "AGENT_STATE_INVALID";
const PHASES: [&str; 6] = [
    "create-story",
    "validate",
    "dev",
    "build",
    "revision",
    "code-review",
];
pub const BLOCK_REASONS: [&str; 5] = [
    "no_resource",
    "manual_test_required",
    "human_review_required",
    "critical_decision",
    "subagent_failed",
];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: String,
    pub question: String,
    pub context: Option<String>,
    pub answer: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentState {
    /// The file as read, every field kept; the typed views below are checked copies.
    doc: Map<String, Value>,
    pub story_key: String,
    pub phase: String,
    pub questions: Vec<Question>,
}

pub fn path(dir: &Artifacts, story_key: &str) -> ArtifactFile {
    dir.file(&format!("{story_key}{SUFFIX}"))
}

impl AgentState {
    /// Reads and checks `{story_key}.agent-state.json`; `None` when there is none. `shown` is
    /// the project-relative folder, for messages.
    pub fn load(dir: &Artifacts, shown_dir: &str, story_key: &str) -> Result<Option<AgentState>> {
        let shown = format!("{shown_dir}/{story_key}{SUFFIX}");
        let file = path(dir, story_key);
        let Some(doc) = jsonfile::read_object(&file, &shown, CODE, limit::SMALL_JSON)? else {
            return Ok(None);
        };
        let f = Fields::top(&doc, &shown, CODE);
        let key = f.string("storyKey")?;
        if key != story_key {
            return Err(EpicError::invalid_file(
                CODE,
                &shown,
                Some("/storyKey"),
                format!("is {key:?}; the file belongs to {story_key:?}"),
            ));
        }
        let phase = f.one_of("phase", &PHASES)?.to_string();
        f.opt_string("lastCompletedStep")?;
        f.opt_string("blockedAt")?;
        f.opt_one_of("blockReason", &BLOCK_REASONS)?;
        for (at, item) in f.array("artifactsProduced", false)? {
            f.string_item(&at, item)?;
        }
        let mut questions = Vec::new();
        let items = f.array("questions", true)?;
        if items.len() > count::QUESTIONS {
            return Err(EpicError::invalid_file(
                CODE,
                &shown,
                Some("/questions"),
                format!(
                    "has {} questions; at most {} are read",
                    items.len(),
                    count::QUESTIONS
                ),
            ));
        }
        for (at, item) in items {
            let q = f.item(at.clone(), item)?;
            let id = q.string("id")?.to_string();
            if questions.iter().any(|x: &Question| x.id == id) {
                return Err(EpicError::invalid_file(
                    CODE,
                    &shown,
                    Some(&format!("{at}/id")),
                    format!("{id:?} is used by an earlier question"),
                ));
            }
            let answer = match q.map.get("answer") {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(_) => {
                    return Err(EpicError::invalid_file(
                        CODE,
                        &shown,
                        Some(&format!("{at}/answer")),
                        "must be a string, or null while the question waits",
                    ));
                }
            };
            questions.push(Question {
                id,
                question: q.string("question")?.to_string(),
                context: q.opt_string("context")?.map(str::to_owned),
                answer,
            });
        }
        let story_key = key.to_string();
        Ok(Some(AgentState {
            doc,
            story_key,
            phase,
            questions,
        }))
    }

    /// A new file for a question the orchestrator records.
    pub fn new(story_key: &str, phase: &str) -> AgentState {
        let mut doc = Map::new();
        doc.insert("storyKey".into(), json!(story_key));
        doc.insert("phase".into(), json!(phase));
        doc.insert("questions".into(), json!([]));
        AgentState {
            doc,
            story_key: story_key.to_string(),
            phase: phase.to_string(),
            questions: Vec::new(),
        }
    }

    /// The first question without an answer.
    pub fn pending(&self) -> Option<&Question> {
        self.questions.iter().find(|q| q.answer.is_none())
    }

    pub fn question(&self, id: &str) -> Option<&Question> {
        self.questions.iter().find(|q| q.id == id)
    }

    /// The next free `qN` id.
    pub fn next_id(&self) -> String {
        let mut n = self.questions.len() + 1;
        while self.question(&format!("q{n}")).is_some() {
            n += 1;
        }
        format!("q{n}")
    }

    /// Adds a pending question, with where the phase stopped.
    pub fn ask(&mut self, phase: &str, question: Question, blocked_at: &str, reason: &str) {
        self.phase = phase.to_string();
        self.doc.insert("phase".into(), json!(phase));
        self.doc.insert("blockedAt".into(), json!(blocked_at));
        self.doc.insert("blockReason".into(), json!(reason));
        self.questions.push(question);
    }

    /// Adds a new pending question `text` (with `context`) under the next free id, with where
    /// the phase stopped; returns it.
    pub fn ask_new(
        &mut self,
        phase: &str,
        text: String,
        context: String,
        blocked_at: &str,
        reason: &str,
    ) -> Question {
        let q = Question {
            id: self.next_id(),
            question: text,
            context: Some(context),
            answer: None,
        };
        self.ask(phase, q.clone(), blocked_at, reason);
        q
    }

    /// Records an answer.
    pub fn answer(&mut self, id: &str, text: &str) {
        if let Some(q) = self.questions.iter_mut().find(|q| q.id == id) {
            q.answer = Some(text.to_string());
        }
    }

    /// Removes a question (one the orchestrator asked and has acted on); the block fields go
    /// with the last pending question.
    pub fn remove(&mut self, id: &str) {
        self.questions.retain(|q| q.id != id);
        if self.pending().is_none() {
            self.doc.remove("blockedAt");
            self.doc.remove("blockReason");
        }
    }

    /// What a finished phase leaves (seed 004: rewrite with `questions: []`): no question and
    /// no block, the resume fields kept.
    pub fn clear(&mut self) {
        self.questions.clear();
        self.doc.remove("blockedAt");
        self.doc.remove("blockReason");
    }

    pub fn to_json(&self) -> Map<String, Value> {
        let mut doc = self.doc.clone();
        let questions: Vec<Value> = self
            .questions
            .iter()
            .map(|q| {
                json!({"id": q.id, "question": q.question, "context": q.context, "answer": q.answer})
            })
            .collect();
        doc.insert("storyKey".into(), json!(self.story_key));
        doc.insert("phase".into(), json!(self.phase));
        doc.insert("questions".into(), Value::Array(questions));
        doc
    }

    pub fn save(&self, dir: &Artifacts) -> Result<()> {
        jsonfile::write_object(&path(dir, &self.story_key), &self.to_json())
    }
}
