//! Text that came from a model or a file, made safe to print on a terminal: control
//! characters (an escape sequence could rewrite the screen) are shown as visible escapes
//! (`crate::ui::visible`) and length is bounded.

use crate::ui::{visible, visible_line};

/// One line: line breaks become spaces, other control characters are shown escaped, and at
/// most `max` characters are kept (`…` marks a cut).
pub fn line(text: &str, max: usize) -> String {
    let flat = text.replace(['\n', '\r', '\t'], " ");
    bounded(visible_line(&flat).chars(), max)
}

/// A block: line breaks and tabs are kept, other control characters shown escaped, at most
/// `max` characters.
pub fn block(text: &str, max: usize) -> String {
    bounded(visible(text).chars(), max)
}

/// `text` as one shell word, so a printed command can be pasted as it is.
pub fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", line(text, 500).replace('\'', "'\\''"))
    }
}

fn bounded(chars: impl Iterator<Item = char>, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in chars.enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_shown_and_length_is_bounded() {
        assert_eq!(line("a\u{1b}[2Jb\nc", 12), "a\\x1b[2Jb c");
        assert_eq!(line("abcdef", 3), "abc…");
        assert_eq!(block("a\n\u{7}b\tc\u{9b}", 20), "a\n\\x07b\tc\\u{9b}");
    }

    #[test]
    fn shell_words_quote_what_the_shell_would_split() {
        assert_eq!(shell_word("csvsum"), "csvsum");
        assert_eq!(shell_word("add a flag"), "'add a flag'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
