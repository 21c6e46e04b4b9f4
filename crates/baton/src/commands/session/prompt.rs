//! Questions asked at the terminal (stderr for the text, stdin for the answer), where seed 003
//! uses `ask_user`. Only called when stdin is a terminal and neither `--json` nor
//! `--non-interactive` was given; otherwise the command exits 10 with the question instead.

use crate::signals;
use crate::ui::{visible, visible_line};
use baton_lifecycle::session::infer::Question;
use std::io::{BufRead, Write};

/// Most bytes of one answer line kept (a pasted file is not an answer).
const MAX_ANSWER: usize = 4096;

/// One line from stdin, trimmed; `None` at end of input.
fn read_line() -> Option<String> {
    let _ = std::io::stderr().flush();
    let _at_prompt = signals::AtPrompt::enter();
    let mut line = String::new();
    let n = std::io::stdin().lock().read_line(&mut line).ok()?;
    if n == 0 {
        return None;
    }
    let mut line = line.trim().to_string();
    if line.len() > MAX_ANSWER {
        let mut cut = MAX_ANSWER;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
    }
    Some(line)
}

/// A build-phase question: its options numbered, a number or (when allowed) free text back.
/// `None` when the person gave no usable answer (end of input).
pub fn ask(q: &Question) -> Option<String> {
    // The question and its options are the model's: their escapes are shown, not sent.
    eprintln!("\n{}", visible(&q.text));
    for (i, c) in q.options.iter().enumerate() {
        if c.description.is_empty() {
            eprintln!("  {}) {}", i + 1, visible_line(&c.label));
        } else {
            eprintln!(
                "  {}) {} — {}",
                i + 1,
                visible_line(&c.label),
                visible_line(&c.description)
            );
        }
    }
    loop {
        eprint!("> ");
        let line = read_line()?;
        if let Ok(n) = line.parse::<usize>()
            && let Some(c) = n.checked_sub(1).and_then(|i| q.options.get(i))
        {
            return Some(c.value.clone());
        }
        if let Some(c) = q
            .options
            .iter()
            .find(|c| c.value.eq_ignore_ascii_case(&line) || c.label.eq_ignore_ascii_case(&line))
        {
            return Some(c.value.clone());
        }
        if q.free_text && !line.is_empty() {
            return Some(line);
        }
        if q.options.is_empty() {
            eprintln!("(an answer is needed)");
        } else {
            eprintln!("(type 1-{} or one of the names)", q.options.len());
        }
    }
}

/// One of `choices` (`(key, text)`), by number or key; `None` at end of input.
pub fn choose(title: &str, choices: &[(&'static str, &str)]) -> Option<&'static str> {
    eprintln!("\n{}", visible(title));
    for (i, (key, text)) in choices.iter().enumerate() {
        eprintln!("  {}) {key} — {}", i + 1, visible_line(text));
    }
    loop {
        eprint!("> ");
        let line = read_line()?;
        if let Ok(n) = line.parse::<usize>()
            && let Some((key, _)) = n.checked_sub(1).and_then(|i| choices.get(i))
        {
            return Some(key);
        }
        if let Some((key, _)) = choices.iter().find(|(k, _)| k.eq_ignore_ascii_case(&line)) {
            return Some(key);
        }
        eprintln!("(type 1-{} or one of the names)", choices.len());
    }
}

/// Free text (a step's question); `None` when empty or at end of input.
pub fn text(question: &str) -> Option<String> {
    eprintln!("\n{}\n", visible(question));
    eprint!("> ");
    read_line().filter(|l| !l.is_empty())
}
