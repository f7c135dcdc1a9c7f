//! Every operator action, as a server function with a fixed endpoint under `FN_PREFIX`, in a
//! module per page (`queues`, `instances`, `jobs`, `settings`, `schedules`); this module is
//! their common frame: who may act, the confirmation box, the redirect with its flash.
//!
//! They answer a plain form post with a redirect (302 for browsers) back to the page it came
//! from, carrying `ok=` or `err=` for the flash message — so all of them work with
//! JavaScript off. The session middleware has already checked the CSRF token and the
//! operator role; each action checks the role again, writes the audit log and emits an event.

use leptos::prelude::*;
use leptos::server_fn::error::ServerFnError;

mod instances;
mod jobs;
mod queues;
pub mod schedules;
mod settings;

pub use instances::*;
pub use jobs::*;
pub use queues::*;
pub use settings::*;

#[cfg(feature = "ssr")]
use crate::state::Console;
#[cfg(feature = "ssr")]
use deck_web::auth::Principal;

/// What an action reports: where to go and what to say.
#[cfg(feature = "ssr")]
struct Done {
    to: Option<String>,
    message: String,
    /// Shown as an error, though the action chose where to go (a rejected edit preview).
    error: bool,
}

#[cfg(feature = "ssr")]
impl Done {
    fn msg(message: impl Into<String>) -> Self {
        Done {
            to: None,
            message: message.into(),
            error: false,
        }
    }
    fn to(to: String, message: impl Into<String>) -> Self {
        Done {
            to: Some(to),
            message: message.into(),
            error: false,
        }
    }
}

#[cfg(feature = "ssr")]
type ActionResult = Result<Done, String>;

/// A redirect target taken from a request: a path on this site, or `/`. Every redirect
/// built from user input (the theme switch's `back`, every action's `back`) goes through here.
///
/// Browsers drop tabs and newlines anywhere in a URL and read `\\` as `/`, so `/\t/host` and
/// `/\\host` mean `//host`, another site. Hence: one leading `/` not followed by another, no
/// backslash, and no control character anywhere (tab, CR, LF, DEL, C1), which also keeps the
/// value a valid `Location` header, so it can never turn into a 500. Percent-escapes are left
/// as they are: the value goes into `Location` verbatim, and a browser reads `%2F`, `%5C` or
/// `%09` in a path as path bytes, never as a separator, so `/%2F%2Fhost` stays on this site;
/// decoding them would only refuse honest paths such as a search for `a%0Ab`.
#[cfg(feature = "ssr")]
pub(crate) fn safe_back(back: &str) -> String {
    let local = back.starts_with('/')
        && !back.starts_with("//")
        && !back.chars().any(|c| c == '\\' || c.is_control());
    if local {
        back.to_string()
    } else {
        "/".to_string()
    }
}

#[cfg(feature = "ssr")]
pub(crate) fn with_flash(url: &str, key: &str, message: &str) -> String {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let mut pairs: Vec<(String, String)> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(query)
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k != "ok" && k != "err")
            .collect();
    let message: String = message.chars().take(400).collect();
    pairs.push((key.to_string(), message));
    format!(
        "{path}?{}",
        serde_urlencoded::to_string(&pairs).unwrap_or_default()
    )
}

#[cfg(feature = "ssr")]
fn finish(back: &str, outcome: ActionResult) -> Result<(), ServerFnError> {
    let back = safe_back(back);
    let target = match outcome {
        Ok(done) => with_flash(
            &safe_back(done.to.as_deref().unwrap_or(&back)),
            if done.error { "err" } else { "ok" },
            &done.message,
        ),
        Err(message) => with_flash(&back, "err", &message),
    };
    leptos_axum::redirect(&target);
    Ok(())
}

/// The frame of an action: run it as the signed-in operator (a viewer is refused before it
/// runs), then answer with the redirect back and its flash.
#[cfg(feature = "ssr")]
async fn act<F, Fut>(back: &str, action: F) -> Result<(), ServerFnError>
where
    F: FnOnce(Console, Principal) -> Fut,
    Fut: std::future::Future<Output = ActionResult>,
{
    let outcome = match operator().await {
        Ok((console, who)) => action(console, who).await,
        Err(refused) => Err(refused),
    };
    finish(back, outcome)
}

#[cfg(feature = "ssr")]
async fn operator() -> Result<(Console, Principal), String> {
    let console = use_context::<Console>().ok_or("console is not configured")?;
    let axum::Extension(session): axum::Extension<deck_web::auth::session::Session> =
        leptos_axum::extract().await.map_err(|e| e.to_string())?;
    if !session.can_act() {
        return Err(format!(
            "{} is a viewer: this needs the operator role",
            session.identity.name
        ));
    }
    Ok((console, session.identity))
}

#[cfg(feature = "ssr")]
fn parse_id(id: &str) -> Result<deck_engine::JobId, String> {
    id.parse().map_err(|_| format!("{id:?} is not a job id"))
}

#[cfg(feature = "ssr")]
fn confirmed(confirm: &Option<String>) -> Result<(), String> {
    if confirm.as_deref() == Some("yes") {
        Ok(())
    } else {
        Err("Tick the confirmation box first: this cannot be undone.".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_paths_are_kept_as_they_are() {
        for ok in [
            "/",
            "/jobs?source=dlq",
            "/jobs/0193a5c2-0000-7000-8000-000000000000?edit=1&draft=ab12",
            "/jobs?q=a+b%0Ac&ok=done",
            "/%2F%2Fevil.example",
            "/%5Cevil.example",
            "/%09/evil.example",
            "/queues#queue-emails",
            "/jobs?q=caf%C3%A9",
            "/jobs?q=café",
        ] {
            assert_eq!(safe_back(ok), ok, "{ok:?}");
        }
    }

    #[test]
    fn anything_that_could_leave_the_site_or_break_the_header_goes_home() {
        for hostile in [
            "",
            "jobs",
            "//evil.example/x",
            "///evil.example",
            "/\\evil.example",
            "\\\\evil.example",
            "/x\\y",
            "https://evil.example",
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "data:text/html,x",
            " /jobs",
            " //evil.example",
            "/\t/evil.example",
            "/\n/evil.example",
            "/\r/evil.example",
            "\t//evil.example",
            "/jobs\r\nSet-Cookie: deck_csrf=x",
            "/jobs\nLocation: //evil.example",
            "/jobs\u{7f}",
            "/jobs\u{85}",
            "/jobs\u{0}",
            "/jobs\u{1b}[31m",
        ] {
            assert_eq!(safe_back(hostile), "/", "{hostile:?}");
        }
    }

    #[test]
    fn flash_replaces_previous_flash() {
        assert_eq!(
            with_flash("/jobs?source=dlq&ok=old", "err", "bad & worse"),
            "/jobs?source=dlq&err=bad+%26+worse"
        );
    }
}
