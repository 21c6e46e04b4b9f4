//! The workflow graph as SVG: the package's [`Graph`] laid out in layers from the entry node
//! (longest path over the edges that are not loops back), each node marked completed, current
//! or pending from the run's state. Styling lives in app.css (classes only: the CSP forbids
//! inline styles).

use super::html::{clip, push_esc};
use baton_package::graph::Graph;
use baton_package::model::NodeType;
use baton_store::NodeStatus;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

/// The narrowest node; nodes widen to fit the longest title (up to [`TITLE_CHARS`]).
const NODE_W_MIN: usize = 230;
/// Room on a node besides its title: the status mark on the left, a margin on the right.
const NODE_PAD: usize = 44;
/// A generous width of one title character (13 px, semi-bold): a title measured with it is
/// never wider than its node.
const CHAR_W: usize = 8;
const NODE_H: usize = 46;
const GAP_X: usize = 30;
const GAP_Y: usize = 38;
const MARGIN: usize = 16;
/// Room on the right for the edges that loop back.
const LOOP_ROOM: usize = 70;
/// A title longer than this is cut on the node (the full text is in its tooltip).
const TITLE_CHARS: usize = 48;
/// An edge label longer than this is cut (it sits between nodes).
const LABEL_CHARS: usize = 22;

/// Where each node goes: its layer and its place in the layer.
struct Layout {
    rank: Vec<usize>,
    /// Node indexes per layer, left to right.
    layers: Vec<Vec<usize>>,
}

fn targets(graph: &Graph, index: &HashMap<&str, usize>) -> Vec<Vec<(usize, usize)>> {
    // (edge index, target node index) per node; edges to unknown nodes are not drawn.
    let mut out = vec![Vec::new(); graph.nodes().len()];
    for (e, edge) in graph.edges().iter().enumerate() {
        if let (Some(&from), Some(&to)) =
            (index.get(edge.from.as_str()), index.get(edge.to.as_str()))
        {
            out[from].push((e, to));
        }
    }
    out
}

/// Marks the edges that close a cycle (found by an iterative DFS from the entry node, then
/// from every node not reached yet), so the rest is a DAG to layer.
fn back_edges(n: usize, entry: usize, out: &[Vec<(usize, usize)>], edges: usize) -> Vec<bool> {
    let mut back = vec![false; edges];
    // 0 = unseen, 1 = on the stack, 2 = done.
    let mut mark = vec![0u8; n];
    let roots = std::iter::once(entry).chain(0..n);
    for root in roots {
        if mark[root] != 0 {
            continue;
        }
        mark[root] = 1;
        let mut stack = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut next)) = stack.last_mut() {
            if let Some(&(e, w)) = out[v].get(*next) {
                *next += 1;
                match mark[w] {
                    0 => {
                        mark[w] = 1;
                        stack.push((w, 0));
                    }
                    1 => back[e] = true,
                    _ => {}
                }
            } else {
                mark[v] = 2;
                stack.pop();
            }
        }
    }
    back
}

fn layout(graph: &Graph) -> (Layout, Vec<bool>, HashMap<&str, usize>) {
    let nodes = graph.nodes();
    let n = nodes.len();
    let mut index = HashMap::with_capacity(n);
    for (i, node) in nodes.iter().enumerate() {
        index.entry(node.id.as_str()).or_insert(i);
    }
    let out = targets(graph, &index);
    let entry = index.get(graph.entry_node_id()).copied().unwrap_or(0);
    let back = if n == 0 {
        Vec::new()
    } else {
        back_edges(n, entry, &out, graph.edges().len())
    };
    // Longest path by Kahn's order over the forward edges.
    let mut indegree = vec![0usize; n];
    for list in &out {
        for &(e, w) in list {
            if !back[e] {
                indegree[w] += 1;
            }
        }
    }
    let mut rank = vec![0usize; n];
    let mut queue: VecDeque<usize> = (0..n).filter(|&v| indegree[v] == 0).collect();
    while let Some(v) = queue.pop_front() {
        for &(e, w) in &out[v] {
            if back[e] {
                continue;
            }
            rank[w] = rank[w].max(rank[v] + 1);
            indegree[w] -= 1;
            if indegree[w] == 0 {
                queue.push_back(w);
            }
        }
    }
    let depth = rank.iter().copied().max().map_or(0, |m| m + 1);
    let mut layers = vec![Vec::new(); depth];
    for (v, &r) in rank.iter().enumerate() {
        layers[r].push(v);
    }
    // One downward sweep: order each layer by where its parents sit (fewer crossings).
    let mut parents = vec![Vec::new(); n];
    for (u, list) in out.iter().enumerate() {
        for &(e, w) in list {
            if !back[e] {
                parents[w].push(u);
            }
        }
    }
    let mut position = vec![0f64; n];
    for layer in &mut layers {
        let key = |v: usize| -> f64 {
            let p = &parents[v];
            if p.is_empty() {
                v as f64
            } else {
                p.iter().map(|&u| position[u]).sum::<f64>() / p.len() as f64
            }
        };
        let mut keyed: Vec<(f64, usize)> = layer.iter().map(|&v| (key(v), v)).collect();
        keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        *layer = keyed.into_iter().map(|(_, v)| v).collect();
        for (i, &v) in layer.iter().enumerate() {
            position[v] = i as f64;
        }
    }
    (Layout { rank, layers }, back, index)
}

