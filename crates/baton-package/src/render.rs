//! Graph renderings for people and tools: Mermaid, Graphviz DOT and JSON.

use crate::graph::Graph;
use crate::model::NodeType;
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GraphFormat {
    Mermaid,
    Dot,
    Json,
}

pub fn render(graph: &Graph, format: GraphFormat) -> String {
    match format {
        GraphFormat::Mermaid => mermaid(graph),
        GraphFormat::Dot => dot(graph),
        GraphFormat::Json => json(graph),
    }
}

fn label_of(graph: &Graph, id: &str) -> String {
    graph
        .node(id)
        .and_then(|n| n.title.clone())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| id.to_string())
}

/// Mermaid ids must be simple; node ids may contain `.` and `:`.
fn mermaid_id(i: usize) -> String {
    format!("n{i}")
}

fn mermaid_text(s: &str) -> String {
    s.replace('"', "#quot;")
}

fn mermaid(graph: &Graph) -> String {
    let mut out = String::from("flowchart TD\n");
    let position = |id: &str| graph.nodes().iter().position(|n| n.id == id);
    for (i, node) in graph.nodes().iter().enumerate() {
        let text = mermaid_text(&format!("{}<br/>{}", node.id, label_of(graph, &node.id)));
        let text = if label_of(graph, &node.id) == node.id {
            mermaid_text(&node.id)
        } else {
            text
        };
        let shape = match node.node_type {
            NodeType::Decision => format!("{{\"{text}\"}}"),
            NodeType::End => format!("([\"{text}\"])"),
            NodeType::Merge => format!("((\"{text}\"))"),
            NodeType::Subworkflow => format!("[[\"{text}\"]]"),
            NodeType::Step => format!("[\"{text}\"]"),
        };
        let _ = writeln!(out, "  {}{shape}", mermaid_id(i));
    }
    if let Some(entry) = position(graph.entry_node_id()) {
        let _ = writeln!(out, "  start((start)) --> {}", mermaid_id(entry));
    }
    for edge in graph.edges() {
        let (Some(from), Some(to)) = (position(&edge.from), position(&edge.to)) else {
            continue;
        };
        let mut label = edge.label.clone();
        if edge.is_default {
            label.push_str(" (default)");
        }
        let _ = writeln!(
            out,
            "  {} -->|\"{}\"| {}",
            mermaid_id(from),
            mermaid_text(&label),
            mermaid_id(to)
        );
    }
    out
}

fn dot_text(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn dot(graph: &Graph) -> String {
    let mut out =
        String::from("digraph workflow {\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n");
    for node in graph.nodes() {
        let shape = match node.node_type {
            NodeType::Decision => "diamond",
            NodeType::End => "doublecircle",
            NodeType::Merge => "circle",
            NodeType::Subworkflow => "box3d",
            NodeType::Step => "box",
        };
        let _ = writeln!(
            out,
            "  \"{}\" [shape={shape}, label=\"{}\"];",
            dot_text(&node.id),
            dot_text(&label_of(graph, &node.id))
        );
    }
    for edge in graph.edges() {
        let style = if edge.is_default { ", style=bold" } else { "" };
        let _ = writeln!(
            out,
            "  \"{}\" -> \"{}\" [label=\"{}\"{style}];",
            dot_text(&edge.from),
            dot_text(&edge.to),
            dot_text(&edge.label)
        );
    }
    out.push_str("}\n");
    out
}

fn json(graph: &Graph) -> String {
    let nodes: Vec<serde_json::Value> = graph
        .nodes()
        .iter()
        .map(|n| {
            serde_json::json!({
                "id": n.id,
                "type": n.node_type.as_str(),
                "title": n.title,
                "file": n.file,
                "agentId": n.agent_id,
                "successors": graph.successors(&n.id),
            })
        })
        .collect();
    let doc = serde_json::json!({
        "entryNodeId": graph.entry_node_id(),
        "nodes": nodes,
        "edges": graph.edges(),
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
}
