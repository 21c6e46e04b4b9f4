//! What a workflow run's driver and a task run's driver both do against the store and the
//! host, written once: audit lines, run phases, model calls, tool batches with large results
//! offloaded, and the trace recorder.

use crate::context::offload;
use crate::error::{ABORTED, EngineError};
use crate::event::EngineEvent;
use crate::machine::{ToolResult, WaitReason};
use crate::spend::{self, Meter};
use baton_llm::{CallOptions, ChatModel, ChatRequest, ChatResponse, LlmError, StreamEvent};
use baton_llm::{ToolCall, ToolDef, TraceRecorder, Usage};
use baton_store::Project;
use baton_store::jsonl::JsonlWriter;
use baton_store::{
    BUDGET_EXCEEDED, ContextPolicy, Durability, MODEL_UNREACHABLE, ModelRecord, Phase, RunUsage,
};
use baton_tools::{CallContext, ToolHost};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

pub(crate) type OnEvent<'a> = Option<&'a (dyn Fn(EngineEvent) + Send + Sync)>;

pub(crate) fn emit(on_event: OnEvent<'_>, e: EngineEvent) {
    if let Some(f) = on_event {
        f(e);
    }
}

/// One `engine.*` line in the audit log; `durable: false` writes it without an fsync (it
/// survives a killed process; the caller syncs the log with its next flush). Best effort: a
/// full disk must not turn a finished step into a failure; the run's state and conversation
/// log are the records that count.
pub(crate) fn audit_with(
    log: Option<&mut JsonlWriter>,
    run_id: &str,
    node: Option<&str>,
    kind: &str,
    fields: Value,
    durable: bool,
) {
    let Some(log) = log else {
        return;
    };
    let mut line = json!({
        "ts": baton_store::time::now_rfc3339(),
        "kind": kind,
        "runId": run_id,
        "nodeId": node,
    });
    if let (Some(obj), Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    let _ = log.append(&line, durable);
}

pub(crate) fn set_phase(
    project: &Project,
    run_id: &str,
    phase: Phase,
    waiting_for: Option<Value>,
    node: Option<&str>,
    usage: Option<RunUsage>,
) -> Result<(), EngineError> {
    set_phase_with(
        project,
        run_id,
        phase,
        waiting_for,
        node,
        usage,
        Durability::PowerCut(&[]),
    )
}

/// [`set_phase`] written as `durability` says.
pub(crate) fn set_phase_with(
    project: &Project,
    run_id: &str,
    phase: Phase,
    waiting_for: Option<Value>,
    node: Option<&str>,
    usage: Option<RunUsage>,
    durability: Durability<'_>,
) -> Result<(), EngineError> {
    let node = node.map(str::to_owned);
    let reason = stop_reason(phase, waiting_for.as_ref());
    project.update_run_with(run_id, durability, |r| {
        r.phase = phase;
        r.waiting_for = waiting_for;
        r.current_node_id = node;
        r.stop_reason = reason;
        if usage.is_some() {
            r.usage = usage;
        }
    })?;
    Ok(())
}

/// The start of an invocation: `running`, and the model that drives it (never a key) and the
/// context policy remembered in the same write, so the next `answer`, `resume` or `chat` goes
/// on with them.
pub(crate) fn set_running(
    project: &Project,
    run_id: &str,
    node: Option<&str>,
    model: &dyn ChatModel,
    context: Option<ContextPolicy>,
    durability: Durability<'_>,
) -> Result<(), EngineError> {
    let node = node.map(str::to_owned);
    let record = model_record(model);
    project.update_run_with(run_id, durability, |r| {
        r.phase = Phase::Running;
        r.waiting_for = None;
        r.current_node_id = node;
        r.stop_reason = None;
        r.model = Some(record);
        if let Some(context) = context {
            r.context = context;
        }
    })?;
    Ok(())
}

/// What the run remembers of `model`.
pub fn model_record(model: &dyn ChatModel) -> ModelRecord {
    let id = model.identity();
    ModelRecord {
        name: id.name,
        base_url: id.base_url,
        api: id.api.map(|a| a.as_str().to_string()),
        replay: id.replay,
        trace: id.trace,
    }
}

/// `model-unreachable` for a run that failed without reaching its model (refused, unknown
/// host, no key); `budget-exceeded` for a run stopped before a call that would cross a
/// budget; no reason otherwise.
pub(crate) fn stop_reason(phase: Phase, waiting_for: Option<&Value>) -> Option<String> {
    let code = waiting_for?.pointer("/error/code")?.as_str()?;
    match phase {
        Phase::Failed => matches!(code, "LLM_CONNECT_ERROR" | "LLM_KEY_MISSING")
            .then(|| MODEL_UNREACHABLE.to_string()),
        Phase::Idle => (code == spend::BUDGET_EXCEEDED).then(|| BUDGET_EXCEEDED.to_string()),
        _ => None,
    }
}

/// The phase a failed invocation leaves: a stop asked for (Ctrl-C, SIGTERM) is no failure,
/// the run is idle again, between two writes, and resumes from there.
pub(crate) fn phase_after_failure(code: &str) -> Phase {
    if code == ABORTED || code == spend::BUDGET_EXCEEDED {
        Phase::Idle
    } else {
        Phase::Failed
    }
}

/// The reason a wait is recorded with (audit, index, trace).
pub(crate) fn wait_reason(reason: WaitReason) -> &'static str {
    match reason {
        WaitReason::Question => "assistant_no_toolCalls_and_not_complete",
        WaitReason::Widget => "ui_ask_user",
        WaitReason::LoopDetected => "ENGINE_LOOP_DETECTED",
    }
}