/// What a node shows: its title, else its id.
fn title_of(node: &baton_package::model::Node) -> &str {
    node.title
        .as_deref()
        .filter(|t| !t.is_empty())
        .unwrap_or(&node.id)
}

fn status_class(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Completed => "completed",
        NodeStatus::Current => "current",
        NodeStatus::Pending => "pending",
    }
}

/// The SVG of `graph` with each node's status looked up in `status` (pending when absent).
/// Every node is a `<g class="node …" data-node-id="…" data-status="…">`.
pub fn render(graph: &Graph, status: &HashMap<&str, NodeStatus>) -> String {
    let (layout, back, index) = layout(graph);
    // As wide as the longest title needs: a title is cut only past TITLE_CHARS.
    let longest = graph
        .nodes()
        .iter()
        .map(|n| title_of(n).chars().count().min(TITLE_CHARS))
        .max()
        .unwrap_or(0);
    let node_w = (NODE_PAD + longest * CHAR_W).max(NODE_W_MIN);
    let widest = layout.layers.iter().map(Vec::len).max().unwrap_or(0);
    let row_width = |k: usize| k * node_w + k.saturating_sub(1) * GAP_X;
    let inner = row_width(widest);
    let width = MARGIN * 2 + inner + LOOP_ROOM;
    let height = MARGIN * 2 + layout.layers.len() * (NODE_H + GAP_Y);
    // Top-left corner of each node.
    let mut at = vec![(0usize, 0usize); graph.nodes().len()];
    for (r, layer) in layout.layers.iter().enumerate() {
        let left = MARGIN + (inner - row_width(layer.len())) / 2;
        for (i, &v) in layer.iter().enumerate() {
            at[v] = (left + i * (node_w + GAP_X), MARGIN + r * (NODE_H + GAP_Y));
        }
    }
    let mut svg = String::with_capacity(512 + graph.nodes().len() * 400);
    let _ = write!(
        svg,
        "<svg id=\"graph-svg\" data-testid=\"graph\" class=\"graph\" xmlns=\"http://www.w3.org/2000/svg\" \
         viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" role=\"img\" \
         aria-labelledby=\"graph-title\"><title id=\"graph-title\">Workflow graph</title>\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerUnits=\"userSpaceOnUse\" markerWidth=\"9\" \
         markerHeight=\"9\" orient=\"auto-start-reverse\"><path d=\"M0,0 L10,5 L0,10 z\" \
         class=\"arrow\"/></marker></defs>"
    );
    for (e, edge) in graph.edges().iter().enumerate() {
        let (Some(&from), Some(&to)) = (index.get(edge.from.as_str()), index.get(edge.to.as_str()))
        else {
            continue;
        };
        let (fx, fy) = at[from];
        let (tx, ty) = at[to];
        let class = if edge.is_default {
            "edge default"
        } else {
            "edge"
        };
        let (path, mid) = if back[e] || layout.rank[to] <= layout.rank[from] {
            // Around the right side, back up to the target.
            let (x1, y1) = (fx + node_w, fy + NODE_H / 2);
            let (x2, y2) = (tx + node_w, ty + NODE_H / 2);
            let bulge = x1.max(x2) + LOOP_ROOM - 14;
            (
                format!("M{x1},{y1} C{bulge},{y1} {bulge},{y2} {x2},{y2}"),
                (bulge - 20, (y1 + y2) / 2),
            )
        } else {
            let (x1, y1) = (fx + node_w / 2, fy + NODE_H);
            let (x2, y2) = (tx + node_w / 2, ty);
            let c = (y1 + y2) / 2;
            (
                format!("M{x1},{y1} C{x1},{c} {x2},{c} {x2},{y2}"),
                ((x1 + x2) / 2, c),
            )
        };
        let _ = write!(svg, "<g class=\"{class}\"><title>");
        push_esc(&mut svg, &edge.label);
        svg.push_str("</title>");
        let _ = write!(svg, "<path d=\"{path}\" marker-end=\"url(#arrow)\"/>");
        // Only a choice needs its label on the drawing.
        if graph.outgoing(&edge.from).nth(1).is_some() && !edge.label.is_empty() {
            let _ = write!(
                svg,
                "<text class=\"edge-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">",
                mid.0, mid.1
            );
            push_esc(&mut svg, &clip(&edge.label, LABEL_CHARS));
            svg.push_str("</text>");
        }
        svg.push_str("</g>");
    }
    for (v, node) in graph.nodes().iter().enumerate() {
        let (x, y) = at[v];
        let st = status
            .get(node.id.as_str())
            .copied()
            .unwrap_or(NodeStatus::Pending);
        let class = status_class(st);
        let kind = node.node_type.as_str();
        let title = title_of(node);
        svg.push_str("<g class=\"node ");
        svg.push_str(class);
        svg.push(' ');
        svg.push_str(kind);
        svg.push_str("\" data-node-id=\"");
        push_esc(&mut svg, &node.id);
        let _ = write!(svg, "\" data-status=\"{class}\"><title>");
        push_esc(&mut svg, &node.id);
        svg.push_str(" — ");
        push_esc(&mut svg, title);
        let _ = write!(svg, " ({class})</title>");
        let rx = match node.node_type {
            NodeType::End | NodeType::Merge => NODE_H / 2,
            NodeType::Decision => 2,
            _ => 8,
        };
        let _ = write!(
            svg,
            "<rect x=\"{x}\" y=\"{y}\" width=\"{node_w}\" height=\"{NODE_H}\" rx=\"{rx}\"/>"
        );
        let mark = match st {
            NodeStatus::Completed => "✓",
            NodeStatus::Current => "●",
            NodeStatus::Pending => "○",
        };
        let _ = write!(
            svg,
            "<text class=\"mark\" x=\"{}\" y=\"{}\">{mark}</text>",
            x + 12,
            y + NODE_H / 2 + 5
        );
        let _ = write!(
            svg,
            "<text class=\"title\" x=\"{}\" y=\"{}\">",
            x + 30,
            y + 20
        );
        push_esc(&mut svg, &clip(title, TITLE_CHARS));
        let _ = write!(
            svg,
            "</text><text class=\"kind\" x=\"{}\" y=\"{}\">",
            x + 30,
            y + 36
        );
        svg.push_str(kind);
        svg.push_str("</text></g>");
    }
    svg.push_str("</svg>");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_package::model::GraphDoc;
    use serde_json::json;

    fn graph(doc: serde_json::Value) -> Graph {
        Graph::new(serde_json::from_value::<GraphDoc>(doc).unwrap())
    }

    fn node(id: &str, ty: &str) -> serde_json::Value {
        json!({"id": id, "type": ty, "file": format!("steps/{id}.md")})
    }

    fn edge(from: &str, to: &str) -> serde_json::Value {
        json!({"from": from, "to": to, "label": format!("{from}->{to}")})
    }

    #[test]
    fn layers_follow_the_longest_path_and_loops_go_back() {
        // a -> b -> c -> d, a -> c (skip), c -> a (loop back)
        let g = graph(json!({
            "schemaVersion": "1.1", "entryNodeId": "a",
            "nodes": [node("a", "step"), node("b", "step"), node("c", "decision"), node("d", "end")],
            "edges": [edge("a", "b"), edge("b", "c"), edge("a", "c"), edge("c", "a"), edge("c", "d")]
        }));
        let (layout, back, _) = layout(&g);
        assert_eq!(layout.rank, vec![0, 1, 2, 3]);
        assert_eq!(back, vec![false, false, false, true, false]);
    }

    #[test]
    fn each_node_carries_its_status_and_hostile_text_is_escaped() {
        let mut evil = node("s<1>", "step");
        evil["title"] = json!("<script>alert('x')</script>\"");
        let g = graph(json!({
            "schemaVersion": "1.1", "entryNodeId": "s<1>",
            "nodes": [evil, node("s2", "step"), node("end", "end")],
            "edges": [{"from": "s<1>", "to": "s2", "label": "<b>go</b>"}, edge("s2", "end")]
        }));
        let status = HashMap::from([("s<1>", NodeStatus::Completed), ("s2", NodeStatus::Current)]);
        let svg = render(&g, &status);
        assert!(svg.contains(
            "class=\"node completed step\" data-node-id=\"s&lt;1&gt;\" data-status=\"completed\""
        ));
        assert!(
            svg.contains("class=\"node current step\" data-node-id=\"s2\" data-status=\"current\"")
        );
        assert!(
            svg.contains("class=\"node pending end\" data-node-id=\"end\" data-status=\"pending\"")
        );
        assert!(!svg.contains("<script"));
        assert!(!svg.contains("<b>"));
        assert!(svg.contains("&lt;script&gt;alert(&#39;x&#39;)"));
        assert_eq!(svg.matches("marker-end=").count(), 2);
    }

    #[test]
    fn a_cycle_without_a_way_in_and_an_empty_graph_still_render() {
        let g = graph(json!({
            "schemaVersion": "1.1", "entryNodeId": "a",
            "nodes": [node("a", "step"), node("x", "step"), node("y", "step")],
            "edges": [edge("x", "y"), edge("y", "x"), edge("a", "ghost")]
        }));
        let svg = render(&g, &HashMap::new());
        assert_eq!(svg.matches("data-status=\"pending\"").count(), 3);
        let empty =
            graph(json!({"schemaVersion": "1.1", "entryNodeId": "a", "nodes": [], "edges": []}));
        assert!(render(&empty, &HashMap::new()).ends_with("</svg>"));
    }
}
