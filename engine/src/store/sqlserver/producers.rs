//! Writing new jobs into the hot pillar, all through the `[enqueue_batch]` procedure
//! (migration 0002): the request JSON it reads, the answer it sends, the store's enqueue, and
//! enqueue on a caller's own connection, inside the caller's transaction ("commit my order and
//! enqueue its e-mail job, or neither").

use futures::io::{AsyncRead, AsyncWrite};
use serde::Serialize;
use tiberius::Row;

use super::SqlServerStore;
use super::connection::SchemaName;
use super::pool::{self, Fault};
use super::queries;
use super::reader;
use super::rows::{self, id_from_text, json_time, req_str};
use super::wire;
use crate::error::{StoreError, StoreResult};
use crate::model::{Continuation, EnqueueOutcome, EnqueueRequest, JobId, UniqueState};
use crate::validation;

/// One request as `[enqueue_batch]` reads it (README, "Enqueue inside your own transaction").
#[derive(Serialize)]
struct JobJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    queue: &'a str,
    job_type: &'a str,
    /// Not JSON: as a string, for `[enqueue_batch]` to refuse with its message.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a str>,
    /// JSON: the one element of an array (`rows::JsonText`).
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_in_array: Option<[&'a serde_json::value::RawValue; 1]>,
    tags: &'a [String],
    priority: i32,
    idempotency_key: Option<&'a str>,
    correlation_id: Option<&'a str>,
    created_by: Option<&'a str>,
    scheduled_at: Option<String>,
    delay_ms: Option<u64>,
    expires_at: Option<String>,
    max_attempts: Option<u32>,
    continuation: Option<&'a Continuation>,
    #[serde(skip_serializing_if = "Option::is_none")]
    unique_for_ms: Option<u64>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    unique_states: &'a [UniqueState],
    /// Read by `[enqueue_batch]` from schema version 10 on.
    #[serde(skip_serializing_if = "Option::is_none")]
    trace_context: Option<&'a str>,
}

/// The `trace_context` columns are `NVARCHAR(1024)`: the engine's rule (at most
/// `trace::MAX_CONTEXT_CHARS` bytes of UTF-8, so as many UTF-16 code units at most) keeps every
/// context the operations layer lets through within them.
const _: () = assert!(crate::trace::MAX_CONTEXT_CHARS <= 1024);

fn utc(t: crate::model::Timestamp) -> String {
    format!("{}Z", json_time(t))
}

/// The JSON array for `[enqueue_batch]`. With `ids`, each job gets its id from the caller (a
/// retry then finds the rows it already wrote); without, the procedure makes UUID v7 ids.
/// The requests are the validated ones of the operations layer or of [`enqueue_batch_in`].
pub(super) fn request_json(reqs: &[EnqueueRequest], ids: Option<&[JobId]>) -> StoreResult<String> {
    let jobs: Vec<JobJson<'_>> = reqs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            (
                i,
                r,
                rows::JsonText::of(validation::normalize_payload(&r.payload)),
            )
        })
        .map(|(i, r, payload)| JobJson {
            id: ids.and_then(|ids| ids.get(i)).map(|id| rows::id_text(*id)),
            queue: &r.queue,
            job_type: &r.job_type,
            payload: payload.text(),
            payload_in_array: payload.in_array(),
            tags: &r.tags,
            priority: r.priority,
            idempotency_key: r.idempotency_key.as_deref(),
            correlation_id: r.correlation_id.as_deref(),
            created_by: r.created_by.as_deref(),
            scheduled_at: r.scheduled_at.map(utc),
            // Within `validation::MAX_DELAY_MS` (the operations layer refuses more), which
            // DATEADD's int of seconds holds.
            delay_ms: r.delay_ms,
            expires_at: r.expires_at.map(utc),
            // Within `validation::MAX_STORED_INT` (the operations layer refuses more).
            max_attempts: r.max_attempts,
            continuation: r.continuation.as_ref(),
            unique_for_ms: r.unique_for_ms,
            unique_states: &r.unique_states,
            trace_context: r.trace_context.as_deref(),
        })
        .collect();
    rows::to_json(&jobs)
}

