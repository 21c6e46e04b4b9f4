//! Tool names on the wire: providers accept `^[a-zA-Z0-9_-]{1,64}$`, baton's tools are dotted
//! (`fs.read`). The mapping is built per request, is reversible, and never maps two tools to
//! one wire name.

use std::collections::HashMap;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolNames {
    to_wire: HashMap<String, String>,
    from_wire: HashMap<String, String>,
}

fn sanitize(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        s.push('_');
    }
    s.truncate(64);
    s
}

impl ToolNames {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> ToolNames {
        let mut map = ToolNames::default();
        let names: Vec<&str> = names.into_iter().collect();
        // Names that are already valid keep themselves, so they can never be taken by another.
        for name in &names {
            if sanitize(name) == *name {
                map.insert(name, name.to_string());
            }
        }
        for name in &names {
            if map.to_wire.contains_key(*name) {
                continue;
            }
            let base = sanitize(name);
            let mut candidate = base.clone();
            let mut n = 2;
            while map.from_wire.contains_key(&candidate) {
                let suffix = format!("_{n}");
                let mut b = base.clone();
                b.truncate(64 - suffix.len());
                candidate = format!("{b}{suffix}");
                n += 1;
            }
            map.insert(name, candidate);
        }
        map
    }

    fn insert(&mut self, name: &str, wire: String) {
        self.from_wire.insert(wire.clone(), name.to_string());
        self.to_wire.insert(name.to_string(), wire);
    }

    pub fn to_wire<'a>(&'a self, name: &'a str) -> &'a str {
        self.to_wire.get(name).map(String::as_str).unwrap_or(name)
    }

    /// The tool a wire name stands for; unknown names (a model inventing tools) pass through
    /// so the ToolHost can answer `TOOL_NOT_AVAILABLE`.
    pub fn from_wire<'a>(&'a self, wire: &'a str) -> &'a str {
        self.from_wire.get(wire).map(String::as_str).unwrap_or(wire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_names_round_trip_without_collisions() {
        let names = [
            "fs.read",
            "fs_read",
            "fs-read",
            "ui.ask_user",
            "a.b.c",
            &"x".repeat(80),
            &format!("{}.y", "x".repeat(70)),
        ];
        let map = ToolNames::new(names.iter().copied());
        let mut wires = std::collections::HashSet::new();
        for n in names {
            let w = map.to_wire(n);
            assert!(
                !w.is_empty()
                    && w.len() <= 64
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{w}"
            );
            assert!(wires.insert(w.to_string()), "collision on {w}");
            assert_eq!(map.from_wire(w), n);
        }
        assert_eq!(
            map.to_wire("fs_read"),
            "fs_read",
            "valid names keep themselves"
        );
        assert_eq!(map.to_wire("fs.read"), "fs_read_2");
        assert_eq!(map.from_wire("made.up"), "made.up");
    }

    #[test]
    fn the_usual_tools_get_the_usual_names() {
        let map = ToolNames::new(["fs.read", "fs.apply_patch", "ui.ask_user"]);
        assert_eq!(map.to_wire("fs.apply_patch"), "fs_apply_patch");
        assert_eq!(map.from_wire("ui_ask_user"), "ui.ask_user");
    }
}
