//! `/queue` of a server started without `--db`: a page that says how to connect a work queue,
//! not an error. With a database, the queue page itself ([`super::queue`]).
//!
//! Ids: `queue-setup` (the explanation, with the commands to copy).

use super::layout::{Nav, page};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

/// The queue page, or how to connect one.
pub async fn queue_or_setup(State(state): State<AppState>) -> Response {
    if state.queue.is_some() {
        return super::queue::queue_page(State(state)).await;
    }
    let html = page("Queue", Nav::Queue, state.token.as_str(), &render());
    // Still 404 for scripts (as `/api/queue`): there is no queue here; a person reads the page.
    (StatusCode::NOT_FOUND, Html(html)).into_response()
}

/// Pure: the explanation and the commands.
pub fn render() -> String {
    String::from(
        "<div class=\"heading\"><h1>Queue</h1></div>\
         <section class=\"card\" id=\"queue-setup\" aria-labelledby=\"queue-setup-title\">\
         <h2 id=\"queue-setup-title\">No work queue connected</h2>\
         <p>This server was started without a database, so it has no queue to show. Runs, epics \
         and sessions on this machine need none.</p>\
         <p>To watch a PostgreSQL work queue here, stop this server and start it again with the \
         queue's database:</p>\
         <pre class=\"mono\">baton serve --db URL</pre>\
         <p class=\"muted\">The URL looks like <code>postgresql://USER@HOST:5432/DBNAME</code>. Leave the password out of the URL: it comes from <code>PGPASSWORD</code> \
         or <code>~/.pgpass</code>. <code>--db-env NAME</code> reads the URL from an environment \
         variable instead. A new database gets the queue's tables with \
         <code>baton queue init --db URL</code>.</p></section>",
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_setup_page_names_the_flag_and_is_no_alert() {
        let html = super::render();
        assert!(html.contains("baton serve --db URL"));
        assert!(!html.contains("role=\"alert\""));
        assert!(!html.contains("class=\"card error\""));
    }
}
