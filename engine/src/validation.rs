//! The input rules, stated once: names, payloads, tags, batches, edits, queue patches,
//! settings ranges and the integer widths the stores keep. The operations layer checks every
//! write with these before anything is written, so the console, the JSON API and Rust callers
//! refuse the same input with the same message; the API's document publishes the same
//! numbers.

pub use crate::error::ValidationError;
use crate::model::{
    EngineSettings, EnqueueRequest, JobEdit, MAX_RATE_PERIOD_SECS, MAX_UNIQUE_FOR_MS, QueuePatch,
};

/// Largest payload (and default largest result), in bytes of JSON text.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Longest queue name, type key, idempotency key, correlation id or created-by.
pub const MAX_NAME_CHARS: usize = 255;
/// Longest tag list, counted as the tags joined with commas.
pub const MAX_TAGS_CHARS: usize = 1000;
/// Largest batch accepted by one enqueue call.
pub const MAX_BATCH: usize = 10_000;
/// The most jobs one bulk-by-filter run may touch; more takes another run.
pub const MAX_BULK_CAP: u32 = 100_000;
/// Largest value of an integer a store keeps (`max_workers`, timeouts, lag thresholds,
/// `max_attempts`, rate-limit starts): both stores keep these as 32-bit signed integers
/// (SQL Server `INT`), so a larger one could not be stored as given.
pub const MAX_STORED_INT: u32 = i32::MAX as u32;
/// Largest `delay_ms` (about 63 years): SQL Server adds the delay as `INT` seconds, so this is
/// the longest delay both stores keep exactly.
pub const MAX_DELAY_MS: u64 = 2_000_000_000_000;

/// Longest host name an instance row keeps.
pub const MAX_HOST_CHARS: usize = 255;
/// Longest version (an external worker's agent) an instance row keeps.
pub const MAX_VERSION_CHARS: usize = 100;

