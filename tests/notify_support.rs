//! A loopback HTTP endpoint for the webhook tests: it records every request it reads and answers
//! as its [`Mode`] says.
#![allow(dead_code)]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed setup step fails the test

use serde_json::Value;
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// What the receiver does with each request.
#[derive(Clone, Copy)]
pub enum Mode {
    /// 503 for the first `n` requests, 200 after.
    RefuseFirst(usize),
    /// Reads the request and never answers (the connection stays open).
    Hang,
}

pub struct Request {
    pub headers: HashMap<String, String>,
    pub body: Vec<u8>,
    pub accepted: bool,
}

pub struct Receiver_ {
    pub url: String,
    pub got: Receiver<Request>,
}

fn read_request(stream: &TcpStream) -> Option<(HashMap<String, String>, Vec<u8>)> {
    let mut r = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    if !line.starts_with("POST ") {
        return None;
    }
    let mut headers = HashMap::new();
    loop {
        line.clear();
        r.read_line(&mut line).ok()?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((headers, body))
}

/// A loopback HTTP endpoint; every request it reads is sent on `got`.
pub fn receiver(mode: Mode) -> Receiver_ {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let (tx, got) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = 0;
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let Some((headers, body)) = read_request(&stream) else {
                continue;
            };
            seen += 1;
            let accepted = match mode {
                Mode::RefuseFirst(n) => seen > n,
                Mode::Hang => false,
            };
            match mode {
                Mode::Hang => held.push(stream),
                Mode::RefuseFirst(_) => {
                    let status = if accepted {
                        "200 OK"
                    } else {
                        "503 Service Unavailable"
                    };
                    let _ = write!(
                        stream,
                        "HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
            if tx
                .send(Request {
                    headers,
                    body,
                    accepted,
                })
                .is_err()
            {
                break;
            }
        }
    });
    Receiver_ { url, got }
}

impl Receiver_ {
    /// The requests accepted, waiting up to a deadline until `n` have come.
    pub fn accepted(&self, n: usize, all: &mut Vec<Request>) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while all.iter().filter(|r| r.accepted).count() < n {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.got.recv_timeout(left) {
                Ok(r) => all.push(r),
                Err(_) => break,
            }
        }
        // Anything else already sent is taken too: a duplicate would show.
        while let Ok(r) = self.got.try_recv() {
            all.push(r);
        }
        all.iter()
            .filter(|r| r.accepted)
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }
}

/// Each accepted request is signed with `secret` over its exact body, and its headers name its
/// event and delivery.
pub fn check_signed(all: &[Request], secret: &str) {
    for r in all.iter().filter(|r| r.accepted) {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            r.headers["x-baton-signature"],
            baton_notify::sign::signature(secret.as_bytes(), &r.body),
            "{body}"
        );
        assert_eq!(r.headers["x-baton-event"], body["event"].as_str().unwrap());
        assert_eq!(
            r.headers["x-baton-delivery"],
            body["delivery"].as_str().unwrap()
        );
    }
}
