//! Runs a bulk-by-filter action in bounded chunks in the background, so the operator can
//! watch its progress page, and records the total in the audit log when it ends.

use deck_engine::{BulkAction, JobFilter, Pillar};
use tracing::Instrument;

use crate::state::Console;
use crate::telemetry_view::EventLevel;

/// Jobs per store call: each call is a few short transactions, so workers never wait long.
const CHUNK: u32 = 200;

pub fn spawn(
    console: Console,
    run_id: String,
    actor: String,
    action: BulkAction,
    filter: JobFilter,
    filter_url: String,
    cap: u32,
) {
    let span = tracing::info_span!("console.bulk_run", run = %run_id, action = action.as_str());
    tokio::spawn(
        async move {
            console.push_event(
                EventLevel::Action,
                format!("{actor}: dlq.bulk_{} started ({filter_url}, cap {cap})", action.as_str()),
            );
            let mut done: u64 = 0;
            let mut error = None;
            while done < u64::from(cap) {
                let chunk = CHUNK.min(cap - done as u32);
                match console
                    .store()
                    .bulk_by_filter(action, Pillar::Dlq, &filter, chunk)
                    .await
                {
                    Ok(0) => break,
                    Ok(n) => {
                        done += n;
                        console.update_run(&run_id, |r| r.done = done);
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "bulk run stopped");
                        error = Some(e.to_string());
                        break;
                    }
                }
            }
            let audit = console
                .record(
                    &actor,
                    &format!("dlq.bulk_{}", action.as_str()),
                    filter_url,
                    done,
                    Some(format!("cap {cap}{}", error.as_ref().map(|e| format!("; stopped: {e}")).unwrap_or_default())),
                )
                .await;
            if let Err(e) = audit {
                tracing::error!(error = %e, "bulk run finished but the audit entry could not be written");
                error.get_or_insert_with(|| format!("audit log write failed: {e}"));
            }
            console.update_run(&run_id, |r| {
                r.done = done;
                r.finished = true;
                r.error = error;
            });
        }
        .instrument(span),
    );
}
