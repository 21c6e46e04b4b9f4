//! Text from a model or a project made safe to print on a person's terminal.
//!
//! A model is treated as an adversary: a question it asks, a title it gives a story or a path
//! it names could carry escape sequences that set the window title (OSC 0/2), write the
//! clipboard (OSC 52), clear the screen (CSI 2J), move the cursor back over what was printed
//! (CR, BS) or reorder what the reader sees (bidi overrides). Every human-facing line that
//! carries such text passes it through [`visible`] or [`visible_line`], which show each of
//! those characters as a visible escape (`\x1b`, `\u{9b}`) instead of sending it to the
//! terminal. JSON output keeps the exact text; only what a person reads is changed.
//!
//! It lives here, in the lowest crate every crate that builds human text depends on (the
//! engine, the autopilot, the epic and lifecycle crates, the worker and the CLI), so there is
//! one definition of "safe" and no copy drifts.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `text` for a block on a terminal: line breaks (`\n`, and `\r\n` as `\n`) and tabs are
/// kept; every other control character, C1 control and bidi override is shown escaped.
pub fn visible(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// `text` for one line on a terminal: as [`visible`], but line breaks are shown as `\n` (and
/// `\r`), so a value cannot start a line of its own that looks like baton's.
pub fn visible_line(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// Whether the terminal would act on `c` instead of showing it: C0 controls (tab and, in a
/// block, the line feed excepted), DEL, C1 controls (U+0080–U+009F: `\u{9b}` is CSI on
/// terminals that take 8-bit controls) and the bidi embeddings, overrides and isolates
/// (U+202A–U+202E, U+2066–U+2069) that make text read in another order than it is.
fn acts(c: char, block: bool) -> bool {
    match c {
        '\t' => false,
        '\n' => !block,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

fn escape(text: &str, block: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| acts(c, block)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !acts(c, block) {
            out.push(c);
            continue;
        }
        match c {
            // A Windows line ending in a block is a line break, not a trick.
            '\r' if block && chars.peek() == Some(&'\n') => {}
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_sent() {
        // Window title (OSC 0 … BEL), clipboard write (OSC 52 … ST), clear screen (CSI 2J).
        assert_eq!(visible("a\u{1b}]0;pwned\u{7}b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(
            visible("\u{1b}]52;c;ZWNobyBoaQ==\u{1b}\\"),
            "\\x1b]52;c;ZWNobyBoaQ==\\x1b\\"
        );
        assert_eq!(visible("\u{1b}[2J\u{1b}[H"), "\\x1b[2J\\x1b[H");
    }

    #[test]
    fn every_c0_control_but_tab_and_newline_and_del_are_escaped() {
        for b in (0u32..0x20).chain([0x7f]) {
            let Some(c) = char::from_u32(b) else {
                continue;
            };
            let shown = visible(&c.to_string()).into_owned();
            match c {
                '\t' | '\n' => assert_eq!(shown, c.to_string()),
                '\r' => assert_eq!(shown, "\\r"),
                _ => assert_eq!(shown, format!("\\x{b:02x}")),
            }
            assert!(!shown.chars().any(|s| acts(s, true)), "{b:#x}: {shown:?}");
        }
        // Carriage return and backspace cannot rewrite what was printed.
        assert_eq!(visible("ok\rFAILED"), "ok\\rFAILED");
        assert_eq!(
            visible("safe\u{8}\u{8}\u{8}\u{8}rm -rf"),
            "safe\\x08\\x08\\x08\\x08rm -rf"
        );
    }

    #[test]
    fn c1_controls_and_bidi_overrides_are_escaped() {
        for b in 0x80u32..=0x9f {
            let Some(c) = char::from_u32(b) else {
                continue;
            };
            assert_eq!(visible(&c.to_string()), format!("\\u{{{b:x}}}"));
        }
        assert_eq!(visible("x\u{9b}2Jy"), "x\\u{9b}2Jy");
        assert_eq!(visible("a\u{202e}cba\u{202c}"), "a\\u{202e}cba\\u{202c}");
        assert_eq!(visible("\u{2066}\u{2069}"), "\\u{2066}\\u{2069}");
    }

    #[test]
    fn blocks_keep_their_lines_and_lines_show_their_breaks() {
        assert_eq!(visible("one\ntwo\tthree"), "one\ntwo\tthree");
        assert_eq!(visible("one\r\ntwo"), "one\ntwo");
        assert_eq!(visible_line("one\ntwo\tthree"), "one\\ntwo\tthree");
        assert_eq!(visible_line("one\r\ntwo"), "one\\r\\ntwo");
    }

    #[test]
    fn ordinary_text_is_untouched_and_not_copied() {
        for text in [
            "plain ASCII, with punctuation: ~!@#$%^&*()_+{}|:\"<>?\\",
            "日本語のパッケージ 中文 한국어",
            "emoji 🦀 👩‍💻 🇫🇷 and combining é",
            "Arabic العربية and Hebrew עברית",
            "a path C:\\Users\\x and a literal \\x1b",
            "",
        ] {
            assert!(
                matches!(visible(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
            assert!(
                matches!(visible_line(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }

    #[test]
    fn multibyte_text_around_escapes_survives() {
        assert_eq!(
            visible("日本\u{1b}[31m語 🦀\u{85}é"),
            "日本\\x1b[31m語 🦀\\u{85}é"
        );
    }
}
