//! The one escaping helper every page uses, a few small text helpers, and the phase badge.
//! Anything that did not come from this file's literals (run names, model text, file names,
//! ids) goes through [`esc`] before it reaches HTML, in text and in (always double-quoted)
//! attribute values.

use std::fmt::Write as _;

/// `text` safe in HTML text and in a double- or single-quoted attribute value.
pub fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    push_esc(&mut out, text);
    out
}

/// Appends `text` escaped to `out` (no intermediate string per value).
pub fn push_esc(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // A NUL or another C0 control is no text a person needs; browsers mangle some.
            c if c.is_control() && c != '\n' && c != '\t' && c != '\r' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
}

/// `text` percent-encoded for one URL path segment or query value (every byte but the
/// unreserved ones), so an id with `/`, `?` or `#` cannot change the URL it is put in.
/// `text` escaped, its `` `quoted` `` commands (as the CLI writes them) as `<code>`.
pub fn push_esc_code(out: &mut String, text: &str) {
    for (i, part) in text.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            push_esc(out, part);
            out.push_str("</code>");
        } else {
            push_esc(out, part);
        }
    }
}

pub fn url_part(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A query string from `(key, value)` pairs, empty values left out; `""` when none is left.
pub fn query(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (k, v) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
        out.push(if out.is_empty() { '?' } else { '&' });
        out.push_str(&url_part(k));
        out.push('=');
        out.push_str(&url_part(v));
    }
    out
}

/// At most `max` characters of `text`, with `…` when cut (model text can be megabytes).
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => text.into(),
        Some((end, _)) => format!("{}…", &text[..end]).into(),
    }
}

/// A coloured badge for a phase or status word (`phase-<word>` in app.css, lower case).
pub fn phase_badge(out: &mut String, phase: &str) {
    out.push_str("<span class=\"phase phase-");
    push_esc(out, &phase.to_ascii_lowercase());
    out.push_str("\">");
    push_esc(out, phase);
    out.push_str("</span>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_are_escaped() {
        assert_eq!(
            esc(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
        assert_eq!(esc("a\u{0}b\nc"), "a\u{fffd}b\nc");
    }

    #[test]
    fn url_parts_cannot_change_the_url() {
        assert_eq!(url_part("../a b/?#&=é"), "..%2Fa%20b%2F%3F%23%26%3D%C3%A9");
        assert_eq!(
            query(&[("project", "/p q"), ("phase", "")]),
            "?project=%2Fp%20q"
        );
        assert_eq!(query(&[("a", "")]), "");
    }

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("éééé", 2), "éé…");
        assert_eq!(clip("abc", 3), "abc");
    }
}
