//! The frame around every page: navigation, who is signed in, the theme switch, flash
//! messages after an action, and the form wrapper every action uses.

use deck_web::auth::session::CSRF_FIELD;
use leptos::prelude::*;
use leptos_meta::Title;

use crate::format::enc;
use crate::request::{current_url, path, query, session, theme};

const NAV: [(&str, &str); 9] = [
    ("/", "Overview"),
    ("/queues", "Queues"),
    ("/schedules", "Schedules"),
    ("/batches", "Batches"),
    ("/jobs", "Jobs"),
    ("/settings", "Settings"),
    ("/instances", "Instances"),
    ("/audit", "Audit"),
    ("/jobs?source=dlq", "Dead letters"),
];

/// Whether the page at `here` belongs to the nav entry `href`.
fn url_is_in(here: &str, source_dlq: bool, href: &str) -> bool {
    match href {
        "/" => here == "/",
        "/jobs" => here.starts_with("/jobs") && !source_dlq,
        "/jobs?source=dlq" => (here.starts_with("/jobs") && source_dlq) || here.starts_with("/dlq"),
        h => here.starts_with(h),
    }
}

/// `section`: the nav entry (its href) this page belongs to, when the URL does not say (a
/// dead job's page is under `/jobs/…` but belongs to the dead letters). `doc_title`: the
/// document's title when it says more than the heading (`Job 3f2a…`); the heading otherwise.
#[component]
pub fn Layout(
    title: String,
    #[prop(optional)] section: Option<&'static str>,
    #[prop(optional, into)] doc_title: Option<String>,
    children: Children,
) -> impl IntoView {
    let here = path();
    let q = query();
    let source_dlq = q.get("source") == Some("dlq");
    let s = session();
    let links = NAV
        .iter()
        .map(|(href, label)| {
            let active = match (section, *href) {
                (Some(section), h) => section == h,
                (None, href) => url_is_in(&here, source_dlq, href),
            };
            view! { <a href=*href class:active=active aria-current=active.then_some("page")>{*label}</a> }
        })
        .collect_view();
    let back = enc(&current_url());
    // The themes keep their names in the cookie and the stylesheet ("carbon" is the dark one,
    // "blueprint" the light one); an operator is told what they look like.
    let switch = move |to: &'static str| {
        let (icon, shade) = if to == "carbon" {
            ("◐", "dark")
        } else {
            ("◑", "light")
        };
        view! {
            <a class=format!("theme-switch to-{to}") href=format!("/theme?set={to}&back={back}") title=format!("Switch to the {shade} theme")>
                <span aria-hidden="true">{icon}</span>" "{shade}
            </a>
        }
    };
    // Following the system's setting, the server cannot know which theme shows: both
    // switches are sent and the stylesheet shows the one for the other theme.
    let switches = match theme() {
        Some("carbon") => switch("blueprint").into_any(),
        Some(_) => switch("carbon").into_any(),
        None => view! { {switch("carbon")}{switch("blueprint")} }.into_any(),
    };
    // leptos_meta (0.8) writes the title into `<title>` as given, unescaped: a queue or
    // schedule name holding `</title>` would end it and inject markup. Browsers decode
    // entities in a title, so escaping here shows the name as it is.
    let doc_title = deck_web::auth::session::escape(&format!(
        "{} · The Deck",
        doc_title.as_deref().unwrap_or(&title)
    ));
    let flash_ok = q.get("ok").map(str::to_string);
    let flash_err = q.get("err").map(str::to_string);
    view! {
        <Title text=doc_title/>
        <a class="skip-link" href="#content">"Skip to content"</a>
        <header class="top">
            <a class="brand" href="/" title="The Deck">
                <svg viewBox="0 0 24 24" width="22" height="22" aria-hidden="true"><rect x="3" y="4" width="18" height="4" rx="1"></rect><rect x="3" y="10" width="18" height="4" rx="1"></rect><rect x="3" y="16" width="18" height="4" rx="1"></rect></svg>
                <span>"The Deck"</span>
            </a>
            <nav class="nav" aria-label="Main">{links}</nav>
            <div class="who">
                <span class="live-dot" title="Live updates" data-live-status=""></span>
                // Shown by live.js (without JavaScript nothing is live, so nothing to pause).
                <button type="button" class="quiet live-toggle" data-live-toggle="" aria-pressed="false" hidden=true>"Pause live"</button>
                <span class="user" title=format!("Signed in as {} ({})", s.identity.name, s.identity.role.as_str())>
                    {s.identity.name.clone()} <small>{s.identity.role.as_str()}</small>
                </span>
                {switches}
            </div>
        </header>
        <main class="page" id="content" tabindex="-1">
            <h1>{title}</h1>
            {flash_ok.map(|m| view! { <div class="flash ok" role="status">{m}</div> })}
            {flash_err.map(|m| view! { <div class="flash err" role="alert">{m}</div> })}
            {children()}
        </main>
    }
}

