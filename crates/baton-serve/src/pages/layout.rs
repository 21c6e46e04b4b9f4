//! The page shell: head (token meta, stylesheet, script), the navigation, and the main block.

use super::html::push_esc;

/// Which navigation entry is highlighted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nav {
    Runs,
    Start,
    Epic,
    Sessions,
    Queue,
}

const ENTRIES: [(Nav, &str, &str, &str); 5] = [
    (Nav::Runs, "/", "Runs", "nav-runs"),
    (Nav::Start, "/start", "Start a run", "nav-start"),
    (Nav::Epic, "/epic", "Epic board", "nav-epic"),
    (Nav::Sessions, "/sessions", "Sessions", "nav-sessions"),
    (Nav::Queue, "/queue", "Queue", "nav-queue"),
];

/// A whole HTML document around `body`. `token` goes into `<meta name="baton-token">`: app.js
/// sends it as `Authorization: Bearer` on POST (the cookie is HttpOnly, and a POST needs the
/// header); only a page served to a request that already had the token carries it.
pub fn page(title: &str, nav: Nav, token: &str, body: &str) -> String {
    let mut out = String::with_capacity(body.len() + 1200);
    out.push_str(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">\
         <meta name=\"baton-token\" content=\"",
    );
    push_esc(&mut out, token);
    out.push_str("\"><title>");
    push_esc(&mut out, title);
    out.push_str(
        " · baton</title><link rel=\"stylesheet\" href=\"/assets/app.css\">\
         <script src=\"/assets/app.js\" defer></script></head><body>\
         <a class=\"skip\" href=\"#main\">Skip to content</a>\
         <header class=\"top\"><a class=\"brand\" href=\"/\">baton</a><nav aria-label=\"Main\"><ul>",
    );
    for (entry, href, label, id) in ENTRIES {
        out.push_str("<li><a id=\"");
        out.push_str(id);
        out.push_str("\" href=\"");
        out.push_str(href);
        out.push('"');
        if entry == nav {
            out.push_str(" aria-current=\"page\"");
        }
        out.push('>');
        out.push_str(label);
        out.push_str("</a></li>");
    }
    out.push_str("</ul></nav></header><main id=\"main\">");
    out.push_str(body);
    out.push_str("</main></body></html>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shell_escapes_title_and_token_and_marks_the_current_entry() {
        let html = page("<b>x</b>", Nav::Epic, "t\"k", "<p>body</p>");
        assert!(html.contains("<title>&lt;b&gt;x&lt;/b&gt; · baton</title>"));
        assert!(html.contains("<meta name=\"baton-token\" content=\"t&quot;k\">"));
        assert!(html.contains("id=\"nav-epic\" href=\"/epic\" aria-current=\"page\""));
        assert!(!html.contains("id=\"nav-runs\" href=\"/\" aria-current"));
        assert!(html.contains("<main id=\"main\"><p>body</p></main>"));
        assert!(html.contains("<link rel=\"icon\" href=\"/favicon.svg\" type=\"image/svg+xml\">"));
        // No inline script or style for the CSP to block.
        assert!(!html.contains("<script>") && !html.contains("style="));
    }
}
