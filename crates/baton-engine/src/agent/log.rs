//! Agent conversations in the store, like runs: `projects/<projectId>/conversations/<id>/`
//! holds `conversation.json` (who talks, since when) and `conversation.jsonl` (the messages,
//! in the same records as a run's conversation log, compactions included).

use super::chat::Chat;
use crate::conversation;
use baton_llm::Message;
use baton_store::jsonl::JsonlWriter;
use baton_store::{Project, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversationMeta {
    pub conversation_id: String,
    pub project_id: String,
    pub package_id: String,
    pub agent_id: String,
    pub created_at: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConversationError {
    #[error("no conversation '{0}' in this project")]
    NotFound(String),
    #[error("conversation {id} is with agent '{agent}', not '{wanted}'")]
    OtherAgent {
        id: String,
        agent: String,
        wanted: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("conversation {0} is damaged: {1}")]
    Damaged(String, String),
}

impl ConversationError {
    pub fn code(&self) -> &'static str {
        match self {
            ConversationError::NotFound(_) => "CONVERSATION_NOT_FOUND",
            ConversationError::OtherAgent { .. } => "CONVERSATION_AGENT_MISMATCH",
            ConversationError::Store(_) => "STORE_IO_FAILED",
            ConversationError::Damaged(..) => "CONVERSATION_DAMAGED",
        }
    }
}

/// An open conversation and its log.
pub struct Conversation {
    pub meta: ConversationMeta,
    dir: PathBuf,
    writer: JsonlWriter,
    logged: usize,
    compactions: u64,
}

fn conversations_dir(project: &Project) -> PathBuf {
    project.dir.join("conversations")
}

/// Ids are UUIDs: nothing else may name a directory.
fn valid_id(id: &str) -> bool {
    id.len() == 36 && id.chars().all(|c| c.is_ascii_hexdigit() || c == '-')
}

impl Conversation {
    pub fn create(
        project: &Project,
        package_id: &str,
        agent_id: &str,
    ) -> Result<Conversation, ConversationError> {
        let id = uuid::Uuid::now_v7().to_string();
        let dir = conversations_dir(project).join(&id);
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create", &dir))?;
        let meta = ConversationMeta {
            conversation_id: id.clone(),
            project_id: project.id().to_string(),
            package_id: package_id.to_string(),
            agent_id: agent_id.to_string(),
            created_at: baton_store::time::now_rfc3339(),
        };
        let bytes = serde_json::to_vec_pretty(&meta)
            .map_err(|e| ConversationError::Damaged(id.clone(), e.to_string()))?;
        baton_store::durable::atomic_write(&dir.join("conversation.json"), &bytes)?;
        let writer = JsonlWriter::open(&dir.join("conversation.jsonl"))?;
        Ok(Conversation {
            meta,
            dir,
            writer,
            logged: 0,
            compactions: 0,
        })
    }

    /// Opens conversation `id` with `agent_id` and puts its messages back into `chat`.
    pub fn open(
        project: &Project,
        id: &str,
        agent_id: &str,
        chat: &mut Chat,
    ) -> Result<Conversation, ConversationError> {
        let dir = conversations_dir(project).join(id);
        let meta_path = dir.join("conversation.json");
        if !valid_id(id) || !meta_path.is_file() {
            return Err(ConversationError::NotFound(id.to_string()));
        }
        let bytes = std::fs::read(&meta_path).map_err(StoreError::io("read", &meta_path))?;
        let meta: ConversationMeta = serde_json::from_slice(&bytes)
            .map_err(|e| ConversationError::Damaged(id.to_string(), e.to_string()))?;
        if meta.agent_id != agent_id {
            return Err(ConversationError::OtherAgent {
                id: id.to_string(),
                agent: meta.agent_id,
                wanted: agent_id.to_string(),
            });
        }
        let log = dir.join("conversation.jsonl");
        let restored = conversation::restore(&log)?;
        let logged = restored.history.len() - restored.repaired;
        chat.restore(restored.history, restored.compaction);
        Ok(Conversation {
            meta,
            writer: JsonlWriter::open(&log)?,
            dir,
            logged,
            compactions: chat.window().compactions(),
        })
    }

    pub fn id(&self) -> &str {
        &self.meta.conversation_id
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.join("conversation.jsonl")
    }

    /// Appends what the chat added since the last call, as one durable record.
    pub fn sync(&mut self, chat: &mut Chat) -> Result<(), StoreError> {
        let new: Vec<&Message> = chat.history().iter().skip(self.logged).collect();
        let compacted = chat.window().compactions() != self.compactions;
        if new.is_empty() && !compacted {
            return Ok(());
        }
        let mut record = json!({"kind": "messages", "reset": false, "messages": new});
        let logged = chat.history().len();
        if compacted {
            let (view, covers) = chat.window().compaction();
            record["compaction"] = json!({
                "covers": covers,
                "messages": view,
                "summaryCalls": 0,
            });
        }
        self.writer.append(&record, true)?;
        self.logged = logged;
        self.compactions = chat.window().compactions();
        Ok(())
    }
}