/// `text` cut to `max` characters: for what describes a process (host, version), which a
/// registration must not fail over.
pub fn clipped(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

/// Queue names, type keys and the like: 1–255 characters, no control characters, no
/// surrounding whitespace.
pub fn validate_name(field: &str, value: &str) -> Result<(), ValidationError> {
    if value.is_empty() {
        return Err(ValidationError::new(
            field,
            "is empty",
            format!("give a {field} of 1 to {MAX_NAME_CHARS} characters"),
        ));
    }
    let chars = value.chars().count();
    if chars > MAX_NAME_CHARS {
        return Err(ValidationError::new(
            field,
            format!("is {chars} characters long"),
            format!("use at most {MAX_NAME_CHARS} characters"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(ValidationError::new(
            field,
            "contains control characters",
            "remove tabs, newlines and other control characters",
        ));
    }
    if value.trim() != value {
        return Err(ValidationError::new(
            field,
            "has leading or trailing whitespace",
            "trim the value",
        ));
    }
    Ok(())
}

// The name rules again as regular expressions, for documents that state them (the API's
// OpenAPI schemas); the API's tests hold each against its `validate_*` function.

/// Control characters (Unicode `Cc`): what `char::is_control` refuses.
const CONTROL: &str = r"\u0000-\u001F\u007F-\u009F";
/// The whitespace `str::trim` strips that is not already a control character.
const SPACE: &str = r" \u00A0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000";

/// Queue names, type keys, idempotency keys, correlation ids, created-by: no control
/// characters, no leading or trailing whitespace ([`validate_name`]). Written
/// without look-around so ECMA-262, Python's `re` and Rust's `regex` read it alike.
pub fn name_pattern() -> String {
    format!("^[^{CONTROL}{SPACE}]([^{CONTROL}]*[^{CONTROL}{SPACE}])?$")
}

/// Free text shown to people (a batch's description): no control characters.
pub fn text_pattern() -> String {
    format!("^[^{CONTROL}]*$")
}

/// One tag: like a name, and no commas either (tags are stored comma-joined).
pub fn tag_pattern() -> String {
    format!("^[^{CONTROL}{SPACE},]([^{CONTROL},]*[^{CONTROL}{SPACE},])?$")
}

/// A schedule's name (`schedule::validate_definition`): a name other than `.` and `..`, path segments
/// browsers and routers resolve (the schedule's URL would point elsewhere). Spelled out by
/// length, as one, two, or three and more characters, again without look-around.
pub fn schedule_name_pattern() -> String {
    let edge = format!("[^{CONTROL}{SPACE}]");
    let edge_not_dot = format!("[^{CONTROL}{SPACE}.]");
    let inner = format!("[^{CONTROL}]");
    format!("^({edge_not_dot}|{edge_not_dot}{edge}|\\.{edge_not_dot}|{edge}{inner}+{edge})$")
}

pub fn validate_optional_name(field: &str, value: Option<&str>) -> Result<(), ValidationError> {
    value.map_or(Ok(()), |v| validate_name(field, v))
}

/// Tags: each non-empty, without commas or control characters, at most 1000 characters
/// in total (joined with commas).
pub fn validate_tags(tags: &[String]) -> Result<(), ValidationError> {
    for (i, tag) in tags.iter().enumerate() {
        let field = format!("tags[{i}]");
        if tag.is_empty() || tag.trim() != tag {
            return Err(ValidationError::new(
                field,
                "is empty or has surrounding whitespace",
                "give non-empty, trimmed tags",
            ));
        }
        if tag.contains(',') || tag.chars().any(char::is_control) {
            return Err(ValidationError::new(
                field,
                "contains a comma or control character",
                "use tags without commas",
            ));
        }
    }
    let joined: usize =
        tags.iter().map(|t| t.chars().count()).sum::<usize>() + tags.len().saturating_sub(1);
    if joined > MAX_TAGS_CHARS {
        return Err(ValidationError::new(
            "tags",
            format!("are {joined} characters long together"),
            format!("keep all tags together within {MAX_TAGS_CHARS} characters"),
        ));
    }
    Ok(())
}

/// Payloads and results: valid JSON text within the size limit.
pub fn validate_json(field: &str, text: &str, max_bytes: usize) -> Result<(), ValidationError> {
    if text.len() > max_bytes {
        return Err(ValidationError::new(
            field,
            format!("is {} bytes", text.len()),
            format!(
                "keep it within {max_bytes} bytes; store large data elsewhere and pass a reference"
            ),
        ));
    }
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(ValidationError::new(
            field,
            format!("is not valid JSON: {e}"),
            "send JSON text, e.g. {\"order\": 42}",
        ));
    }
    Ok(())
}

/// An integer a store keeps as `INT`: at most `MAX_STORED_INT`. The least value is only named
/// in the help; a zero where none is allowed is refused with its own advice.
pub fn validate_stored_int(
    field: &str,
    value: Option<u32>,
    least: u32,
) -> Result<(), ValidationError> {
    match value {
        Some(v) if v > MAX_STORED_INT => Err(ValidationError::new(
            field,
            format!("is {v}"),
            format!("give {least} to {MAX_STORED_INT}"),
        )),
        _ => Ok(()),
    }
}

/// A delay both stores keep exactly: at most `MAX_DELAY_MS`.
pub fn validate_delay(field: &str, value: Option<u64>) -> Result<(), ValidationError> {
    match value {
        Some(v) if v > MAX_DELAY_MS => Err(ValidationError::new(
            field,
            format!("is {v} ms"),
            format!(
                "give at most {MAX_DELAY_MS} ms, about 63 years; use scheduled_at for a fixed time"
            ),
        )),
        _ => Ok(()),
    }
}

/// The whole envelope of an enqueue. An empty payload is normalised to `null` by the caller
/// (`normalize_payload`).
pub fn validate_enqueue(req: &EnqueueRequest) -> Result<(), ValidationError> {
    validate_name("queue", &req.queue)?;
    validate_name("job_type", &req.job_type)?;
    validate_json(
        "payload",
        normalize_payload(&req.payload),
        MAX_PAYLOAD_BYTES,
    )?;
    validate_tags(&req.tags)?;
    validate_optional_name("idempotency_key", req.idempotency_key.as_deref())?;
    validate_optional_name("correlation_id", req.correlation_id.as_deref())?;
    validate_optional_name("created_by", req.created_by.as_deref())?;
    crate::trace::validate("trace_context", req.trace_context.as_deref())?;
    if req.scheduled_at.is_some() && req.delay_ms.is_some() {
        return Err(ValidationError::new(
            "delay_ms",
            "was given together with scheduled_at",
            "give either a delay or a schedule, not both",
        ));
    }
    if req.max_attempts == Some(0) {
        return Err(ValidationError::new(
            "max_attempts",
            "is 0",
            "give at least 1 (the first run counts)",
        ));
    }
    validate_stored_int("max_attempts", req.max_attempts, 1)?;
    validate_delay("delay_ms", req.delay_ms)?;
    validate_unique_window(req)?;
    if let Some(c) = &req.continuation {
        validate_name("continuation.queue", &c.queue)?;
        validate_name("continuation.job_type", &c.job_type)?;
    }
    Ok(())
}

fn validate_unique_window(req: &EnqueueRequest) -> Result<(), ValidationError> {
    match req.unique_for_ms {
        None if !req.unique_states.is_empty() => Err(ValidationError::new(
            "unique_states",
            "was given without unique_for_ms",
            "say how long the key stays taken, e.g. \"unique_for_ms\": 3600000 for an hour",
        )),
        Some(_) if req.idempotency_key.is_none() => Err(ValidationError::new(
            "unique_for_ms",
            "was given without an idempotency_key",
            "give the key that must stay unique, e.g. \"idempotency_key\": \"invoice-42\"",
        )),
        Some(0) => Err(ValidationError::new(
            "unique_for_ms",
            "is 0",
            "give a window of at least 1 ms, or leave it out for uniqueness among active jobs",
        )),
        Some(ms) if ms > MAX_UNIQUE_FOR_MS => Err(ValidationError::new(
            "unique_for_ms",
            format!("is {ms} ms, more than a year"),
            format!("keep the window within {MAX_UNIQUE_FOR_MS} ms (366 days)"),
        )),
        _ => Ok(()),
    }
}

pub fn validate_batch(reqs: &[EnqueueRequest]) -> Result<(), ValidationError> {
    if reqs.len() > MAX_BATCH {
        return Err(ValidationError::new(
            "jobs",
            format!("holds {} jobs", reqs.len()),
            format!("send at most {MAX_BATCH} jobs per batch"),
        ));
    }
    for (i, req) in reqs.iter().enumerate() {
        validate_enqueue(req).map_err(|e| ValidationError {
            field: format!("jobs[{i}].{}", e.field),
            ..e
        })?;
    }
    Ok(())
}

pub fn validate_edit(edit: &JobEdit) -> Result<(), ValidationError> {
    if let Some(payload) = &edit.payload {
        validate_json("payload", normalize_payload(payload), MAX_PAYLOAD_BYTES)?;
    }
    if let Some(tags) = &edit.tags {
        validate_tags(tags)?;
    }
    validate_optional_name("queue", edit.queue.as_deref())?;
    Ok(())
}

/// The ranges engine-wide settings may take, as `(field, what an operator calls it, least,
/// most)`: `validate_settings` holds every door to them.
pub const SETTING_RANGES: [(&str, &str, u64, u64); 9] = [
    ("worker_count", "workers", 1, 10_000),
    ("retry.max_attempts", "max attempts", 1, 1_000),
    ("retry.base_delay_ms", "base delay (ms)", 0, 86_400_000),
    ("retry.max_delay_ms", "max delay (ms)", 0, 7 * 86_400_000),
    ("retry.jitter_ms", "jitter (ms)", 0, 3_600_000),
    ("retry.max_job_age_secs", "max job age (s)", 1, 365 * 86_400),
    (
        "retention.archive_days",
        "archive retention (days)",
        1,
        3_650,
    ),
    (
        "retention.dlq_days",
        "dead-letter retention (days)",
        1,
        3_650,
    ),
    (
        "retention.metrics_days",
        "metrics retention (days)",
        1,
        3_650,
    ),
];

/// Every setting within its range (`SETTING_RANGES`); all problems in one message.
pub fn validate_settings(settings: &EngineSettings) -> Result<(), ValidationError> {
    let values = [
        u64::from(settings.worker_count),
        u64::from(settings.retry.max_attempts),
        settings.retry.base_delay_ms,
        settings.retry.max_delay_ms,
        settings.retry.jitter_ms,
        settings.retry.max_job_age_secs,
        u64::from(settings.retention.archive_days),
        u64::from(settings.retention.dlq_days),
        u64::from(settings.retention.metrics_days),
    ];
    let mut problems: Vec<(&str, String)> = SETTING_RANGES
        .iter()
        .zip(values)
        .filter(|((_, _, least, most), v)| !(*least..=*most).contains(v))
        .map(|((field, label, least, most), v)| {
            (
                *field,
                format!("{label} must be from {least} to {most}, got {v}"),
            )
        })
        .collect();
    // The cap would silently replace every delay, the first included: almost surely a typo.
    if settings.retry.base_delay_ms > settings.retry.max_delay_ms {
        problems.push((
            "retry.base_delay_ms",
            format!(
                "base delay ({} ms) must not be larger than max delay ({} ms)",
                settings.retry.base_delay_ms, settings.retry.max_delay_ms
            ),
        ));
    }
    match problems.first() {
        None => Ok(()),
        Some((field, _)) => Err(ValidationError::new(
            *field,
            problems
                .iter()
                .map(|(_, p)| p.as_str())
                .collect::<Vec<_>>()
                .join("; "),
            "nothing was saved; correct these and save again",
        )),
    }
}

pub fn validate_queue_patch(patch: &QueuePatch) -> Result<(), ValidationError> {
    if patch.max_workers == Some(Some(0)) {
        return Err(ValidationError::new(
            "max_workers",
            "is 0",
            "pause the queue instead, or give at least 1",
        ));
    }
    for (field, value) in [
        ("zombie_timeout_secs", patch.zombie_timeout_secs),
        ("execution_timeout_secs", patch.execution_timeout_secs),
    ] {
        if value == Some(Some(0)) {
            return Err(ValidationError::new(
                field,
                "is 0",
                "give at least 1 second, or clear it to use the default",
            ));
        }
    }
    if let Some(Some(limit)) = patch.rate_limit {
        if limit.starts == 0 {
            return Err(ValidationError::new(
                "rate_limit.starts",
                "is 0",
                "pause the queue instead, or allow at least 1 start per period",
            ));
        }
        if limit.per_secs == 0 || limit.per_secs > MAX_RATE_PERIOD_SECS {
            return Err(ValidationError::new(
                "rate_limit.per_secs",
                format!("is {}", limit.per_secs),
                format!(
                    "give a period from 1 to {MAX_RATE_PERIOD_SECS} seconds, e.g. 60 for a minute"
                ),
            ));
        }
    }
    for (field, value, least) in [
        ("max_workers", patch.max_workers, 1),
        ("zombie_timeout_secs", patch.zombie_timeout_secs, 1),
        ("execution_timeout_secs", patch.execution_timeout_secs, 1),
        ("lag_warn_secs", patch.lag_warn_secs, 0),
        ("lag_crit_secs", patch.lag_crit_secs, 0),
        (
            "rate_limit.starts",
            patch.rate_limit.map(|l| l.map(|l| l.starts)),
            1,
        ),
    ] {
        validate_stored_int(field, value.flatten(), least)?;
    }
    // Whether the thresholds cross (in the patch, or with the queue's stored one) is a
    // conflict with the queue's state, checked by `Operations::update_queue`.
    Ok(())
}

/// An empty payload means JSON `null`.
pub fn normalize_payload(payload: &str) -> &str {
    if payload.trim().is_empty() {
        "null"
    } else {
        payload
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> EnqueueRequest {
        EnqueueRequest::new("emails", "send_welcome", r#"{"user":1}"#)
    }

    #[test]
    fn accepts_a_normal_request() {
        assert_eq!(validate_enqueue(&req()), Ok(()));
    }

    #[test]
    fn empty_payload_is_null() {
        let r = EnqueueRequest {
            payload: String::new(),
            ..req()
        };
        assert_eq!(validate_enqueue(&r), Ok(()));
        assert_eq!(normalize_payload("  "), "null");
    }

    #[test]
    fn rejects_bad_names() {
        let e = validate_enqueue(&EnqueueRequest {
            queue: String::new(),
            ..req()
        })
        .unwrap_err();
        assert_eq!(e.field, "queue");
        let e = validate_enqueue(&EnqueueRequest {
            job_type: "x".repeat(256),
            ..req()
        })
        .unwrap_err();
        assert_eq!(e.field, "job_type");
        assert!(e.problem.contains("256"));
        assert!(
            validate_enqueue(&EnqueueRequest {
                job_type: "x".repeat(255),
                ..req()
            })
            .is_ok()
        );
        let e = validate_enqueue(&EnqueueRequest {
            queue: "a\nb".into(),
            ..req()
        })
        .unwrap_err();
        assert!(e.problem.contains("control"));
        let e = validate_enqueue(&EnqueueRequest {
            queue: " a".into(),
            ..req()
        })
        .unwrap_err();
        assert!(e.problem.contains("whitespace"));
    }

    #[test]
    fn rejects_oversized_or_invalid_payload() {
        let big = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES));
        let e = validate_enqueue(&EnqueueRequest {
            payload: big,
            ..req()
        })
        .unwrap_err();
        assert_eq!(e.field, "payload");
        assert!(e.problem.contains("bytes"));
        let exactly = format!("\"{}\"", "x".repeat(MAX_PAYLOAD_BYTES - 2));
        assert!(
            validate_enqueue(&EnqueueRequest {
                payload: exactly,
                ..req()
            })
            .is_ok()
        );
        let e = validate_enqueue(&EnqueueRequest {
            payload: "{oops".into(),
            ..req()
        })
        .unwrap_err();
        assert!(e.problem.contains("not valid JSON"));
    }

    #[test]
    fn tag_limits() {
        let ok: Vec<String> = (0..100).map(|i| format!("t{i:07}")).collect(); // 100*8 + 99 = 899
        assert!(validate_tags(&ok).is_ok());
        let too_long: Vec<String> = (0..112).map(|i| format!("t{i:07}")).collect(); // 112*8 + 111 = 1007
        assert_eq!(validate_tags(&too_long).unwrap_err().field, "tags");
        assert_eq!(validate_tags(&["a,b".into()]).unwrap_err().field, "tags[0]");
        assert_eq!(
            validate_tags(&["ok".into(), "".into()]).unwrap_err().field,
            "tags[1]"
        );
    }

    #[test]
    fn schedule_and_delay_are_exclusive() {
        let r = EnqueueRequest {
            scheduled_at: Some(chrono::Utc::now()),
            delay_ms: Some(5),
            ..req()
        };
        assert_eq!(validate_enqueue(&r).unwrap_err().field, "delay_ms");
    }

    #[test]
    fn batch_errors_name_the_index() {
        let reqs = vec![
            req(),
            EnqueueRequest {
                queue: String::new(),
                ..req()
            },
        ];
        assert_eq!(validate_batch(&reqs).unwrap_err().field, "jobs[1].queue");
    }

    #[test]
    fn settings_outside_their_ranges_are_named_together() {
        assert!(validate_settings(&EngineSettings::default()).is_ok());
        let mut s = EngineSettings {
            worker_count: 0,
            ..EngineSettings::default()
        };
        s.retention.dlq_days = 4_000;
        let e = validate_settings(&s).unwrap_err();
        assert_eq!(e.field, "worker_count");
        assert!(
            e.problem.contains("workers must be from 1 to 10000, got 0"),
            "{e}"
        );
        assert!(e.problem.contains("dead-letter retention (days)"), "{e}");
    }

    #[test]
    fn a_base_delay_above_the_max_delay_is_refused() {
        let mut s = EngineSettings::default();
        s.retry.base_delay_ms = 60_000;
        s.retry.max_delay_ms = 1_000;
        let e = validate_settings(&s).unwrap_err();
        assert_eq!(e.field, "retry.base_delay_ms");
        assert!(
            e.problem.contains("must not be larger than max delay"),
            "{e}"
        );
        s.retry.max_delay_ms = 60_000;
        assert!(validate_settings(&s).is_ok());
    }

    #[test]
    fn queue_patch_limits() {
        let p = QueuePatch {
            max_workers: Some(Some(0)),
            ..Default::default()
        };
        assert_eq!(validate_queue_patch(&p).unwrap_err().field, "max_workers");
        assert!(
            validate_queue_patch(&QueuePatch {
                max_workers: Some(None),
                ..Default::default()
            })
            .is_ok()
        );
    }
}
