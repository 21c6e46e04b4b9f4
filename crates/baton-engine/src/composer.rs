//! The prompt protocol: system layers, `RUN_DIRECTIVE`, `NODE_BRIEF`, `USER_INPUT` and the
//! instructions the runtime adds on its own.

use crate::context::groups::AGENT_PERSONA;
use baton_llm::{Message, ToolDef};
use baton_package::model::{Agent, NodeType};
use baton_package::{Package, Workflow};
use baton_tools::{EffectivePolicy, SystemToolSettings, ToolHost};
use std::fmt::Write as _;

const BASE_RULES: &str = include_str!("prompts/base_rules.md");
const RUN_PROTOCOL: &str = include_str!("prompts/run_protocol.md");
const POST_RUN_PROTOCOL: &str = include_str!("prompts/post_run_protocol.md");

pub const COMPLETION_REQUEST: &str = "The workflow is complete. Now answer the user with a concise completion message: point to the main output and the summary artifact, and list the next actions.";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intent {
    Start,
    Continue,
    Resume,
}

impl Intent {
    fn as_str(self) -> &'static str {
        match self {
            Intent::Start => "start",
            Intent::Continue => "continue",
            Intent::Resume => "resume",
        }
    }
}

/// Composes prompts for one workflow of one package.
pub struct Composer<'p> {
    pub package: &'p Package,
    pub workflow: &'p Workflow,
    pub system: SystemToolSettings,
    pub autopilot: bool,
}

