//! The check that makes injected markup visible: plant [`hostile`] text in user-controlled
//! fields, render, and [`assert_inert`] the result. The HTML is parsed the way a browser
//! parses it (html5ever), so the check sees the elements and attributes a browser would
//! build, whatever the escaping looks like in the bytes.

#![allow(dead_code)] // each test file uses a different part of this module

use scraper::{ElementRef, Html, Node};

/// Markup that starts a script wherever it is not escaped: it closes a textarea, opens a
/// script, breaks out of a double- and a single-quoted attribute into an `<img onerror>`.
/// `field` names where it was planted, so a finding names its source. No `:` or `,`, so it
/// also fits names and tags.
pub fn markup(field: &str) -> String {
    format!(
        "</textarea><script>__pwned('{field}')</script>\"><img src=x onerror=__pwned('{field}')>'><img src=x onerror=__pwned('{field}')>"
    )
}

/// [`markup`] behind a `javascript:` URL, for fields that might end up in a link.
pub fn hostile(field: &str) -> String {
    format!("javascript:0//{}", markup(field))
}

/// The part of [`hostile`] that survives every display of a field (JSON pretty-printing
/// escapes `"`, error groups keep the first 80 characters): finding it in a page's text or
/// attribute values proves the field was rendered there.
pub fn trace(field: &str) -> String {
    format!("<script>__pwned('{field}')</script>")
}

/// Attributes a browser follows as a URL (navigation, loading, form submission).
const URL_ATTRS: [&str; 10] = [
    "href",
    "src",
    "action",
    "formaction",
    "xlink:href",
    "poster",
    "data",
    "background",
    "cite",
    "ping",
];

/// Elements that load or run something, which no console page has.
const FORBIDDEN: [&str; 10] = [
    "img", "iframe", "frame", "frameset", "object", "embed", "base", "applet", "portal", "math",
];

/// Is this attribute value a link to a path on this site, as a browser reads it? Browsers
/// trim surrounding whitespace and drop tabs and newlines anywhere in a URL, so `/\t/evil`
/// is `//evil`; `/\` counts as `//`.
fn is_local_url(value: &str) -> bool {
    let cleaned: String = value
        .trim_matches(|c: char| c.is_ascii_whitespace() || c.is_ascii_control())
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .collect();
    if cleaned.starts_with('#') || cleaned.starts_with('?') {
        return true;
    }
    let mut chars = cleaned.chars();
    chars.next() == Some('/') && !matches!(chars.next(), Some('/' | '\\'))
}

/// The nonce a Content-Security-Policy admits inline scripts by, if any.
pub fn policy_nonce(policy: &str) -> Option<&str> {
    let start = policy.find("'nonce-")? + "'nonce-".len();
    let len = policy[start..].find('\'')?;
    Some(&policy[start..start + len])
}

