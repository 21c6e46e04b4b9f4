//! Agent sessions (agent-first entry): a chat with one agent's persona, kept in the store like
//! runs, and the texts an agent's menu items send (scripts, prompts, data). The command router
//! (`crate::router`) decides what an input means; the CLI dispatches it.

pub mod chat;
pub mod log;
pub mod texts;

pub use chat::{Chat, ChatError, ChatReply};
pub use log::Conversation;