pub(crate) fn record(
    recorder: &Option<Arc<Mutex<TraceRecorder>>>,
    f: impl FnOnce(&mut TraceRecorder),
) {
    if let Some(r) = recorder
        && let Ok(mut r) = r.lock()
    {
        f(&mut r);
    }
}

/// Keeps a tool result over 50 KB out of the conversation: the whole result goes to
/// `@state/logs/tool-results/`, the message keeps a preview and that path.
pub(crate) fn offload(project: &Project, run_id: &str, call_id: &str, content: String) -> String {
    if content.len() <= offload::OFFLOAD_BYTES {
        return content;
    }
    let name = offload::file_name(call_id);
    let dir = project.run_paths(run_id).state_dir.join(offload::DIR);
    let saved = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            baton_store::durable::atomic_write(&dir.join(&name), content.as_bytes())
                .map_err(|e| e.to_string())
        });
    let mount = format!("@state/{}/{name}", offload::DIR);
    offload::replacement(&content, saved.is_ok().then_some(mount.as_str()))
}

/// The cache-key "node" of a task run, which has one conversation.
const TASK_NODE: &str = "task";

/// One model call, its text streamed to `on_event`; a stop is `ENGINE_ABORTED`.
pub(crate) async fn call_model(
    model: &dyn ChatModel,
    request: &ChatRequest,
    cancel: &CancellationToken,
    on_event: OnEvent<'_>,
) -> Result<ChatResponse, (&'static str, String)> {
    if cancel.is_cancelled() {
        return Err((ABORTED, "the run was stopped".into()));
    }
    let on_text = |e: StreamEvent| {
        if let (StreamEvent::TextDelta(t), Some(f)) = (e, on_event) {
            f(EngineEvent::Text(t));
        }
    };
    let options = CallOptions {
        on_event: Some(&on_text),
        cancel: Some(cancel),
    };
    match model.chat(request, options).await {
        Ok(response) => Ok(response),
        Err(LlmError::Cancelled) => Err((ABORTED, "the run was stopped".into())),
        Err(e) => Err((e.code(), e.to_string())),
    }
}

/// Who asks the model in a turn, and where the turn is counted and audited.
pub(crate) struct Turn<'a, 'w> {
    pub run_id: &'a str,
    /// The current node (`None` for a task run).
    pub node: Option<&'a str>,
    pub agent: &'a str,
    pub audit: Option<&'w mut JsonlWriter>,
    /// Whether the turn's audit line is fsynced as it is written.
    pub audit_durable: bool,
    pub on_event: OnEvent<'a>,
    /// Model calls of the invocation so far; one more when the model answers.
    pub calls: &'w mut usize,
    pub usage: &'w mut Usage,
    /// Budgets, the run's spending and the previous request.
    pub meter: &'w mut Meter,
}

/// One model turn: the MCP tools the policy allows added to the request, the stop checked,
/// the call announced and made, then counted and audited (`engine.turn`, with usage).
pub(crate) async fn model_turn(
    model: &dyn ChatModel,
    mut request: ChatRequest,
    host: &ToolHost,
    policy: &baton_tools::EffectivePolicy,
    cancel: &CancellationToken,
    turn: Turn<'_, '_>,
) -> Result<ChatResponse, (&'static str, String)> {
    // MCP tools come from the host, which starts the servers: a sans-IO machine cannot
    // list them. The list is taken once per agent and kept, and all tools go sorted by name:
    // the tool definitions open every request, so they must not change while a run goes.
    let mcp = turn.meter.mcp_tools(turn.agent, || {
        host.mcp_tools(policy)
            .into_iter()
            .map(|t| ToolDef {
                name: t.name,
                description: t.description,
                parameters: t.parameters,
            })
            .collect()
    });
    request.tools.extend(mcp);
    request.tools.sort_by(|a, b| a.name.cmp(&b.name));
    if cancel.is_cancelled() {
        return Err((ABORTED, "the run was stopped".into()));
    }
    // The budgets, before anything is sent: a request that could cross one is not made.
    let estimate = turn
        .meter
        .prepare(&mut request, Some(turn.node.unwrap_or(TASK_NODE)))
        .map_err(|stop| (stop.code, stop.message))?;
    let prompt = turn.meter.prompt_figures(&request, turn.node);
    emit(
        turn.on_event,
        EngineEvent::ModelCall {
            turn: *turn.calls + 1,
            node: turn.node.unwrap_or_default().to_string(),
            agent: turn.agent.to_string(),
        },
    );
    let mut response = call_model(model, &request, cancel, turn.on_event).await?;
    *turn.calls += 1;
    let spend = turn.meter.record(&estimate, &response);
    response.usage = spend.reported;
    let mut fields = spend.audit_fields(&estimate);
    fields["turn"] = json!(*turn.calls);
    fields["agentId"] = json!(turn.agent);
    fields["toolCalls"] = json!(response.message.tool_calls.len());
    fields["finishReason"] = json!(response.finish_reason);
    fields["prompt"] = prompt;
    let mut audit = turn.audit;
    audit_with(
        audit.as_deref_mut(),
        turn.run_id,
        turn.node,
        "engine.turn",
        fields,
        turn.audit_durable,
    );
    if let Some(w) = spend.warning {
        warn_usage(audit, turn.run_id, turn.node, turn.on_event, w);
    }
    if let Some(u) = response.usage {
        turn.usage.add(u);
        emit(turn.on_event, EngineEvent::Usage(u));
    }
    // A cut answer is never taken for a whole one (a question to the person, a step's text, a
    // tool call with half its arguments): the call is counted and audited above, then the run
    // stops saying which cap cut it.
    if response.finish_reason.as_deref() == Some("length") {
        let tokens = response
            .usage
            .map(|u| format!(" after {} completion tokens", u.completion_tokens))
            .unwrap_or_default();
        return Err((
            ANSWER_TRUNCATED,
            format!(
                "the model's answer was cut at its length limit{tokens} (finish_reason \"length\"): the completion cap each request carries ([llm] max_completion_tokens) or the model's own output limit; raise max_completion_tokens under [llm], then resume the run"
            ),
        ));
    }
    Ok(response)
}

