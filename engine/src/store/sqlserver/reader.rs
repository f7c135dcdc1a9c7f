//! Reading a statement's answer against its declaration (`queries::Reads`). This is the only
//! place that reads a `QueryStream`: it walks the stream's own metadata, so it never depends
//! on how a driver groups result sets (tiberius 0.12's `into_results()` drops an empty set
//! that follows another, so "the n-th set" is not a thing to rely on). An answer of another
//! shape — a second set, other columns, no set where rows were declared — is an error that
//! names the statement, not rows read as something they are not.

use futures::TryStreamExt;
use tiberius::{QueryItem, QueryStream, Row};

use super::pool::Fault;
use super::queries::Reads;
use crate::error::StoreError;

fn shape_error(statement: &'static str, problem: String) -> Fault {
    Fault::Store(StoreError::Database {
        operation: statement,
        message: format!(
            "the answer of statement {statement} does not match its declaration: {problem}"
        ),
        transient: false,
    })
}

/// Read a whole answer. The stream is always drained, so the connection is left ready for
/// its next statement even when the shape is wrong.
pub async fn read_declared(
    statement: &'static str,
    reads: Reads,
    mut stream: QueryStream<'_>,
) -> Result<Vec<Row>, Fault> {
    let mut rows = Vec::new();
    let mut sets = 0usize;
    let mut problem: Option<String> = None;
    while let Some(item) = stream.try_next().await? {
        match item {
            QueryItem::Metadata(meta) => {
                sets += 1;
                let columns: Vec<&str> = meta.columns().iter().map(|c| c.name()).collect();
                let wrong = match reads {
                    Reads::Nothing => Some(format!(
                        "declared to send nothing, it sent a result set ({})",
                        columns.join(", ")
                    )),
                    Reads::Rows(_) if sets > 1 => Some(format!(
                        "it sent a result set #{sets} ({}); one was declared",
                        columns.join(", ")
                    )),
                    Reads::Rows(want) if columns != want => Some(format!(
                        "it sent ({}), the caller reads ({})",
                        columns.join(", "),
                        want.join(", ")
                    )),
                    Reads::Rows(_) => None,
                };
                if problem.is_none() {
                    problem = wrong;
                }
            }
            QueryItem::Row(row) => {
                if sets == 1 {
                    rows.push(row);
                }
            }
        }
    }
    if let (Reads::Rows(want), 0) = (reads, sets) {
        problem.get_or_insert_with(|| {
            format!(
                "the caller reads ({}) but it sent no result set (an OUTPUT … INTO a table \
                 variable needs a SELECT from it)",
                want.join(", ")
            )
        });
    }
    match problem {
        Some(p) => Err(shape_error(statement, p)),
        None => Ok(rows),
    }
}
