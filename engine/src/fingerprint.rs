//! Error fingerprints: which dead letters fail "the same way".
//!
//! Ninety "mailbox ann@example.com does not exist" failures are one problem, not ninety. A
//! fingerprint hashes (failure reason, error kind, job type, normalised message), where the
//! normalised message has its variable parts — numbers, ids, UUIDs, e-mail addresses, URLs,
//! quoted values, hex — replaced by placeholders and its whitespace collapsed.
//!
//! The hash is split so a store can finish it inside SQL: [`FingerprintHead`] carries
//! everything but the job type (computed here, once per message), and the fingerprint is the
//! first 8 bytes of SHA-256 over the UTF-16LE text `head + job_type`, as 16 lowercase hex
//! digits. UTF-16LE because that is what SQL Server's `HASHBYTES` sees of an `NVARCHAR`, so
//! its batch moves (many job types, one store-written message) can compute the same value
//! per row: `LOWER(CONVERT(CHAR(16), HASHBYTES('SHA2_256', CAST(@head + job_type AS
//! VARBINARY(MAX))), 2))`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::model::FailureReason;

/// Characters of a message that count: the stores keep this much of the last error, so a
/// fingerprint recomputed from a stored row equals the one computed from the live error.
pub const FINGERPRINT_MESSAGE_CHARS: usize = 400;

/// Version tag inside every head: a change to the normalisation rules must change it, so
/// old and new groups never silently merge under different rules.
const HEAD_VERSION: &str = "fp1";

/// Separator between the head's fields; a control character no message field keeps
/// (normalisation turns every control character into a space).
const SEP: char = '\u{1f}';

/// A 64-bit error fingerprint, as 16 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Fingerprint(String);

impl Fingerprint {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A text that is not a fingerprint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not an error group fingerprint (expected 16 hex digits)")]
pub struct ParseFingerprintError {
    pub value: String,
}

impl FromStr for Fingerprint {
    type Err = ParseFingerprintError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.len() == 16 && t.bytes().all(|b| b.is_ascii_hexdigit()) {
            Ok(Fingerprint(t.to_ascii_lowercase()))
        } else {
            Err(ParseFingerprintError {
                value: s.to_string(),
            })
        }
    }
}

impl TryFrom<String> for Fingerprint {
    type Error = ParseFingerprintError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Fingerprint> for String {
    fn from(f: Fingerprint) -> String {
        f.0
    }
}

/// Everything a fingerprint hashes except the job type: reason, kind, normalised message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FingerprintHead(String);

impl FingerprintHead {
    pub fn new(reason: FailureReason, kind: &str, message: &str) -> Self {
        let kept: String = message.chars().take(FINGERPRINT_MESSAGE_CHARS).collect();
        FingerprintHead(format!(
            "{HEAD_VERSION}{SEP}{}{SEP}{}{SEP}{}{SEP}",
            reason.code(),
            collapse_whitespace(kind),
            normalise_message(&kept)
        ))
    }