/// The code of a run stopped because the model's answer was cut at a length limit.
pub const ANSWER_TRUNCATED: &str = "LLM_ANSWER_TRUNCATED";

/// A provider's faulty usage figures: an `engine.warning` line in the run's log, and a
/// warning event for the person watching.
pub(crate) fn warn_usage(
    audit: Option<&mut JsonlWriter>,
    run_id: &str,
    node: Option<&str>,
    on_event: OnEvent<'_>,
    w: spend::UsageWarning,
) {
    audit_with(audit, run_id, node, "engine.warning", w.to_json(), false);
    emit(
        on_event,
        EngineEvent::Warning {
            code: w.code.to_string(),
            message: w.message,
            hint: w.hint,
        },
    );
}

/// A failed result's `error.code` (`ERROR` when the result names none).
fn error_code(result: &Value) -> String {
    let code = result
        .pointer("/error/code")
        .and_then(Value::as_str)
        .unwrap_or("ERROR");
    short(code, 40)
}

/// The `path` (or `command`, `url`) argument of a call, for a progress line.
fn call_target(arguments: &str) -> Option<String> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    ["path", "command", "url", "name"]
        .iter()
        .find_map(|k| args.get(*k).and_then(Value::as_str))
        .map(|t| short(t, 80))
}

/// One line of at most `max` characters, control characters shown as visible escapes (the
/// model wrote it; the same rule as every terminal line).
fn short(text: &str, max: usize) -> String {
    let shown = baton_store::terminal::visible_line(text);
    let mut out: String = shown.chars().take(max).collect();
    if shown.chars().count() > max {
        out.push('…');
    }
    out
}

/// What a batch of host calls gave.
pub(crate) struct Batch {
    pub results: Vec<ToolResult>,
    /// The question a `ui.ask_user` call asked.
    pub question: Option<String>,
    /// That call's validated widget request, so the question is recorded as the widget it
    /// is (a page draws it; `waitingFor.widget`).
    pub widget: Option<Value>,
}

/// Runs `calls` in order through the host (each audited by it), offloads large results, and
/// adds the raw results to the trace.
pub(crate) fn run_tools(
    host: &mut ToolHost,
    calls: Vec<ToolCall>,
    ctx: CallContext<'_>,
    project: &Project,
    run_id: &str,
    recorder: &Option<Arc<Mutex<TraceRecorder>>>,
    on_event: OnEvent<'_>,
) -> Batch {
    let mut results = Vec::with_capacity(calls.len());
    let mut question = None;
    let mut widget = None;
    let mut runs = Vec::with_capacity(calls.len());
    for call in calls {
        let outcome = host.execute(
            baton_tools::ToolCall {
                id: &call.id,
                name: &call.name,
                arguments: &call.arguments,
            },
            ctx,
        );
        let ok = outcome.result.get("ok").and_then(Value::as_bool) == Some(true);
        emit(
            on_event,
            EngineEvent::ToolCall {
                name: call.name.clone(),
                ok,
                error: (!ok).then(|| error_code(&outcome.result)),
                target: call_target(&call.arguments),
            },
        );
        if let Some(q) = outcome.question {
            question = Some(q.message);
            widget = Some(q.widget);
        }
        runs.push((call.id.clone(), outcome.result.clone()));
        results.push(ToolResult {
            content: offload(project, run_id, &call.id, outcome.result.to_string()),
            ok,
            call,
        });
    }
    record(recorder, |r| r.record_tool_runs(runs));
    Batch {
        results,
        question,
        widget,
    }
}
