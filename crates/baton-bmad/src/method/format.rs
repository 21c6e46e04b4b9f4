//! How a customization value is printed into a skill's text, as BMAD's renderer prints it: a
//! list of strings as a Markdown list, a list of review layers (tables with an `id` and an
//! `instruction`) as one section per active layer. The token renderer and the Jinja renderer
//! both print through here, so `{workflow.x}` and `{{ workflow.x }}` give the same text.

/// What BMAD prints for a list whose every review layer is switched off.
pub const NO_ACTIVE_LAYERS: &str =
    "No active review layers. HALT with blocking condition `no active review layers`.";

/// One review layer of a `review_layers`-like list.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layer {
    pub id: String,
    /// Shown name; the id when it has none.
    pub name: String,
    pub when: Option<String>,
    pub instruction: String,
}

/// Items as a Markdown list (`_None._` when there are none); an item's later lines are
/// indented under it.
pub fn markdown_list(items: &[String]) -> String {
    if items.is_empty() {
        return "_None._".into();
    }
    let mut out: Vec<String> = Vec::new();
    for item in items {
        let mut lines = item.lines();
        out.push(format!("- {}", lines.next().unwrap_or("")));
        out.extend(lines.map(|l| format!("  {l}")));
    }
    out.join("\n")
}

/// The active layers (a non-blank instruction), one `####` section each.
pub fn review_layers(layers: &[Layer]) -> String {
    let active: Vec<String> = layers
        .iter()
        .filter(|l| !l.instruction.trim().is_empty())
        .map(|l| {
            let mut s = format!("#### {} (`{}`)", l.name, l.id);
            if let Some(when) = l.when.as_deref().filter(|w| !w.is_empty()) {
                s.push_str(&format!("\n\nRun only when: {when}"));
            }
            s.push_str(&format!("\n\n{}", l.instruction.trim()));
            s
        })
        .collect();
    if active.is_empty() {
        NO_ACTIVE_LAYERS.into()
    } else {
        active.join("\n\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_layers_as_bmad_prints_them() {
        assert_eq!(markdown_list(&[]), "_None._");
        assert_eq!(markdown_list(&["a".into(), "b\nc".into()]), "- a\n- b\n  c");
        let layers = [
            Layer {
                id: "blind".into(),
                name: "Blind".into(),
                when: Some("a diff exists".into()),
                instruction: " Look.\n".into(),
            },
            Layer {
                id: "off".into(),
                name: "off".into(),
                when: None,
                instruction: "  ".into(),
            },
        ];
        assert_eq!(
            review_layers(&layers),
            "#### Blind (`blind`)\n\nRun only when: a diff exists\n\nLook."
        );
        assert_eq!(review_layers(&layers[1..]), NO_ACTIVE_LAYERS);
    }
}
