//! A chat with an agent: base rules for conversation, the persona and the menu as system
//! layers, then the conversation (budgeted like a run's window, compressed in `Chat` mode).
//! The state is pure; [`Chat::send`] does the model calls.

use crate::composer::persona;
use crate::context::plan::Mode;
use crate::context::summary::SUMMARY_TIMEOUT;
use crate::context::{Budget, ContextEvent, Prepared, TokenCounter, Window};
use crate::router::Menu;
use baton_llm::{CallOptions, ChatModel, ChatRequest, LlmError, Message, Usage};
use baton_package::model::Agent;
use std::fmt::Write as _;
use tokio_util::sync::CancellationToken;

const AGENT_RULES: &str = include_str!("../prompts/agent_rules.md");

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ChatError {
    #[error("{message}")]
    Llm { code: &'static str, message: String },
    #[error("{0}")]
    TooLarge(String),
    #[error("the chat was stopped")]
    Cancelled,
}

impl ChatError {
    pub fn code(&self) -> &'static str {
        match self {
            ChatError::Llm { code, .. } => code,
            ChatError::TooLarge(_) => crate::context::CONTEXT_STILL_TOO_LARGE,
            ChatError::Cancelled => crate::error::ABORTED,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ChatReply {
    pub assistant: String,
    pub usage: Usage,
    pub events: Vec<ContextEvent>,
}

/// One agent's conversation.
pub struct Chat {
    system: Vec<Message>,
    history: Vec<Message>,
    window: Window,
}

/// The menu as the agent knows it.
fn menu_layer(menu: &Menu) -> String {
    let mut s = String::from("Your menu (the user types a number or a trigger):\n");
    for item in menu.visible() {
        let _ = write!(s, "{}. {}", item.index.unwrap_or(0), item.description);
        if let Some(t) = item.trigger.as_ref().or(item.cmd.as_ref()) {
            let _ = write!(s, " ({t})");
        }
        s.push('\n');
    }
    s
}

impl Chat {
    pub fn new(agent: &Agent, menu: &Menu, budget: Option<Budget>, counter: TokenCounter) -> Chat {
        let mut system = vec![
            Message::system(AGENT_RULES),
            Message::system(persona(agent)),
        ];
        if !menu.is_empty() {
            system.push(Message::system(menu_layer(menu)));
        }
        Chat {
            system,
            history: Vec::new(),
            window: Window::new(Mode::Chat, budget, counter),
        }
    }

    /// Puts back a conversation from its log.
    pub fn restore(&mut self, history: Vec<Message>, compaction: Option<(Vec<Message>, usize)>) {
        self.history = history;
        if let Some((view, covers)) = compaction {
            self.window.restore(view, covers, self.history.len());
        }
    }

    pub fn history(&self) -> &[Message] {
        &self.history
    }

    pub fn window(&self) -> &Window {
        &self.window
    }

    pub fn window_mut(&mut self) -> &mut Window {
        &mut self.window
    }

    /// Says `text` to the agent and returns its answer. The user's message stays in the
    /// history even when the model fails, so the next message has the context.
    pub async fn send(
        &mut self,
        model: &dyn ChatModel,
        text: &str,
        cancel: &CancellationToken,
    ) -> Result<ChatReply, ChatError> {
        self.history
            .push(Message::user(format!("USER_INPUT\n{}", text.trim())));
        let mut usage = Usage::default();
        let mut prepared = self.window.prepare(&self.history, &self.system, &[]);
        let messages = loop {
            match prepared {
                Prepared::Send(messages) => break messages,
                Prepared::TooLarge { tokens, limit } => {
                    return Err(ChatError::TooLarge(Prepared::too_large_message(
                        tokens, limit,
                    )));
                }
                Prepared::Summarize(request) => {
                    let options = CallOptions {
                        on_event: None,
                        cancel: Some(cancel),
                    };
                    let answer =
                        match tokio::time::timeout(SUMMARY_TIMEOUT, model.chat(&request, options))
                            .await
                        {
                            Err(_) => Err("LLM_TIMEOUT".to_string()),
                            Ok(Err(LlmError::Cancelled)) => return Err(ChatError::Cancelled),
                            Ok(Err(e)) => Err(e.code().to_string()),
                            Ok(Ok(r)) => {
                                if let Some(u) = r.usage {
                                    usage.add(u);
                                }
                                Ok(r.message.content.unwrap_or_default())
                            }
                        };
                    prepared = self
                        .window
                        .summarized(answer, &self.history, &self.system, &[]);
                }
            }
        };
        let request = ChatRequest {
            messages,
            tools: Vec::new(),
            options: Default::default(),
        };
        let options = CallOptions {
            on_event: None,
            cancel: Some(cancel),
        };
        let response = match model.chat(&request, options).await {
            Ok(r) => r,
            Err(LlmError::Cancelled) => return Err(ChatError::Cancelled),
            Err(e) => {
                return Err(ChatError::Llm {
                    code: e.code(),
                    message: e.to_string(),
                });
            }
        };
        if let Some(u) = response.usage {
            usage.add(u);
        }
        // No tools were offered: calls a model makes anyway are not run, only its words kept.
        let assistant = response.message.content.unwrap_or_default();
        self.history.push(Message::assistant(assistant.clone()));
        Ok(ChatReply {
            assistant,
            usage,
            events: self.window.take_events(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::Conversation;
    use crate::context::Encoding;
    use baton_llm::{BoxFuture, ChatResponse};
    use baton_package::Package;
    use std::sync::Mutex;

    /// Answers every chat with a long reply, and every summary request with a short summary;
    /// keeps what it was sent.
    #[derive(Default)]
    struct Talkative {
        requests: Mutex<Vec<ChatRequest>>,
    }

    impl ChatModel for Talkative {
        fn chat<'a>(
            &'a self,
            request: &'a ChatRequest,
            _: CallOptions<'a>,
        ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
            Box::pin(async move {
                let summary = request.messages[0].text().contains("rolling summary");
                self.requests.lock().unwrap().push(request.clone());
                let text = if summary {
                    "User goal: plan the sprint.".to_string()
                } else {
                    "Here is a long answer about stories. ".repeat(12)
                };
                Ok(ChatResponse {
                    message: Message::assistant(text),
                    finish_reason: None,
                    usage: None,
                    usage_faults: Vec::new(),
                })
            })
        }

        fn model_name(&self) -> &str {
            "talkative"
        }
    }

    #[tokio::test]
    async fn a_long_chat_is_compressed_logged_and_restored() {
        let package = Package::load(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/packages/create-story-micro"),
        )
        .unwrap();
        let agent = package.agent("sm").unwrap();
        let menu = Menu::of(agent, crate::router::Surface::Terminal);
        let budget = Budget::new(4_096);
        let counter = || TokenCounter::new(Encoding::Chars);
        let mut chat = Chat::new(agent, &menu, Some(budget), counter());
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("project");
        std::fs::create_dir_all(&root).unwrap();
        let project = baton_store::Store::new(tmp.path().join("home"))
            .project(&root)
            .unwrap();
        let mut log = Conversation::create(&project, "pkg", "sm").unwrap();
        let model = Talkative::default();
        let cancel = CancellationToken::new();
        for i in 0..60 {
            let reply = chat
                .send(
                    &model,
                    &format!("question {i}: {}", "detail ".repeat(30)),
                    &cancel,
                )
                .await
                .unwrap();
            assert!(!reply.assistant.is_empty());
            log.sync(&mut chat).unwrap();
        }
        let requests = model.requests.lock().unwrap().clone();
        let mut c = counter();
        let summaries = requests
            .iter()
            .filter(|r| r.messages[0].text().contains("rolling summary"))
            .count();
        assert!(summaries >= 1, "the chat was summarized");
        for r in &requests {
            assert!(r.tools.is_empty());
            assert!(c.request(&r.messages, &r.tools) <= budget.limit());
            assert_eq!(baton_llm::protocol::validate(&r.messages), Ok(()));
        }
        let last = requests.last().unwrap();
        assert!(last.messages[1].text().starts_with("You are Bob"));
        assert!(
            last.messages
                .iter()
                .any(|m| m.text().starts_with("CONVERSATION_SUMMARY"))
        );
        assert!(last.messages.last().unwrap().text().contains("question 59"));

        // Reopened from the store, the next request goes on from the same window.
        let mut again = Chat::new(agent, &menu, Some(budget), counter());
        Conversation::open(&project, log.id(), "sm", &mut again).unwrap();
        assert_eq!(again.history().len(), chat.history().len());
        assert_eq!(
            again.window().messages(again.history()),
            chat.window().messages(chat.history())
        );
        assert!(matches!(
            Conversation::open(&project, log.id(), "summarizer", &mut again),
            Err(crate::agent::log::ConversationError::OtherAgent { .. })
        ));
        assert!(matches!(
            Conversation::open(&project, "../../etc", "sm", &mut again),
            Err(crate::agent::log::ConversationError::NotFound(_))
        ));
    }
}
