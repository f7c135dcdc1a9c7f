//! The browser security headers: one policy, defined here, carried by every console
//! response wherever the console is mounted, and (through `deck serve`) by every API and
//! operations response too.
//!
//! Nothing on a console page needs inline script or inline style: the pages are complete as
//! served, the live refresh is `/assets/live.js`, the charts are SVG elements styled by the
//! stylesheet. The one exception is Leptos's own bookkeeping: every server-rendered page
//! ends with two small inline scripts (resource and chunk registries for hydration, which
//! this console never runs). Leptos marks them with a fresh random nonce per response, so a
//! page's policy allows exactly that nonce ([`page_policy`]); injected markup cannot know it.

use axum::http::{HeaderName, HeaderValue, header};
use tower::layer::util::Stack;
use tower_http::set_header::SetResponseHeaderLayer;

/// The Content-Security-Policy of every response that is not a rendered page: script,
/// style, fetches (the SSE stream) and everything else only from this origin; no plugins,
/// no `<base>`, forms post only here, and no framing (clickjacking).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The policy of a rendered page: [`CONTENT_SECURITY_POLICY`] plus its inline scripts' nonce.
pub fn page_policy(nonce: &str) -> String {
    CONTENT_SECURITY_POLICY.replacen(
        "script-src 'self'",
        &format!("script-src 'self' 'nonce-{nonce}'"),
        1,
    )
}

type Set = SetResponseHeaderLayer<HeaderValue>;

/// The headers as one tower layer.
pub type SecurityHeadersLayer = Stack<Set, Stack<Set, Stack<Set, Set>>>;

fn set(name: HeaderName, value: &'static str) -> Set {
    // Only where missing: a rendered page has already set its own policy (with its nonce),
    // and a router nested in another one carrying this layer is not given a second copy.
    SetResponseHeaderLayer::if_not_present(name, HeaderValue::from_static(value))
}

/// Security headers for every response of the service it wraps; add it last (outermost) so
/// responses made by other layers (auth refusals, timeouts, size limits) carry them too.
pub fn layer() -> SecurityHeadersLayer {
    Stack::new(
        set(header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        Stack::new(
            // For browsers that predate `frame-ancestors`.
            set(header::X_FRAME_OPTIONS, "DENY"),
            Stack::new(
                set(header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                set(header::REFERRER_POLICY, "same-origin"),
            ),
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_policy_adds_only_its_nonce() {
        let p = page_policy("abc_-123");
        assert_eq!(
            p.replace(" 'nonce-abc_-123'", ""),
            CONTENT_SECURITY_POLICY,
            "{p}"
        );
        assert!(p.contains("script-src 'self' 'nonce-abc_-123';"), "{p}");
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe"));
    }
}
