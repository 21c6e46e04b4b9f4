//! Who may talk to the server: the token (bearer header, or the cookie a page load with
//! `?token=` sets), the `Host` and `Origin` checks against DNS rebinding and cross-site
//! requests, and the security headers every answer carries.
//!
//! Rules, in order:
//! 1. `Host` must name the address the server is bound to (or `localhost` for a loopback
//!    bind): a DNS-rebound name is refused before anything else is looked at.
//! 2. An `Origin` header, when sent, must be this server's own origin.
//! 3. `Authorization: Bearer <token>` is accepted for every request.
//! 4. The `baton_token` cookie is accepted for reads only (GET/HEAD): a state-changing request
//!    needs the header, which another site's page cannot set (no CSRF from other tabs).
//! 5. `?token=<token>` on a GET sets the cookie (`HttpOnly; SameSite=Strict`); a page load is
//!    then redirected to the same address without the token, so it leaves the address bar.

use crate::api::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

pub use crate::token::Token;

/// The cookie that carries the token after the first page load.
pub const COOKIE: &str = "baton_token";

/// The strict content security policy: no inline script or style, nothing from elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; font-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// How a request proved it knows the token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proof {
    Bearer,
    Cookie,
    Query,
}

/// The middleware in front of every route (pages, assets and API).
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let mut response = match check(&state, &request) {
        Err(e) => e.into_response(),
        Ok(Proof::Query) => first_load(&state, request, next).await,
        Ok(Proof::Bearer | Proof::Cookie) => next.run(request).await,
    };
    secure(response.headers_mut());
    response
}

fn check(state: &AppState, request: &Request) -> Result<Proof, ApiError> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    if !state.hosts.allows(host) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "HOST_REFUSED",
            format!("the Host header {host:?} is not this server's address"),
        )
        .hint("open the URL baton serve printed; other names are refused (DNS rebinding)"));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let own = origin
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|o| state.hosts.allows(o));
        if !own {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "ORIGIN_REFUSED",
                "a request from another site's page is refused",
            ));
        }
    }
    let safe = matches!(*request.method(), Method::GET | Method::HEAD);
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let given = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        return if state.token.matches(given.trim()) {
            Ok(Proof::Bearer)
        } else {
            Err(invalid())
        };
    }
    if let Some(given) = cookie(headers) {
        if !state.token.matches(&given) {
            return Err(invalid());
        }
        if safe {
            return Ok(Proof::Cookie);
        }
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "TOKEN_HEADER_REQUIRED",
            "a state-changing request needs the token in the Authorization header; the cookie alone is not enough",
        )
        .hint("send Authorization: Bearer <token>"));
    }
    if let Some(given) = query_token(request.uri()) {
        return if !state.token.matches(&given) {
            Err(invalid())
        } else if safe {
            Ok(Proof::Query)
        } else {
            Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "TOKEN_HEADER_REQUIRED",
                "a state-changing request needs the token in the Authorization header",
            )
            .hint("send Authorization: Bearer <token>"))
        };
    }
    Err(ApiError::new(
        StatusCode::UNAUTHORIZED,
        "TOKEN_REQUIRED",
        "this server needs its token",
    )
    .hint("open the URL baton serve printed (it carries ?token=), or send Authorization: Bearer <token>"))
}

fn invalid() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "TOKEN_INVALID",
        "the token is not this server's",
    )
    .hint("a new token is made each time baton serve starts; use the URL it printed last")
}

/// The token as the `?token=` query sets it: the cookie, and for a page the same address
/// without the token (an API call gets its answer).
async fn first_load(state: &AppState, request: Request, next: Next) -> Response {
    let cookie = format!(
        "{COOKIE}={}; Path=/; HttpOnly; SameSite=Strict",
        state.token.as_str()
    );
    let mut response = if request.uri().path().starts_with("/api/") {
        // The handler sees the query without the token: it is not one of its parameters.
        let mut request = request;
        if let Ok(clean) = without_token(request.uri()).parse::<Uri>() {
            *request.uri_mut() = clean;
        }
        next.run(request).await
    } else {
        let clean = without_token(request.uri());
        (StatusCode::SEE_OTHER, [(header::LOCATION, clean)]).into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        response.headers_mut().append(header::SET_COOKIE, v);
    }
    response
}

/// `path?a=1&token=x&b=2` → `path?a=1&b=2`.
fn without_token(uri: &Uri) -> String {
    let path = uri.path();
    let kept: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty() && !p.starts_with("token="))
        .collect();
    if kept.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| value.to_string())
        })
}

fn query_token(uri: &Uri) -> Option<String> {
    uri.query()?
        .split('&')
        .find_map(|p| p.strip_prefix("token="))
        .map(str::to_owned)
}

/// The headers every answer carries, error or not.
fn secure(headers: &mut HeaderMap) {
    let set = |headers: &mut HeaderMap, name: header::HeaderName, value: &'static str| {
        headers.insert(name, HeaderValue::from_static(value));
    };
    set(headers, header::CONTENT_SECURITY_POLICY, CSP);
    set(headers, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    set(headers, header::X_FRAME_OPTIONS, "DENY");
    set(headers, header::REFERRER_POLICY, "no-referrer");
    if !headers.contains_key(header::CACHE_CONTROL) {
        set(headers, header::CACHE_CONTROL, "no-store");
    }
    headers.insert(
        header::HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        header::HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_leaves_the_query() {
        let uri: Uri = "/runs?a=1&token=abc&b=2".parse().unwrap();
        assert_eq!(without_token(&uri), "/runs?a=1&b=2");
        let uri: Uri = "/?token=abc".parse().unwrap();
        assert_eq!(without_token(&uri), "/");
    }
}