impl<'p> Composer<'p> {
    /// `node.agentId ?? run.activeAgentId`.
    pub fn effective_agent<'a>(&'a self, node_id: &'a str, active_agent: &'a str) -> &'a str {
        self.workflow
            .graph
            .node(node_id)
            .and_then(|n| n.agent_id.as_deref())
            .filter(|a| !a.is_empty())
            .unwrap_or(active_agent)
    }

    pub fn policy(&self, agent_id: &str) -> EffectivePolicy {
        EffectivePolicy::merge(
            &self.system,
            self.package.agent(agent_id).and_then(|a| a.tools.as_ref()),
        )
    }

    pub fn tools(&self, policy: &EffectivePolicy) -> Vec<ToolDef> {
        ToolHost::visible_tools(policy)
            .into_iter()
            .map(|s| ToolDef {
                name: s.name.to_string(),
                description: s.description.to_string(),
                parameters: s.parameters.clone(),
            })
            .collect()
    }

    /// Base rules, tool policy, the run protocol, persona of the effective agent. The layers
    /// that never change in a run come first and the persona last, so a change of agent keeps
    /// the rest of the prefix a provider has cached; they stay the same when the workflow
    /// completes (the post-run directive says what changes then), so the turn that completes it
    /// still extends the one before.
    pub fn system_layers(&self, agent_id: &str) -> Vec<Message> {
        let mut layers = vec![
            Message::system(BASE_RULES),
            Message::system(self.policy(agent_id).prompt_text()),
            Message::system(RUN_PROTOCOL),
        ];
        if let Some(agent) = self.package.agent(agent_id) {
            layers.push(Message::system(persona(agent)));
        }
        layers
    }

    /// The persona of `agent_id` as a message of baton's, for the carrying context policy:
    /// the system layers stay those of `anchor` (the run's agent) so that every request still
    /// begins with the previous one, and the agent that takes over is introduced in the
    /// history. Its tool policy comes too when it is not the anchor's.
    pub fn agent_message(&self, agent_id: &str, anchor: &str) -> String {
        let mut s = format!("{AGENT_PERSONA}\n- effectiveAgentId: {agent_id}\n");
        s.push_str(
            "From here on you act as this agent: what follows replaces the persona of the system messages.\n",
        );
        let policy = self.policy(agent_id).prompt_text();
        if policy != self.policy(anchor).prompt_text() {
            s.push('\n');
            s.push_str(&policy);
        }
        if let Some(agent) = self.package.agent(agent_id) {
            s.push('\n');
            s.push_str(&persona(agent));
        }
        s
    }

    fn graph_path(&self) -> String {
        format!("@pkg/{}", self.workflow.graph_file)
    }

    /// The run shell. `node` is `None` once the workflow is complete (post-run profile, whose
    /// protocol the directive carries; the run protocol is a system layer). The fields that
    /// never change in a run come first, the intent, node and agent last, so the directive of
    /// a new node shares as much as it can with the one before.
    pub fn run_directive(&self, intent: Intent, node: Option<&str>, agent: &str) -> String {
        let mut s = String::from("RUN_DIRECTIVE\n- runType: bmad-micro\n");
        let _ = writeln!(s, "- workflow: {}", self.workflow.id);
        s.push_str("- state: @state/workflow.md\n");
        let _ = writeln!(s, "- graph: {}", self.graph_path());
        s.push_str("- artifactsRoot: @project/artifacts/\n");
        let _ = writeln!(s, "- autopilot: {}", self.autopilot);
        let _ = writeln!(s, "- intent: {}", intent.as_str());
        if let Some(node) = node {
            let _ = writeln!(s, "- currentNodeId: {node}");
        }
        let _ = writeln!(s, "- effectiveAgentId: {agent}");
        if node.is_none() {
            s.push('\n');
            s.push_str(POST_RUN_PROTOCOL);
        }
        s
    }

    pub fn node_brief(&self, node_id: &str) -> String {
        let graph = &self.workflow.graph;
        let mut s = String::from("NODE_BRIEF\n");
        let _ = writeln!(s, "- currentNodeId: {node_id}");
        if let Some(node) = graph.node(node_id) {
            let _ = writeln!(s, "- type: {}", node.node_type.as_str());
            if let Some(t) = node.title.as_deref().filter(|t| !t.is_empty()) {
                let _ = writeln!(s, "- title: {t}");
            }
            let _ = writeln!(s, "- step file: @pkg/{}", node.file);
            for out in &node.outputs {
                let _ = writeln!(s, "- output: {out} -> @project/{out}");
            }
            let next = graph.successors(node_id);
            if next.is_empty() {
                s.push_str("- allowed next: none (end node: when done, set variables.workflowStatus to complete)\n");
            }
            for e in next {
                let mut line = format!("- allowed next: {} (label={}", e.to, e.label);
                if e.is_default {
                    line.push_str(", default");
                }
                if let Some(c) = e.condition_text.filter(|c| !c.is_empty()) {
                    let _ = write!(line, ", when: {c}");
                }
                line.push(')');
                s.push_str(&line);
                s.push('\n');
            }
        }
        s
    }

    /// What the current node still requires, sent with a user's answer.
    pub fn reminder(&self, node_id: &str) -> String {
        let graph = &self.workflow.graph;
        let outputs = graph
            .node(node_id)
            .map(|n| n.outputs.join(", "))
            .unwrap_or_default();
        let next: Vec<String> = graph
            .successors(node_id)
            .iter()
            .map(|e| e.to.to_string())
            .collect();
        let mut s = format!("Reminder: {node_id} requires ");
        if !outputs.is_empty() {
            let _ = write!(s, "writing {outputs} and then ");
        }
        s.push_str("patching @state/workflow.md (stepsCompleted, variables, ");
        if next.is_empty() {
            s.push_str("variables.workflowStatus = complete");
        } else {
            let _ = write!(s, "currentNodeId -> {}", next.join(" or "));
        }
        s.push_str(", artifacts, updatedAt).");
        s
    }

    /// Sent after a tool batch at an end node that left the workflow incomplete.
    pub fn finalize_end(&self, node_id: &str) -> String {
        let outputs = self
            .workflow
            .graph
            .node(node_id)
            .map(|n| n.outputs.join(", "))
            .unwrap_or_default();
        let mut s = format!(
            "Finalize end node: patch @state/workflow.md to append {node_id} to stepsCompleted"
        );
        if !outputs.is_empty() {
            let _ = write!(s, ", append {outputs} to artifacts");
        }
        s.push_str(", set variables.workflowStatus=complete, and set updatedAt.");
        s
    }

    pub fn is_end(&self, node_id: &str) -> bool {
        self.workflow
            .graph
            .node(node_id)
            .is_some_and(|n| n.node_type == NodeType::End)
    }
}

/// `USER_INPUT` with `forNodeId` while a node is active; without it after completion.
pub fn user_input(raw: &str, for_node: Option<&str>) -> String {
    match for_node {
        Some(node) => format!("USER_INPUT\n- forNodeId: {node}\n{raw}"),
        None => format!("USER_INPUT\n{raw}"),
    }
}

/// The persona layer; an agent's `systemPrompt` replaces it.
pub fn persona(agent: &Agent) -> String {
    if let Some(p) = agent
        .system_prompt
        .as_deref()
        .filter(|p| !p.trim().is_empty())
    {
        return p.to_string();
    }
    let mut s = format!(
        "You are {} ({}).\n",
        agent.metadata.name, agent.metadata.title
    );
    let _ = writeln!(s, "Role: {}", agent.persona.role);
    let _ = writeln!(s, "Identity: {}", agent.persona.identity);
    let _ = writeln!(
        s,
        "Communication style: {}",
        agent.persona.communication_style
    );
    let principles = agent.persona.principles.as_list();
    if !principles.is_empty() {
        s.push_str("Principles:\n");
        for p in principles {
            let _ = writeln!(s, "- {p}");
        }
    }
    for a in &agent.critical_actions {
        let _ = writeln!(s, "Always: {a}");
    }
    s.push_str("Stay in character unless the user dismisses the agent.\n");
    s
}
