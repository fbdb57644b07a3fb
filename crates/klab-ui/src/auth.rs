//! Who may open the dashboard (pure decisions; the middleware in `lib.rs` applies them).
//!
//! A browser rarely holds the admin client certificate, so `klab up` also prints a login URL
//! carrying a token (kept 0600 in the data directory). The first visit with `?token=` sets it as
//! an `HttpOnly; Secure; SameSite=Strict` cookie and redirects to the bare URL, so the token
//! leaves the address bar; later requests (the event stream, the fault buttons' POSTs to the
//! admin endpoint) carry the cookie. Tokens are compared in constant time. The dashboard shows
//! the whole cluster and its buttons are the admin endpoint's, so the certificate must be in
//! `system:masters`, as the admin endpoint requires.

use klab_apiserver::Identity;

/// The cookie that carries the login token.
pub const COOKIE: &str = "klab-dashboard";

/// The identity a valid token or cookie stands for: an administrator, as the one who started
/// `klab up` and holds the data directory is.
pub fn token_identity() -> Identity {
    Identity::new(
        "system:klab-dashboard",
        &["system:masters", "system:authenticated"],
    )
}

/// Equal bytes, in a time that depends only on the lengths (no early exit on the first
/// difference, so a guess cannot be refined one byte at a time).
pub fn tokens_equal(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The value of cookie `name` in a `Cookie` header (`a=1; b=2`).
pub fn cookie_value<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').find_map(|kv| {
        let (k, v) = kv.trim().split_once('=')?;
        (k == name).then_some(v)
    })
}

/// The `token` parameter of a query string.
pub fn query_token(query: &str) -> Option<&str> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == "token").then_some(v)
    })
}

/// The `Set-Cookie` value of a valid login.
pub fn set_cookie(token: &str) -> String {
    format!("{COOKIE}={token}; Path=/; HttpOnly; Secure; SameSite=Strict")
}

/// A paths the dashboard authenticates itself: the page and its event stream, and the admin
/// endpoint its buttons call.
pub fn is_dashboard_path(path: &str) -> bool {
    path == "/ui" || path.starts_with("/ui/") || path.starts_with("/klab/v1/")
}

/// What the middleware does with a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Not the dashboard's: pass it on untouched.
    Pass,
    /// Authenticated by a client certificate in `system:masters`: pass on.
    Certificate,
    /// The right token in the URL: set the cookie and redirect to the URL without it.
    Login,
    /// The right cookie: pass on as [`token_identity`].
    Cookie,
    /// No credentials, or wrong ones (401).
    Unauthorized,
    /// A certificate outside `system:masters` on the page (403; the admin endpoint answers its
    /// own 403 to its POSTs).
    Forbidden(String),
}

/// Decides one request. `identity` is the client certificate's, if any; `cookie` the `Cookie`
/// header; `token` the expected login token.
pub fn decide(
    path: &str,
    query: Option<&str>,
    cookie: Option<&str>,
    identity: Option<&Identity>,
    token: &str,
) -> Decision {
    if !is_dashboard_path(path) {
        return Decision::Pass;
    }
    let ui = !path.starts_with("/klab/v1/");
    let good = |t: &str| !token.is_empty() && tokens_equal(t.as_bytes(), token.as_bytes());
    if let Some(id) = identity {
        // The admin endpoint judges its own callers; the page needs an administrator.
        if !ui || id.groups.iter().any(|g| g == "system:masters") {
            return Decision::Certificate;
        }
        if cookie
            .and_then(|c| cookie_value(c, COOKIE))
            .is_some_and(good)
        {
            return Decision::Cookie;
        }
        return Decision::Forbidden(format!(
            "user {:?} may not open the dashboard: it shows the whole cluster and its buttons are the admin endpoint's, so it needs a client certificate in system:masters or the login token klab up prints",
            id.user
        ));
    }
    if ui && query.and_then(query_token).is_some_and(good) {
        return Decision::Login;
    }
    if cookie
        .and_then(|c| cookie_value(c, COOKIE))
        .is_some_and(good)
    {
        return Decision::Cookie;
    }
    Decision::Unauthorized
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "0123456789abcdef0123456789abcdef";

    /// Path, query, Cookie header, certificate identity, and the decision.
    type Case<'a> = (
        &'a str,
        Option<&'a str>,
        Option<&'a str>,
        Option<&'a Identity>,
        Decision,
    );

    #[test]
    fn constant_time_comparison_is_equality() {
        assert!(tokens_equal(b"abc", b"abc"));
        assert!(!tokens_equal(b"abc", b"abd"));
        assert!(!tokens_equal(b"abc", b"abcd"));
        assert!(!tokens_equal(b"", b"a"));
        assert!(tokens_equal(b"", b""));
    }

    #[test]
    fn cookies_and_queries_are_read_by_name() {
        assert_eq!(
            cookie_value("a=1; klab-dashboard=xyz; b=2", COOKIE),
            Some("xyz")
        );
        assert_eq!(cookie_value("klab-dashboardx=1", COOKIE), None);
        assert_eq!(cookie_value("", COOKIE), None);
        assert_eq!(query_token("a=b&token=xyz"), Some("xyz"));
        assert_eq!(query_token("tokens=xyz"), None);
        assert_eq!(query_token("token"), None);
    }

    #[test]
    fn requests_are_decided_by_path_and_credentials() {
        let admin = Identity::admin();
        let dev = Identity::new("dev", &["system:authenticated"]);
        let cookie = format!("{COOKIE}={T}");
        let bad_cookie = format!("{COOKIE}=nope");
        let q = format!("token={T}");
        use Decision::*;
        let cases: Vec<Case> = vec![
            // The API is not the dashboard's business.
            ("/api/v1/pods", None, Some(&cookie), None, Pass),
            ("/ui/", None, None, Some(&admin), Certificate),
            ("/ui/events", None, None, Some(&admin), Certificate),
            ("/ui/", Some(&q), None, None, Login),
            ("/ui", Some(&q), None, None, Login),
            ("/ui/", Some("token=wrong"), None, None, Unauthorized),
            ("/ui/", None, None, None, Unauthorized),
            ("/ui/events", None, Some(&cookie), None, Cookie),
            ("/ui/events", None, Some(&bad_cookie), None, Unauthorized),
            // The buttons' POSTs carry the cookie; a token in an admin URL is not a login.
            (
                "/klab/v1/nodes/n1/stop-kubelet",
                None,
                Some(&cookie),
                None,
                Cookie,
            ),
            (
                "/klab/v1/nodes/n1/stop-kubelet",
                Some(&q),
                None,
                None,
                Unauthorized,
            ),
            (
                "/klab/v1/nodes/n1/stop-kubelet",
                None,
                None,
                None,
                Unauthorized,
            ),
            // A certificate reaches the admin endpoint, which answers its own 403.
            (
                "/klab/v1/nodes/n1/stop-kubelet",
                None,
                None,
                Some(&dev),
                Certificate,
            ),
            ("/ui/", None, Some(&cookie), Some(&dev), Cookie),
        ];
        for (path, query, cookie, id, want) in cases {
            assert_eq!(
                decide(path, query, cookie, id, T),
                want,
                "{path} {query:?} {cookie:?}"
            );
        }
        assert!(matches!(
            decide("/ui/", None, None, Some(&dev), T),
            Forbidden(m) if m.contains("\"dev\"") && m.contains("system:masters")
        ));
        // No token configured: nothing matches it, not even an empty one.
        assert_eq!(decide("/ui/", Some("token="), None, None, ""), Unauthorized);
    }
}