/// The procedure's answer, one row per request (id, created, ord), in request order.
fn outcomes(answer: &[Row], requests: usize) -> Result<Vec<EnqueueOutcome>, Fault> {
    let mut outcomes = vec![None; requests];
    for row in answer {
        let ord = usize::try_from(rows::req_int(row, "ord")?).unwrap_or(usize::MAX);
        let outcome = EnqueueOutcome {
            id: id_from_text(&req_str(row, "id")?)?,
            created: rows::req_bool(row, "created")?,
        };
        match outcomes.get_mut(ord) {
            Some(slot) => *slot = Some(outcome),
            None => return Err(rows::corrupt(format!("enqueue answered for request {ord}"))),
        }
    }
    outcomes
        .into_iter()
        .enumerate()
        .map(|(i, o)| o.ok_or_else(|| rows::corrupt(format!("enqueue skipped request {i}"))))
        .collect()
}

/// Enqueue one job on the caller's own connection, inside whatever transaction the caller
/// has open on it: nothing is visible to workers until the caller commits, and a rollback
/// leaves nothing behind (counters included). Other deck processes pick the job up within
/// their poll interval after the commit.
///
/// `schema` is deck's schema (default `deck`). The request is validated like every enqueue
/// (`StoreError::Invalid`, nothing sent). Nothing is retried here: a failure is the caller's
/// to handle, and after a failure past validation the caller's transaction is doomed
/// (`XACT_ABORT`) and must be rolled back.
///
/// ```no_run
/// # async fn demo<S>(client: &mut tiberius::Client<S>) -> Result<(), Box<dyn std::error::Error>>
/// # where S: futures::AsyncRead + futures::AsyncWrite + Unpin + Send {
/// use deck_engine::EnqueueRequest;
/// client.simple_query("BEGIN TRANSACTION").await?.into_results().await?;
/// // ... the application's own writes on the same connection ...
/// let job = deck_engine::store::sqlserver::enqueue_in(
///     client,
///     "deck",
///     EnqueueRequest::new("emails", "send_receipt", r#"{"order":42}"#),
/// )
/// .await?;
/// client.simple_query("COMMIT TRANSACTION").await?.into_results().await?;
/// # let _ = job; Ok(()) }
/// ```
pub async fn enqueue_in<S>(
    client: &mut tiberius::Client<S>,
    schema: &str,
    req: EnqueueRequest,
) -> StoreResult<EnqueueOutcome>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    single_outcome(enqueue_batch_in(client, schema, vec![req]).await?)
}

/// [`enqueue_in`] for many jobs at once (at most 10,000), all or nothing; outcomes in
/// request order.
pub async fn enqueue_batch_in<S>(
    client: &mut tiberius::Client<S>,
    schema: &str,
    reqs: Vec<EnqueueRequest>,
) -> StoreResult<Vec<EnqueueOutcome>>
where
    S: AsyncRead + AsyncWrite + Unpin + Send,
{
    let schema = SchemaName::parse(schema)?;
    validation::validate_batch(&reqs)?;
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    // No ids from here: nothing is retried, so the procedure's UUID v7 ids serve.
    let json = request_json(&reqs, None)?;
    let sql = queries::ENQUEUE.sql.replace("{schema}", schema.as_str());
    let result: Result<Vec<EnqueueOutcome>, Fault> = async {
        let stream = wire::query(client, &sql, &[&json]).await?;
        let answer =
            reader::read_declared(queries::ENQUEUE.name, queries::ENQUEUE.reads, stream).await?;
        outcomes(&answer, reqs.len())
    }
    .await;
    result.map_err(|fault| {
        let transience = pool::classify(&fault, false);
        pool::into_store_error("enqueue", fault, transience)
    })
}

/// The store's enqueue of one job: [`enqueue_batch`] of one.
pub(super) async fn enqueue(
    store: &SqlServerStore,
    req: EnqueueRequest,
) -> StoreResult<EnqueueOutcome> {
    single_outcome(enqueue_batch(store, vec![req]).await?)
}

