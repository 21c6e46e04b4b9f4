//! A loopback HTTP server of fixed pages for browser tests: each GET gets the HTML its path
//! chooses, with status 200, `connection: close`; it serves until the test process ends.
//! Each connection is served on its own thread: Chromium opens sockets ahead of need
//! (preconnects) that may carry no request for seconds, and one of them must never hold up
//! the request the page waits for.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// The page of a request path (`/`, `/reloading`, …).
pub type Pages = dyn Fn(&str) -> String + Send + Sync;

/// Serves `pages` on 127.0.0.1 on a port of its own; returns `http://127.0.0.1:<port>/`.
pub fn serve_html(pages: Arc<Pages>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let port = listener.local_addr().expect("local address").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let pages = Arc::clone(&pages);
            std::thread::spawn(move || answer(stream, pages.as_ref()));
        }
    });
    format!("http://127.0.0.1:{port}/")
}

/// Reads one request head from `stream` and answers it with its page.
fn answer(mut stream: TcpStream, pages: &Pages) {
    let Ok(read_half) = stream.try_clone() else {
        return;
    };
    // A request head is small; a socket that never sends one ends with its peer.
    let mut reader = BufReader::new(read_half.take(64 * 1024));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() || request_line.is_empty() {
        return;
    }
    // Read the rest of the request head, up to the empty line.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" {
            break;
        }
        line.clear();
    }
    let path = request_line.split(' ').nth(1).unwrap_or("/");
    let body = pages(path);
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(base: &str, path: &str) -> String {
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        let mut s = TcpStream::connect(addr).unwrap();
        // A server stuck elsewhere fails the test instead of hanging it.
        s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
            .unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nhost: {addr}\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn each_path_gets_its_page() {
        let base = serve_html(Arc::new(|path: &str| format!("<p>{path}</p>")));
        let root = get(&base, "/");
        assert!(root.starts_with("HTTP/1.1 200 OK\r\n"), "{root}");
        assert!(root.contains("text/html; charset=utf-8"), "{root}");
        assert!(root.ends_with("<p>/</p>"), "{root}");
        assert!(get(&base, "/reloading?x=1").ends_with("<p>/reloading?x=1</p>"));
    }

    #[test]
    fn an_idle_connection_does_not_hold_up_the_next_request() {
        let base = serve_html(Arc::new(|path: &str| format!("<p>{path}</p>")));
        let addr = base.trim_start_matches("http://").trim_end_matches('/');
        // A preconnect: opened first, no request on it (yet).
        let idle = TcpStream::connect(addr).unwrap();
        assert!(get(&base, "/next").ends_with("<p>/next</p>"));
        drop(idle);
    }
}
