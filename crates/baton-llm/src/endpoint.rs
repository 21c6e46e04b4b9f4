//! The model endpoint (`base_url`) as baton checks, shows and remembers it: shown and recorded
//! without a user, password, query or fragment, which may hold a secret.

use reqwest::Url;

/// Why `url` cannot be an endpoint (`None`: it can).
pub(crate) fn check(url: &str) -> Result<(), String> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err("must start with http:// or https://".into());
    }
    let parsed = Url::parse(url).map_err(|e| format!("is not a URL: {e}"))?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err("has no host".into());
    }
    Ok(())
}

/// `url` without user, password, query and fragment (an unparsable URL shows as its scheme
/// and host part only, cut at the first `@`, `?` or `#` that could start a secret).
pub fn shown(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.as_str().trim_end_matches('/').to_string()
        }
        Err(_) => {
            let cut = url.find(['?', '#']).unwrap_or(url.len());
            let head = &url[..cut];
            match head.rfind('@') {
                Some(at) => {
                    let scheme = head.find("://").map_or(0, |i| i + 3);
                    format!("{}***{}", &head[..scheme.min(at)], &head[at..])
                }
                None => head.to_string(),
            }
        }
    }
}

/// The endpoint a run may remember: `url` itself when showing it hides nothing.
pub fn recordable(url: &str) -> Option<String> {
    let plain = shown(url);
    (plain == url.trim_end_matches('/')).then_some(plain)
}

/// The host of `url`, lower case.
pub fn host(url: &str) -> Option<String> {
    Url::parse(url)
        .ok()?
        .host_str()
        .map(str::to_ascii_lowercase)
}

/// True for `localhost`, `127.0.0.0/8` and `::1`: a server on this machine, which needs no key.
pub fn is_loopback(url: &str) -> bool {
    let Ok(u) = Url::parse(url) else {
        return false;
    };
    let Some(host) = u.host_str() else {
        return false;
    };
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return v6
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback());
    }
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return ip.is_loopback();
    }
    let d = host.trim_end_matches('.').to_ascii_lowercase();
    d == "localhost" || d.ends_with(".localhost")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_never_show() {
        assert_eq!(
            shown("https://user:sk-secret@gw.example/v1?key=sk-2#x"),
            "https://gw.example/v1"
        );
        assert_eq!(
            shown("http://127.0.0.1:9/v1"),
            "http://127.0.0.1:9/v1".to_string()
        );
        let odd = shown("http://us er:sk-secret@ho st/v1?key=sk-2");
        assert!(!odd.contains("sk-"), "{odd}");
    }

    #[test]
    fn only_secret_free_endpoints_are_recorded() {
        assert_eq!(
            recordable("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080/v1")
        );
        assert_eq!(recordable("https://u:p@gw.example/v1"), None);
        assert_eq!(recordable("https://gw.example/v1?key=abc"), None);
    }

    #[test]
    fn loopback_hosts() {
        for url in [
            "http://localhost:11434/v1",
            "http://127.0.0.1:9/v1",
            "http://127.1.2.3/v1",
            "http://[::1]:8000/v1",
        ] {
            assert!(is_loopback(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://192.0.2.1:9/v1",
            "http://localhost.example.com/v1",
            "http://[::2]/v1",
        ] {
            assert!(!is_loopback(url), "{url}");
        }
    }

    #[test]
    fn checks() {
        assert!(check("http://127.0.0.1:9/v1").is_ok());
        assert!(check("ftp://x").is_err());
        assert!(check("http://").is_err());
    }
}
