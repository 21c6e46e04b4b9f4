//! Graph queries (successors, reachability, cycles) and the integrity rules that a JSON Schema
//! cannot express.

use crate::diagnostic::{Code, Diagnostic};
use crate::model::{Edge, GraphDoc, Node, NodeType};
use std::collections::{BTreeSet, HashMap};

/// A workflow graph with an id index. Built from a schema-valid [`GraphDoc`].
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    doc: GraphDoc,
    index: HashMap<String, usize>,
    outgoing: Vec<Vec<usize>>,
}

/// One allowed move out of a node, as shown to the model and to users.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Successor<'a> {
    pub to: &'a str,
    pub label: &'a str,
    pub is_default: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition_text: Option<&'a str>,
}

impl Graph {
    pub fn new(doc: GraphDoc) -> Graph {
        let mut index = HashMap::with_capacity(doc.nodes.len());
        for (i, node) in doc.nodes.iter().enumerate() {
            // First definition wins; duplicates are reported by `check`.
            index.entry(node.id.clone()).or_insert(i);
        }
        let mut outgoing = vec![Vec::new(); doc.nodes.len()];
        for (e, edge) in doc.edges.iter().enumerate() {
            if let Some(&from) = index.get(&edge.from) {
                outgoing[from].push(e);
            }
        }
        Graph {
            doc,
            index,
            outgoing,
        }
    }

    pub fn doc(&self) -> &GraphDoc {
        &self.doc
    }

    pub fn entry_node_id(&self) -> &str {
        &self.doc.entry_node_id
    }

    pub fn nodes(&self) -> &[Node] {
        &self.doc.nodes
    }

    pub fn edges(&self) -> &[Edge] {
        &self.doc.edges
    }

    pub fn node(&self, id: &str) -> Option<&Node> {
        self.index.get(id).map(|&i| &self.doc.nodes[i])
    }

    /// Outgoing edges of `id`, in file order.
    pub fn outgoing(&self, id: &str) -> impl Iterator<Item = &Edge> {
        self.index
            .get(id)
            .map(|&i| self.outgoing[i].as_slice())
            .unwrap_or(&[])
            .iter()
            .map(|&e| &self.doc.edges[e])
    }

