//! Where a handler panicked. A caught panic's payload carries only its message; its source
//! location (and a backtrace, when `RUST_BACKTRACE` asks for one) reach only the panic hook,
//! which runs on the panicking thread before the unwind. The hook installed here (once per
//! process, in front of whatever hook was set, which still runs: the usual stderr report
//! stays) leaves them in a thread-local; the executor takes them on that same thread right
//! after catching the unwind, with no await in between.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::cell::RefCell;
use std::panic::PanicHookInfo;
use std::sync::Once;

/// A backtrace is kept up to this many characters: enough for the frames that matter, small
/// enough to keep with every failed attempt.
const MAX_BACKTRACE_CHARS: usize = 8_000;

/// What the hook saw of the last panic on this thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PanicSite {
    /// The payload's text, to make sure the site belongs to the panic caught.
    message: Option<String>,
    pub(crate) location: Option<String>,
    pub(crate) backtrace: Option<String>,
}

thread_local! {
    static LAST: RefCell<Option<PanicSite>> = const { RefCell::new(None) };
}

static INSTALL: Once = Once::new();

/// Put the recording hook in front of the current one (once per process).
pub(crate) fn install_hook() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            record(info);
            previous(info);
        }));
    });
}

fn record(info: &PanicHookInfo<'_>) {
    let site = PanicSite {
        message: info.payload_as_str().map(str::to_string),
        location: info.location().map(ToString::to_string),
        backtrace: backtrace(),
    };
    // During thread teardown the slot may be gone; the site is then simply not known.
    let _ = LAST.try_with(|last| *last.borrow_mut() = Some(site));
}

/// A backtrace when the environment asks for one (`Backtrace::capture` reads
/// `RUST_LIB_BACKTRACE`, then `RUST_BACKTRACE`), cut to `MAX_BACKTRACE_CHARS`.
fn backtrace() -> Option<String> {
    let trace = Backtrace::capture();
    if trace.status() != BacktraceStatus::Captured {
        return None;
    }
    let text = trace.to_string();
    Some(match text.char_indices().nth(MAX_BACKTRACE_CHARS) {
        Some((cut, _)) => format!(
            "{}\n… (cut at {MAX_BACKTRACE_CHARS} characters)",
            &text[..cut]
        ),
        None => text,
    })
}

/// The site of the panic just caught on this thread, if the hook recorded it: `message` is
/// the caught payload's text, so a site left by another panic is not taken for this one.
pub(crate) fn take_site(message: Option<&str>) -> Option<PanicSite> {
    let site = LAST
        .try_with(|last| last.borrow_mut().take())
        .ok()
        .flatten()?;
    (site.message.as_deref() == message).then_some(site)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_site_of_a_caught_panic_is_its_location() {
        install_hook();
        let line = line!() + 1;
        let caught = std::panic::catch_unwind(|| panic!("boom {}", 7));
        assert!(caught.is_err());
        let site = take_site(Some("boom 7")).expect("the hook recorded the panic");
        let location = site.location.unwrap_or_default();
        assert!(
            location.starts_with(&format!("{}:{line}:", file!())),
            "{location}"
        );
        assert_eq!(take_site(Some("boom 7")), None, "taken once");
    }

    #[test]
    fn a_site_left_by_another_panic_is_not_taken() {
        install_hook();
        let _ = std::panic::catch_unwind(|| panic!("first"));
        assert_eq!(take_site(Some("second")), None);
    }
}