/// Everything wrong with `html` as a page or fragment of this console: script other than
/// the console's own files and the inline scripts its response's policy admits by `nonce`
/// (Leptos's bookkeeping), event-handler attributes, elements that load things, links that
/// leave the site or run script, a refresh that navigates, inline style.
pub fn findings(html: &str, nonce: Option<&str>) -> Vec<String> {
    let trimmed = html.trim_start();
    let doc = if trimmed.starts_with("<!DOCTYPE") || trimmed.starts_with("<html") {
        Html::parse_document(html)
    } else {
        Html::parse_fragment(html)
    };
    let mut found = Vec::new();
    for el in doc
        .root_element()
        .descendants()
        .filter_map(ElementRef::wrap)
    {
        let e = el.value();
        let name = e.name();
        let tag = || {
            let attrs: Vec<String> = e.attrs().map(|(k, v)| format!("{k}={v:?}")).collect();
            format!("<{name} {}>", attrs.join(" "))
        };
        if FORBIDDEN.contains(&name) {
            found.push(format!("element {}", tag()));
        }
        // The policy says `style-src 'self'`: inline style would be blocked (and reported).
        if name == "style" || e.attr("style").is_some() {
            found.push(format!("inline style {}", tag()));
        }
        if name == "script" {
            let inline: String = el.text().collect();
            let file = e
                .attr("src")
                .is_some_and(|s| s.starts_with("/assets/") && is_local_url(s))
                && inline.trim().is_empty();
            let admitted = e.attr("src").is_none() && nonce.is_some() && e.attr("nonce") == nonce;
            if !file && !admitted {
                found.push(format!("script {} {inline:?}", tag()));
            }
        }
        if name == "meta"
            && e.attr("http-equiv")
                .is_some_and(|h| h.eq_ignore_ascii_case("refresh"))
            && e.attr("content")
                .is_some_and(|c| c.to_ascii_lowercase().contains("url"))
        {
            found.push(format!("navigating refresh {}", tag()));
        }
        for (attr, value) in e.attrs() {
            let attr = attr.to_ascii_lowercase();
            if attr.starts_with("on") || attr == "srcdoc" {
                found.push(format!("attribute {attr} on {}", tag()));
            }
            if URL_ATTRS.contains(&attr.as_str()) && !is_local_url(value) {
                found.push(format!("non-local {attr}={value:?} on {}", tag()));
            }
        }
    }
    // Belt and braces on the bytes: these only appear where escaping failed.
    for raw in ["<script>__pwned", "<img src=x", "</textarea><script"] {
        if html.contains(raw) {
            found.push(format!("unescaped {raw:?} in the markup"));
        }
    }
    found
}

/// Fail with every finding, naming `what` was rendered.
pub fn assert_inert(what: &str, html: &str, nonce: Option<&str>) {
    let found = findings(html, nonce);
    assert!(
        found.is_empty(),
        "{what}: injected markup would run:\n  {}\n--- html ---\n{html}",
        found.join("\n  ")
    );
}

/// Does the rendered page show the text planted in `field` (as text or an attribute value,
/// decoded as a browser decodes it)?
pub fn shows(html: &str, field: &str) -> bool {
    let needle = trace(field);
    let doc = Html::parse_document(html);
    doc.tree.values().any(|node| match node {
        Node::Text(t) => t.contains(&needle),
        Node::Element(e) => e.attrs().any(|(_, v)| v.contains(&needle)),
        _ => false,
    })
}

#[test]
fn the_check_finds_what_a_browser_would_run() {
    let clean = r#"<p title="&quot;&gt;&lt;img src=x onerror=1&gt;">&lt;script&gt;</p><a href="/jobs?q=javascript%3A">x</a><script src="/assets/live.js" defer></script>"#;
    assert!(
        findings(clean, None).is_empty(),
        "{:?}",
        findings(clean, None)
    );
    let bookkeeping = r#"<script nonce="n0nce">__INCOMPLETE_CHUNKS=[];</script>"#;
    assert!(findings(bookkeeping, Some("n0nce")).is_empty());
    assert!(!findings(bookkeeping, None).is_empty());
    assert!(!findings(bookkeeping, Some("other")).is_empty());
    assert_eq!(
        policy_nonce("script-src 'self' 'nonce-a_b-1'; x"),
        Some("a_b-1")
    );
    for bad in [
        "<textarea></textarea><script>__pwned(1)</script>",
        r#"<input value=""><img src=x onerror=alert(1)>">"#,
        r#"<a href="javascript:alert(1)">x</a>"#,
        r#"<a href=" JAVASCRIPT:alert(1)">x</a>"#,
        "<a href=\"/\t/evil.example\">x</a>",
        r#"<a href="//evil.example">x</a>"#,
        r#"<form action="/\evil.example"></form>"#,
        r#"<div onmouseover="alert(1)"></div>"#,
        r#"<svg><a xlink:href="data:text/html,x"></a></svg>"#,
        r#"<meta http-equiv="refresh" content="0;url=https://evil.example">"#,
        r#"<script src="https://evil.example/x.js"></script>"#,
        r#"<p style="background:url(//evil.example)">x</p>"#,
    ] {
        assert!(!findings(bad, Some("n")).is_empty(), "missed: {bad}");
    }
}