/// The store's enqueue: one `[enqueue_batch]` call, re-sent after any transient fault.
pub(super) async fn enqueue_batch(
    store: &SqlServerStore,
    reqs: Vec<EnqueueRequest>,
) -> StoreResult<Vec<EnqueueOutcome>> {
    if reqs.is_empty() {
        return Ok(Vec::new());
    }
    // Ids are fixed before the first attempt: a retry after an ambiguous failure finds
    // the rows it already wrote instead of writing them twice.
    let ids: Vec<JobId> = reqs.iter().map(|_| JobId::new()).collect();
    let json = request_json(&reqs, Some(&ids))?;
    let answer = store
        .rows_of_keyed("enqueue", &queries::ENQUEUE, &[&json])
        .await?;
    outcomes(&answer, reqs.len()).map_err(|f| store.fault("enqueue", f))
}

/// The outcome of an enqueue of one job.
fn single_outcome(outcomes: Vec<EnqueueOutcome>) -> StoreResult<EnqueueOutcome> {
    outcomes
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::database("enqueue", "the database returned no outcome", false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ContinuationTrigger;

    #[test]
    fn requests_travel_as_the_procedure_reads_them() {
        let id = JobId::new();
        let mut req = EnqueueRequest::new("emails", "send", "");
        req.tags = vec!["a".into(), "b".into()];
        req.priority = 5;
        req.delay_ms = Some(1500);
        req.continuation = Some(Continuation {
            queue: "audit".into(),
            job_type: "log".into(),
            trigger: ContinuationTrigger::OnFailure,
        });
        let json = request_json(std::slice::from_ref(&req), Some(&[id])).unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let job = &v[0];
        assert_eq!(job["id"], rows::id_text(id));
        assert_eq!(job["queue"], "emails");
        // An empty payload means JSON null, as on every enqueue path.
        assert_eq!(job["payload_in_array"], serde_json::json!([null]));
        assert!(job.get("payload").is_none());
        assert_eq!(job["tags"], serde_json::json!(["a", "b"]));
        assert_eq!(job["priority"], 5);
        assert_eq!(job["delay_ms"], 1500);
        assert!(job["scheduled_at"].is_null());
        assert_eq!(
            job["continuation"],
            serde_json::json!({"queue": "audit", "job_type": "log", "trigger": "on_failure"})
        );
        // Without ids the procedure makes them; without a trace context the field is left out.
        let json = request_json(std::slice::from_ref(&req), None).unwrap();
        assert!(!json.contains("\"id\""), "{json}");
        assert!(!json.contains("trace_context"), "{json}");
    }

    #[test]
    fn json_payloads_travel_in_an_array_and_anything_else_as_text() {
        let reqs: Vec<EnqueueRequest> = [
            r#" {"order": "4\"2"}"#,
            "[1,2]",
            "42",
            r#""hi""#,
            "",
            "{not json",
        ]
        .into_iter()
        .map(|p| EnqueueRequest::new("q", "t", p))
        .collect();
        let json = request_json(&reqs, None).unwrap();
        // The object is written as sent, not re-encoded: SQL Server stores that text.
        assert!(
            json.contains(r#""payload_in_array":[{"order": "4\"2"}]"#),
            "{json}"
        );
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v[1]["payload_in_array"], serde_json::json!([[1, 2]]));
        assert_eq!(v[2]["payload_in_array"], serde_json::json!([42]));
        assert_eq!(v[3]["payload_in_array"], serde_json::json!(["hi"]));
        assert_eq!(v[4]["payload_in_array"], serde_json::json!([null]));
        // Not JSON: as text, for the procedure to refuse with its own message.
        assert_eq!(v[5]["payload"], "{not json");
        assert!(v[5].get("payload_in_array").is_none());
    }

    #[test]
    fn the_trace_context_travels() {
        let mut req = EnqueueRequest::new("q", "t", "{}");
        req.trace_context =
            Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01;vendor=abc".into());
        let v: serde_json::Value =
            serde_json::from_str(&request_json(std::slice::from_ref(&req), None).unwrap()).unwrap();
        assert_eq!(v[0]["trace_context"], req.trace_context.clone().unwrap());
    }

    #[test]
    fn times_are_utc_iso_8601() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-05-01T12:00:00.123456Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        assert_eq!(utc(t), "2026-05-01T12:00:00.123456Z");
    }
}
