//! Runs a bulk-by-filter action in the background through the operations layer (which
//! steps through the matches and audits the total), so the operator can watch its progress
//! page.

use deck_engine::{BulkAction, JobFilter, Pillar};
use tracing::Instrument;

use crate::state::Console;
use crate::telemetry_view::EventLevel;

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
                format!(
                    "{actor}: dlq.bulk_{} started ({filter_url}, cap {cap})",
                    action.as_str()
                ),
            );
            let report = console
                .ops()
                .bulk_by_filter(&actor, action, Pillar::Dlq, &filter, cap, |done| {
                    console.update_run(&run_id, |r| r.done = done)
                })
                .await;
            let (done, error) = match report {
                Ok(report) => (report.done, report.stopped),
                Err(e) => {
                    tracing::error!(error = %e, "bulk run did not finish cleanly");
                    (
                        console.run(&run_id).map(|r| r.done).unwrap_or(0),
                        Some(e.to_string()),
                    )
                }
            };
            console.update_run(&run_id, |r| {
                r.done = done;
                r.finished = true;
                r.error = error;
            });
        }
        .instrument(span),
    );
}