    /// The text a store hands to SQL that finishes the hash with the row's job type.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The fingerprint of this head for one job type.
    pub fn for_job_type(&self, job_type: &str) -> Fingerprint {
        let mut hasher = Sha256::new();
        for unit in self.0.encode_utf16().chain(job_type.encode_utf16()) {
            hasher.update(unit.to_le_bytes());
        }
        let digest = hasher.finalize();
        let mut hex = String::with_capacity(16);
        for byte in &digest[..8] {
            hex.push_str(&format!("{byte:02x}"));
        }
        Fingerprint(hex)
    }
}

/// The fingerprint of a dead letter.
pub fn fingerprint(
    reason: FailureReason,
    kind: &str,
    job_type: &str,
    message: &str,
) -> Fingerprint {
    FingerprintHead::new(reason, kind, message).for_job_type(job_type)
}

fn collapse_whitespace(text: &str) -> String {
    text.split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The message with its variable parts replaced by placeholders (`<url>`, `<email>`,
/// `'<q>'`, `"<q>"`, `<uuid>`, `<hex>`, `<id>`, `<n>`) and whitespace collapsed.
pub fn normalise_message(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::with_capacity(message.len());
    let mut i = 0;
    let mut pending_space = false;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() || c.is_control() {
            pending_space = !out.is_empty();
            i += 1;
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        if (c == '\'' || c == '"')
            && let Some(end) = closing_quote(&chars, i)
        {
            out.push(c);
            out.push_str("<q>");
            out.push(c);
            i = end + 1;
            continue;
        }
        // A word: up to whitespace or a quote.
        let start = i;
        while i < chars.len()
            && !(chars[i].is_whitespace() || chars[i].is_control())
            && chars[i] != '"'
            && !(chars[i] == '\'' && closing_quote(&chars, i).is_some())
        {
            i += 1;
        }
        if i == start {
            // A quote without its pair: keep it as text.
            out.push(c);
            i += 1;
            continue;
        }
        normalise_word(&chars[start..i], &mut out);
    }
    out
}

/// Where the quote opened at `open` closes: the next same quote followed by a non-word
/// character. An opening quote must not follow a letter or digit, so "doesn't" and
/// "O'Brien's" stay words.
fn closing_quote(chars: &[char], open: usize) -> Option<usize> {
    let q = chars[open];
    if open > 0 && chars[open - 1].is_alphanumeric() {
        return None;
    }
    (open + 1..chars.len())
        .find(|&j| chars[j] == q && chars.get(j + 1).is_none_or(|n| !n.is_alphanumeric()))
}

const LEADING_PUNCT: &[char] = &['(', '[', '{', '<'];
const TRAILING_PUNCT: &[char] = &['.', ',', ';', ':', '!', '?', ')', ']', '}', '>'];

fn normalise_word(word: &[char], out: &mut String) {
    let mut start = 0;
    let mut end = word.len();
    while start < end && LEADING_PUNCT.contains(&word[start]) {
        out.push(word[start]);
        start += 1;
    }
    while end > start && TRAILING_PUNCT.contains(&word[end - 1]) {
        end -= 1;
    }
    let core = &word[start..end];
    if is_url(core) {
        out.push_str("<url>");
    } else if is_email(core) {
        out.push_str("<email>");
    } else {
        normalise_tokens(core, out);
    }
    out.extend(&word[end..]);
}

fn is_url(core: &[char]) -> bool {
    let text: String = core.iter().collect();
    let Some(pos) = text.find("://") else {
        return false;
    };
    let scheme = &text[..pos];
    pos + 3 < text.len()
        && scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-'))
}

fn is_email(core: &[char]) -> bool {
    let Some(at) = core.iter().position(|&c| c == '@') else {
        return false;
    };
    let (local, domain) = (&core[..at], &core[at + 1..]);
    let part_ok = |c: &char| c.is_alphanumeric() || matches!(c, '.' | '_' | '%' | '+' | '-');
    !local.is_empty()
        && local.iter().all(part_ok)
        && domain
            .iter()
            .all(|c| c.is_alphanumeric() || matches!(c, '.' | '-'))
        && domain
            .iter()
            .position(|&c| c == '.')
            .is_some_and(|dot| dot > 0 && dot + 1 < domain.len())
}

/// Inside a word: UUIDs, 0x-hex, long hex runs, long mixed ids and digit runs.
fn normalise_tokens(core: &[char], out: &mut String) {
    let mut i = 0;
    while i < core.len() {
        let boundary = i == 0 || !core[i - 1].is_alphanumeric();
        if boundary && let Some(len) = uuid_at(&core[i..]) {
            out.push_str("<uuid>");
            i += len;
            continue;
        }
        if boundary
            && core[i] == '0'
            && matches!(core.get(i + 1), Some('x' | 'X'))
            && core.get(i + 2).is_some_and(char::is_ascii_hexdigit)
        {
            i += 2;
            while i < core.len() && core[i].is_ascii_hexdigit() {
                i += 1;
            }
            out.push_str("<hex>");
            continue;
        }
        if core[i].is_alphanumeric() {
            let run_end = (i..core.len())
                .find(|&j| !core[j].is_alphanumeric())
                .unwrap_or(core.len());
            let run = &core[i..run_end];
            let has_digit = run.iter().any(char::is_ascii_digit);
            if boundary && has_digit && run.len() >= 8 && run.iter().all(char::is_ascii_hexdigit) {
                out.push_str("<hex>");
                i = run_end;
                continue;
            }
            if boundary && has_digit && run.len() >= 16 && run.iter().any(|c| c.is_alphabetic()) {
                out.push_str("<id>");
                i = run_end;
                continue;
            }
            // Letters stay; each digit run (with inner separators: 1.5, 1,000) is a number.
            let mut j = i;
            while j < run_end {
                if core[j].is_ascii_digit() {
                    while j < core.len()
                        && (core[j].is_ascii_digit()
                            || (matches!(core[j], '.' | ',')
                                && core.get(j + 1).is_some_and(char::is_ascii_digit)
                                && j > 0
                                && core[j - 1].is_ascii_digit()))
                    {
                        j += 1;
                    }
                    out.push_str("<n>");
                } else {
                    out.push(core[j]);
                    j += 1;
                }
            }
            i = j.max(run_end);
            continue;
        }
        out.push(core[i]);
        i += 1;
    }
}

/// Length of a UUID (8-4-4-4-12 hex digits) at the start of `s`, not followed by a word
/// character.
fn uuid_at(s: &[char]) -> Option<usize> {
    const GROUPS: [usize; 5] = [8, 4, 4, 4, 12];
    let mut i = 0;
    for (n, len) in GROUPS.iter().enumerate() {
        if n > 0 {
            if s.get(i) != Some(&'-') {
                return None;
            }
            i += 1;
        }
        for _ in 0..*len {
            if !s.get(i).is_some_and(char::is_ascii_hexdigit) {
                return None;
            }
            i += 1;
        }
    }
    if s.get(i).is_some_and(|c| c.is_alphanumeric()) {
        return None;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        normalise_message(s)
    }

    #[test]
    fn emails_and_numbers_become_placeholders() {
        assert_eq!(
            n("mailbox ann.lee+x@example.co.uk does not exist (550)"),
            "mailbox <email> does not exist (<n>)"
        );
        assert_eq!(
            n("mailbox bob@example.com does not exist (551)"),
            n("mailbox carol_9@mail.example.org does not exist (4)")
        );
    }

    #[test]
    fn quoted_values_of_both_kinds_are_replaced() {
        assert_eq!(n("column 'user name' is null"), "column '<q>' is null");
        assert_eq!(n(r#"key "a b c" missing"#), r#"key "<q>" missing"#);
        assert_eq!(n("empty '' value"), "empty '<q>' value");
    }

    #[test]
    fn apostrophes_inside_words_are_not_quotes() {
        assert_eq!(
            n("doesn't exist, can't retry"),
            "doesn't exist, can't retry"
        );
        assert_eq!(n("O'Brien's order 7 failed"), "O'Brien's order <n> failed");
    }

    #[test]
    fn an_unpaired_quote_is_kept() {
        assert_eq!(n("it said 'hello and left"), "it said 'hello and left");
        assert_eq!(n("a \" b"), "a \" b");
    }

    #[test]
    fn urls_lose_everything_but_the_placeholder() {
        assert_eq!(
            n("GET https://api.example.com/v2/users/42?x=1 returned 503."),
            "GET <url> returned <n>."
        );
        assert_eq!(n("see (http://x.io/a)"), "see (<url>)");
        // "://" alone or a scheme-less host is not a URL.
        assert_eq!(n("odd ://x"), "odd ://x");
    }

    #[test]
    fn uuids_hex_and_long_ids() {
        assert_eq!(
            n("job 0192f3c4-5b6a-7c8d-9e0f-a1b2c3d4e5f6 not found"),
            "job <uuid> not found"
        );
        assert_eq!(n("fault at 0xDEADbeef01"), "fault at <hex>");
        assert_eq!(
            n("commit 9fceb02d0ae598e95dc970b74767f19372d61af8"),
            "commit <hex>"
        );
        assert_eq!(
            n("token 01HGW2BBG7QZ8XK3M9V5N4T6RA rejected"),
            "token <id> rejected"
        );
        // A plain word of hex letters without digits is a word.
        assert_eq!(n("deadbeefcafe"), "deadbeefcafe");
    }

    #[test]
    fn numbers_inside_words_and_with_separators() {
        assert_eq!(n("retry 3 of 10 after 1.5s"), "retry <n> of <n> after <n>s");
        assert_eq!(
            n("order-12345 over 1,000 items"),
            "order-<n> over <n> items"
        );
        assert_eq!(n("user42 at 12:30:01"), "user<n> at <n>:<n>:<n>");
    }

    #[test]
    fn whitespace_collapses_and_trims() {
        assert_eq!(n("  a \t\n b\r\n  c  "), "a b c");
        assert_eq!(n(""), "");
        assert_eq!(n("\u{0}x\u{7}y"), "x y");
    }

    #[test]
    fn the_same_failure_with_different_values_has_one_fingerprint() {
        let a = fingerprint(
            FailureReason::Failed,
            "transient",
            "email.send",
            "mailbox ann@example.com does not exist (attempt 3)",
        );
        let b = fingerprint(
            FailureReason::Failed,
            "transient",
            "email.send",
            "mailbox  bob@example.org   does not exist (attempt 17)",
        );
        assert_eq!(a, b);
        assert_eq!(a.as_str().len(), 16);
        assert!(
            a.as_str()
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }

    #[test]
    fn reason_kind_job_type_and_wording_each_split_groups() {
        let base = fingerprint(FailureReason::Failed, "transient", "email.send", "boom 1");
        for other in [
            fingerprint(FailureReason::Fatal, "transient", "email.send", "boom 1"),
            fingerprint(FailureReason::Failed, "fatal", "email.send", "boom 1"),
            fingerprint(FailureReason::Failed, "transient", "email.sms", "boom 1"),
            fingerprint(FailureReason::Failed, "transient", "email.send", "bang 1"),
        ] {
            assert_ne!(base, other);
        }
    }

    #[test]
    fn only_the_stored_length_of_a_message_counts() {
        let long = "x".repeat(FINGERPRINT_MESSAGE_CHARS);
        let a = fingerprint(FailureReason::Failed, "k", "t", &format!("{long} tail one"));
        let b = fingerprint(
            FailureReason::Failed,
            "k",
            "t",
            &format!("{long} other tail"),
        );
        assert_eq!(a, b);
    }

    #[test]
    fn head_then_job_type_is_the_whole_fingerprint() {
        let head = FingerprintHead::new(FailureReason::Zombie, "zombie", "heartbeat lost 5");
        assert_eq!(
            head.for_job_type("report"),
            fingerprint(
                FailureReason::Zombie,
                "zombie",
                "report",
                "heartbeat lost 77"
            )
        );
        assert!(head.as_str().starts_with("fp1\u{1f}"));
    }

    #[test]
    fn the_hash_is_sha256_of_utf16le_like_sql_server_hashbytes() {
        // Pinned values from an independent SHA-256 (Python's hashlib over the UTF-16LE
        // bytes, which is what HASHBYTES('SHA2_256', CAST(N'…' AS VARBINARY(MAX))) hashes):
        // a change of encoding, digest or head layout breaks here, not silently on one store.
        let empty = FingerprintHead(String::new());
        assert_eq!(empty.for_job_type("abc").as_str(), "13e228567e8249fc");
        // Non-BMP characters go as surrogate pairs, as NVARCHAR stores them.
        assert_eq!(empty.for_job_type("\u{1f600}").as_str(), "81c96284b596ed31");
        assert_eq!(
            fingerprint(
                FailureReason::Failed,
                "transient",
                "email.send",
                "mailbox ann@example.com does not exist"
            )
            .as_str(),
            "c37e2d7af4e47395"
        );
    }

    #[test]
    fn fingerprints_parse_case_insensitively_and_reject_junk() {
        let f: Fingerprint = "00AB12cd34EF5678".parse().unwrap();
        assert_eq!(f.as_str(), "00ab12cd34ef5678");
        for bad in [
            "",
            "abc",
            "00ab12cd34ef567g",
            "00ab12cd34ef56789",
            "' OR 1=1 --",
        ] {
            assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
        }
        let json = serde_json::to_string(&f).unwrap();
        assert_eq!(json, "\"00ab12cd34ef5678\"");
        assert!(serde_json::from_str::<Fingerprint>("\"nope\"").is_err());
    }
}
