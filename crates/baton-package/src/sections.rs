//! The `## Goal`, `## Instructions` and `## Completion` sections of a step body.

/// The three known sections of a step body; `None` when the heading is absent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct StepSections {
    pub goal: Option<Section>,
    pub instructions: Option<Section>,
    pub completion: Option<Section>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Section {
    /// Trimmed text under the heading, up to the next level-2 heading.
    pub text: String,
    /// 0-based line of the heading within the body.
    pub heading_line: usize,
}

#[derive(Clone, Copy)]
enum Which {
    Goal,
    Instructions,
    Completion,
    Other,
}

/// Recognizes `## Goal`, `## Instructions (optional note)`, … case-insensitively.
fn heading(line: &str) -> Option<Which> {
    let rest = line.strip_prefix("##")?;
    if rest.starts_with('#') || !rest.starts_with([' ', '\t']) {
        return None;
    }
    let title = rest.trim();
    let word_end = title.find([' ', '\t', '(']).unwrap_or(title.len());
    let (word, tail) = title.split_at(word_end);
    let tail = tail.trim();
    let known = tail.is_empty() || (tail.starts_with('(') && tail.ends_with(')'));
    Some(match word.to_ascii_lowercase().as_str() {
        "goal" if known => Which::Goal,
        "instructions" if known => Which::Instructions,
        "completion" if known => Which::Completion,
        _ => Which::Other,
    })
}

pub fn parse(body: &str) -> StepSections {
    let mut sections = StepSections::default();
    let mut current: Option<(Which, usize, Vec<&str>)> = None;
    let mut in_fence = false;
    let finish = |sections: &mut StepSections, which: Which, line: usize, lines: Vec<&str>| {
        let section = Section {
            text: lines.join("\n").trim().to_string(),
            heading_line: line,
        };
        let slot = match which {
            Which::Goal => &mut sections.goal,
            Which::Instructions => &mut sections.instructions,
            Which::Completion => &mut sections.completion,
            Which::Other => return,
        };
        // The first occurrence wins; a repeated heading is content of the first.
        if slot.is_none() {
            *slot = Some(section);
        }
    };
    for (n, raw) in body.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        }
        let found = if in_fence { None } else { heading(line) };
        match found {
            Some(which) => {
                if let Some((w, l, lines)) = current.take() {
                    finish(&mut sections, w, l, lines);
                }
                current = Some((which, n, Vec::new()));
            }
            None => {
                if let Some((_, _, lines)) = current.as_mut() {
                    lines.push(line);
                }
            }
        }
    }
    if let Some((w, l, lines)) = current.take() {
        finish(&mut sections, w, l, lines);
    }
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_sections_case_insensitively() {
        let s = parse(
            "# T\n\n## Goal\nDo it.\n\n## instructions (read first)\n1. a\n\n### Sub\nb\n## Completion\n",
        );
        assert_eq!(s.goal.unwrap().text, "Do it.");
        assert_eq!(s.instructions.unwrap().text, "1. a\n\n### Sub\nb");
        assert_eq!(s.completion.unwrap().text, "");
    }

    #[test]
    fn ignores_headings_in_code_fences_and_lookalikes() {
        let s = parse("## Goalkeeper\nx\n```\n## Goal\n```\n");
        assert!(s.goal.is_none());
        let s = parse("### Goal\nx\n");
        assert!(s.goal.is_none());
    }
}