    /// The allowed next nodes of `id` with their labels, default flag and condition text.
    pub fn successors(&self, id: &str) -> Vec<Successor<'_>> {
        self.outgoing(id)
            .map(|e| Successor {
                to: &e.to,
                label: &e.label,
                is_default: e.is_default,
                condition_text: e.condition_text.as_deref(),
            })
            .collect()
    }

    pub fn has_edge(&self, from: &str, to: &str) -> bool {
        self.outgoing(from).any(|e| e.to == to)
    }

    /// Node ids reachable from `start` (including it) by following edges.
    pub fn reachable_from(&self, start: &str) -> BTreeSet<&str> {
        let mut seen = BTreeSet::new();
        let Some(&first) = self.index.get(start) else {
            return seen;
        };
        let mut stack = vec![first];
        let mut visited = vec![false; self.doc.nodes.len()];
        visited[first] = true;
        while let Some(n) = stack.pop() {
            seen.insert(self.doc.nodes[n].id.as_str());
            for &e in &self.outgoing[n] {
                if let Some(&to) = self.index.get(&self.doc.edges[e].to)
                    && !visited[to]
                {
                    visited[to] = true;
                    stack.push(to);
                }
            }
        }
        seen
    }

    /// The cycles of the graph: strongly connected components with more than one node, or one
    /// node with an edge to itself. Each is a list of node indexes.
    fn cycles(&self) -> Vec<Vec<usize>> {
        let n = self.doc.nodes.len();
        let targets: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                self.outgoing[i]
                    .iter()
                    .filter_map(|&e| self.index.get(&self.doc.edges[e].to).copied())
                    .collect()
            })
            .collect();
        // Iterative Tarjan: a hostile graph must not overflow the stack.
        let mut index_of = vec![usize::MAX; n];
        let mut low = vec![0usize; n];
        let mut on_stack = vec![false; n];
        let mut stack = Vec::new();
        let mut next_index = 0;
        let mut components = Vec::new();
        for root in 0..n {
            if index_of[root] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some(&mut (v, ref mut child)) = work.last_mut() {
                if *child == 0 && index_of[v] == usize::MAX {
                    index_of[v] = next_index;
                    low[v] = next_index;
                    next_index += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if let Some(&w) = targets[v].get(*child) {
                    *child += 1;
                    if index_of[w] == usize::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index_of[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index_of[v] {
                    let mut component = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    let is_cycle = component.len() > 1 || targets[v].contains(&v);
                    if is_cycle {
                        component.sort_unstable();
                        components.push(component);
                    }
                }
            }
        }
        components
    }

    /// Integrity rules beyond the schema. Diagnostics carry a JSON pointer into the graph file;
    /// the caller adds the file name and line.
    pub fn check(&self) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        let doc = &self.doc;
        let mut seen_ids: HashMap<&str, usize> = HashMap::new();
        for (i, node) in doc.nodes.iter().enumerate() {
            if let Some(first) = seen_ids.insert(&node.id, i) {
                out.push(
                    Diagnostic::error(
                        Code::GraphIntegrityInvalid,
                        format!(
                            "node id '{}' is used twice (nodes {first} and {i})",
                            node.id
                        ),
                    )
                    .pointer(format!("/nodes/{i}/id"))
                    .hint("give every node a unique id"),
                );
            }
        }
        let entry_ok = self.index.contains_key(&doc.entry_node_id);
        if !entry_ok {
            out.push(
                Diagnostic::error(
                    Code::GraphIntegrityInvalid,
                    format!(
                        "entryNodeId '{}' is not a node of the graph",
                        doc.entry_node_id
                    ),
                )
                .pointer("/entryNodeId")
                .hint(format!("use one of: {}", self.id_list())),
            );
        }
        for (i, edge) in doc.edges.iter().enumerate() {
            for (field, id) in [("from", &edge.from), ("to", &edge.to)] {
                if !self.index.contains_key(id) {
                    out.push(
                        Diagnostic::error(
                            Code::GraphIntegrityInvalid,
                            format!("edge {i} goes {field} unknown node '{id}'"),
                        )
                        .pointer(format!("/edges/{i}/{field}"))
                        .hint(format!("use one of: {}", self.id_list())),
                    );
                }
            }
        }
        for (i, node) in doc.nodes.iter().enumerate() {
            if self.index.get(&node.id) != Some(&i) {
                continue; // a duplicate, already reported
            }
            let edges: Vec<&Edge> = self.outgoing[i].iter().map(|&e| &doc.edges[e]).collect();
            let defaults = edges.iter().filter(|e| e.is_default).count();
            match node.node_type {
                NodeType::Decision => {
                    if edges.len() < 2 {
                        out.push(
                            Diagnostic::error(
                                Code::GraphDecisionInvalid,
                                format!(
                                    "decision node '{}' has {} outgoing edge(s); a decision needs at least 2",
                                    node.id,
                                    edges.len()
                                ),
                            )
                            .pointer(format!("/nodes/{i}"))
                            .hint("add the missing branch, or make the node a 'step'"),
                        );
                    }
                    if defaults != 1 {
                        out.push(
                            Diagnostic::error(
                                Code::GraphDecisionInvalid,
                                format!(
                                    "decision node '{}' has {defaults} default branch(es); exactly one is required",
                                    node.id
                                ),
                            )
                            .pointer(format!("/nodes/{i}"))
                            .hint("set \"isDefault\": true on exactly one outgoing edge (the fallback when variables are unclear)"),
                        );
                    }
                }
                NodeType::End => {}
                _ => {
                    if edges.len() > 1 && defaults != 1 {
                        out.push(
                            Diagnostic::warning(
                                Code::GraphBranchAmbiguous,
                                format!(
                                    "node '{}' has {} outgoing edges and {defaults} default(s)",
                                    node.id,
                                    edges.len()
                                ),
                            )
                            .pointer(format!("/nodes/{i}"))
                            .hint(
                                "mark one edge \"isDefault\": true, or make the node a 'decision'",
                            ),
                        );
                    }
                }
            }
            if edges.is_empty() && node.node_type != NodeType::End {
                out.push(
                    Diagnostic::error(
                        Code::GraphDeadEnd,
                        format!(
                            "node '{}' ({}) has no outgoing edge and is not an end node",
                            node.id,
                            node.node_type.as_str()
                        ),
                    )
                    .pointer(format!("/nodes/{i}"))
                    .hint("add an edge to the next node, or set its type to 'end'"),
                );
            }
        }
        if entry_ok {
            let reachable = self.reachable_from(&doc.entry_node_id);
            let end_reached = doc
                .nodes
                .iter()
                .any(|n| n.node_type == NodeType::End && reachable.contains(n.id.as_str()));
            if !end_reached {
                let has_end = doc.nodes.iter().any(|n| n.node_type == NodeType::End);
                out.push(
                    Diagnostic::error(
                        Code::GraphEndUnreachable,
                        format!(
                            "no end node can be reached from the entry node '{}'",
                            doc.entry_node_id
                        ),
                    )
                    .pointer("/nodes")
                    .hint(if has_end {
                        "connect the last step to an end node with an edge"
                    } else {
                        "add a node of type 'end' and an edge to it"
                    }),
                );
            }
            for (i, node) in doc.nodes.iter().enumerate() {
                if !reachable.contains(node.id.as_str()) {
                    out.push(
                        Diagnostic::warning(
                            Code::GraphNodeUnreachable,
                            format!("node '{}' cannot be reached from the entry node", node.id),
                        )
                        .pointer(format!("/nodes/{i}"))
                        .hint("add an edge to it or remove it"),
                    );
                }
            }
        }
        for cycle in self.cycles() {
            let names = cycle
                .iter()
                .map(|&i| doc.nodes[i].id.as_str())
                .collect::<Vec<_>>()
                .join(" → ");
            let first = cycle[0];
            if !cycle
                .iter()
                .any(|&i| doc.nodes[i].node_type == NodeType::Decision)
            {
                out.push(
                    Diagnostic::error(
                        Code::GraphCycleInvalid,
                        format!("cycle [{names}] has no decision node, so it can never stop"),
                    )
                    .pointer(format!("/nodes/{first}"))
                    .hint("make one node of the cycle a 'decision' with a branch that leaves the cycle"),
                );
            }
            let exits = cycle.iter().any(|&i| {
                self.outgoing[i].iter().any(|&e| {
                    self.index
                        .get(&doc.edges[e].to)
                        .is_some_and(|to| !cycle.contains(to))
                })
            });
            if !exits {
                out.push(
                    Diagnostic::error(
                        Code::GraphCycleInvalid,
                        format!("cycle [{names}] has no edge leaving it"),
                    )
                    .pointer(format!("/nodes/{first}"))
                    .hint("add a branch from a decision in the cycle to a node outside it"),
                );
            }
        }
        out
    }

    fn id_list(&self) -> String {
        let ids: Vec<&str> = self.doc.nodes.iter().map(|n| n.id.as_str()).collect();
        ids.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn graph(nodes: &[(&str, &str)], edges: &[(&str, &str, bool)]) -> Graph {
        let doc = json!({
            "schemaVersion": "1.1",
            "entryNodeId": nodes[0].0,
            "nodes": nodes.iter().map(|(id, t)| json!({"id": id, "type": t, "file": format!("steps/{id}.md")})).collect::<Vec<_>>(),
            "edges": edges.iter().enumerate().map(|(i, (f, t, d))| json!({"from": f, "to": t, "label": format!("e{i}"), "isDefault": d})).collect::<Vec<_>>(),
        });
        Graph::new(serde_json::from_value(doc).unwrap())
    }

    fn codes(g: &Graph) -> Vec<Code> {
        g.check().into_iter().map(|d| d.code).collect()
    }

    #[test]
    fn linear_graph_is_clean() {
        let g = graph(
            &[("a", "step"), ("b", "step"), ("z", "end")],
            &[("a", "b", false), ("b", "z", false)],
        );
        assert!(g.check().is_empty());
        assert_eq!(g.successors("a")[0].to, "b");
        assert!(g.has_edge("b", "z"));
        assert!(!g.has_edge("a", "z"));
        assert_eq!(g.reachable_from("a").len(), 3);
    }

    #[test]
    fn loop_through_a_decision_with_an_exit_is_allowed() {
        let g = graph(
            &[("a", "step"), ("d", "decision"), ("z", "end")],
            &[("a", "d", false), ("d", "a", false), ("d", "z", true)],
        );
        assert!(g.check().is_empty(), "{:?}", g.check());
    }

    #[test]
    fn cycle_without_decision_or_exit_is_refused() {
        let g = graph(
            &[("a", "step"), ("b", "step"), ("z", "end")],
            &[("a", "b", false), ("b", "a", false)],
        );
        let c = codes(&g);
        assert!(c.contains(&Code::GraphCycleInvalid));
        assert!(c.contains(&Code::GraphEndUnreachable));
        let g = graph(
            &[("a", "decision"), ("z", "end")],
            &[("a", "a", true), ("a", "a", false)],
        );
        let msgs: Vec<String> = g.check().into_iter().map(|d| d.message).collect();
        assert!(
            msgs.iter().any(|m| m.contains("no edge leaving")),
            "{msgs:?}"
        );
    }

    #[test]
    fn decision_rules() {
        let g = graph(&[("d", "decision"), ("z", "end")], &[("d", "z", true)]);
        assert_eq!(codes(&g), vec![Code::GraphDecisionInvalid]);
        let g = graph(
            &[("d", "decision"), ("y", "end"), ("z", "end")],
            &[("d", "y", false), ("d", "z", false)],
        );
        assert_eq!(codes(&g), vec![Code::GraphDecisionInvalid]);
    }

    #[test]
    fn deep_chain_does_not_overflow() {
        let ids: Vec<String> = (0..50_000).map(|i| format!("n{i}")).collect();
        let mut nodes: Vec<(&str, &str)> = ids.iter().map(|s| (s.as_str(), "step")).collect();
        nodes.last_mut().unwrap().1 = "end";
        let edges: Vec<(&str, &str, bool)> = ids
            .windows(2)
            .map(|w| (w[0].as_str(), w[1].as_str(), false))
            .collect();
        assert!(graph(&nodes, &edges).check().is_empty());
    }
}
