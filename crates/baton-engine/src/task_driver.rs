//! Drives a [`TaskMachine`] against a model and a tool runner, in memory: the loop a task run
//! makes, without the store. The store-backed task run (run directory, conversation log,
//! audit, resume, record/replay) wraps this loop.

use crate::driver::ABORTED;
use crate::machine::{ToolResult, WaitReason};
use crate::task::{TaskAction, TaskInput, TaskMachine};
use baton_llm::{CallOptions, ChatModel, ToolCall, Usage};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Runs the host's tools for a task run, in order.
pub trait TaskTools {
    fn run(&mut self, calls: &[ToolCall]) -> Vec<ToolResult>;
}

/// How an invocation of a task run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum TaskEnd {
    /// The finish tool was called with accepted arguments.
    Finished {
        verdict: Value,
    },
    /// The run waits for a person (a question nobody answered, or a loop).
    Waiting {
        question: String,
        reason: WaitReason,
    },
    Failed {
        code: &'static str,
        message: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskReport {
    pub end: TaskEnd,
    pub usage: Usage,
    pub model_calls: usize,
    pub tool_calls: usize,
}

/// Runs the machine until it finishes, fails, or waits for an answer `answer` cannot give.
pub async fn drive_task(
    machine: &mut TaskMachine,
    model: &dyn ChatModel,
    tools: &mut dyn TaskTools,
    answer: &mut (dyn FnMut(&str) -> Option<String> + Send),
    cancel: &CancellationToken,
) -> TaskReport {
    let mut report = TaskReport {
        end: TaskEnd::Failed {
            code: ABORTED,
            message: String::new(),
        },
        usage: Usage::default(),
        model_calls: 0,
        tool_calls: 0,
    };
    let mut action = machine.step(TaskInput::Begin);
    loop {
        // Stops only between steps, so a tool's write is never cut in half.
        if cancel.is_cancelled() {
            report.end = TaskEnd::Failed {
                code: ABORTED,
                message: "the task run was stopped".into(),
            };
            return report;
        }
        action = match action {
            TaskAction::CallModel(request) => {
                report.model_calls += 1;
                let options = CallOptions {
                    on_event: None,
                    cancel: Some(cancel),
                };
                match model.chat(&request, options).await {
                    Ok(response) => {
                        if let Some(u) = response.usage {
                            report.usage.add(u);
                        }
                        machine.step(TaskInput::ModelAnswered(response))
                    }
                    Err(e) => {
                        report.end = TaskEnd::Failed {
                            code: e.code(),
                            message: e.to_string(),
                        };
                        return report;
                    }
                }
            }
            TaskAction::RunTools(calls) => {
                report.tool_calls += calls.len();
                let results = tools.run(&calls);
                machine.step(TaskInput::ToolsExecuted(results))
            }
            TaskAction::WaitForUser { question, reason } => match answer(&question) {
                Some(text) => machine.step(TaskInput::UserAnswered(text)),
                None => {
                    report.end = TaskEnd::Waiting { question, reason };
                    return report;
                }
            },
            TaskAction::Finished { verdict, .. } => {
                report.tool_calls += 1;
                report.end = TaskEnd::Finished { verdict };
                return report;
            }
            TaskAction::Fail { code, message } => {
                report.end = TaskEnd::Failed { code, message };
                return report;
            }
        };
    }
}