/// A plain `<form method="post">` to a server function, carrying the CSRF token and the
/// page to come back to. Works without JavaScript.
#[component]
pub fn PostForm(
    /// The server function's endpoint, e.g. `"queue/pause"`.
    endpoint: &'static str,
    #[prop(optional, into)] class: String,
    /// Where to go afterwards; the current page when empty.
    #[prop(optional, into)]
    back: String,
    children: Children,
) -> impl IntoView {
    let s = session();
    let back = if back.is_empty() { current_url() } else { back };
    view! {
        <form method="post" action=format!("{}/{endpoint}", crate::FN_PREFIX) class=class>
            <input type="hidden" name=CSRF_FIELD value=s.csrf/>
            <input type="hidden" name="back" value=back/>
            {children()}
        </form>
    }
}

/// Forms for operators; viewers see a note instead.
#[component]
pub fn OperatorOnly(children: Children) -> impl IntoView {
    if session().can_act() {
        children().into_any()
    } else {
        view! { <p class="muted small">"Read-only: actions need the operator role."</p> }.into_any()
    }
}

/// A `<textarea>` whose value is exactly `text`.
///
/// Never write `<textarea>{text}</textarea>`: tachys (0.2) marks `<textarea>` like `<script>`
/// and `<style>`, so it renders its children unescaped, while a browser parses textarea
/// content as escapable text — entities are decoded and `</textarea>` ends it. A payload could
/// close the box and inject markup. So the text is escaped here, once, and handed over as
/// `inner_html` (which tachys writes as given, whatever it decides about textarea children).
/// The parser drops one newline right after the start tag; the one put first keeps a text
/// that itself starts with a newline intact. `invalid` marks it as the field a form's
/// problem is about.
#[component]
pub fn TextBox(
    name: &'static str,
    rows: u32,
    text: String,
    #[prop(optional)] invalid: bool,
) -> impl IntoView {
    let content = format!("\n{}", deck_web::auth::session::escape(&text));
    view! { <textarea name=name rows=rows.to_string() spellcheck="false" aria-invalid=invalid.then_some("true") inner_html=content></textarea> }
}

#[component]
pub fn ErrorBox(message: String) -> impl IntoView {
    view! { <div class="flash err" role="alert">{message}</div> }
}

/// One column heading of a [`DenseTable`]; numeric columns are right-aligned.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    pub title: &'static str,
    pub numeric: bool,
}

impl Col {
    pub const fn text(title: &'static str) -> Self {
        Col {
            title,
            numeric: false,
        }
    }

    pub const fn num(title: &'static str) -> Self {
        Col {
            title,
            numeric: true,
        }
    }

    /// Text columns, in order.
    pub fn texts<const N: usize>(titles: [&'static str; N]) -> Vec<Col> {
        titles.into_iter().map(Col::text).collect()
    }
}

/// A list table as every page shows one: a scrollable, keyboard-focusable region named by
/// `label`, column headings a screen reader announces per cell, and an optional caption
/// read to screen readers only. `children` are the body's rows.
#[component]
pub fn DenseTable(
    label: &'static str,
    cols: Vec<Col>,
    #[prop(optional)] id: Option<&'static str>,
    /// Classes beside `dense`.
    #[prop(optional)]
    class: Option<&'static str>,
    #[prop(optional)] caption: Option<&'static str>,
    /// The live-update region this table is (`data-live-page`).
    #[prop(optional)]
    live_page: Option<&'static str>,
    children: Children,
) -> impl IntoView {
    let class = class.map_or_else(|| "dense".to_string(), |c| format!("dense {c}"));
    let heads = cols
        .into_iter()
        .map(|c| {
            if c.numeric {
                view! { <th scope="col" class="num">{c.title}</th> }.into_any()
            } else {
                view! { <th scope="col">{c.title}</th> }.into_any()
            }
        })
        .collect_view();
    view! {
        <div class="table-wrap" tabindex="0" role="region" aria-label=label data-live-page=live_page>
            <table class=class id=id>
                {caption.map(|c| view! { <caption class="visually-hidden">{c}</caption> })}
                <thead><tr>{heads}</tr></thead>
                <tbody>{children()}</tbody>
            </table>
        </div>
    }
}
