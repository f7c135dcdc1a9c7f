//! Console job lists, bulk previews and bulk-by-filter selections: the only statements
//! assembled at run time. They are built from fixed fragments — table and column names come
//! from `match`es over enums (the sort whitelist), every value is a bound parameter — and read
//! committed data (no hints): an operator decides on what these show.
//!
//! Paging is keyset: `(sort key, id)` compared against the cursor row, `TOP (n + 1)` to learn
//! whether another page exists. Each list is answered by one of the `(column, id)` indexes.

use chrono::{DateTime, NaiveDateTime};
use tiberius::ToSql;

use super::connection::SchemaName;
use super::queries::{self, Reads};
use super::rows::to_sql_time;
use crate::error::{StoreError, StoreResult};
use crate::model::{JobId, Pillar};
use crate::query::{
    BulkAction, Cursor, JobFilter, JobQuery, JobSummary, PagePosition, SortColumn, SortDirection,
    Timing,
};
use crate::validation::ValidationError;
use uuid::Uuid;

/// A bound value of a dynamic statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Text(String),
    Int(i64),
    Time(NaiveDateTime),
    /// A job id: `BINARY(16)` in RFC 4122 order (`Param::id`).
    Bytes(Vec<u8>),
}

impl Param {
    pub fn id(id: JobId) -> Self {
        Param::Bytes(id.0.as_bytes().to_vec())
    }

    pub fn as_sql(&self) -> &dyn ToSql {
        match self {
            Param::Text(v) => v,
            Param::Int(v) => v,
            Param::Time(v) => v,
            Param::Bytes(v) => v,
        }
    }
}

/// A statement, its parameters (`@P1` … in order) and what its caller reads.
#[derive(Debug, Clone)]
pub struct Built {
    pub sql: String,
    pub params: Vec<Param>,
    pub reads: Reads,
}

impl Default for Built {
    fn default() -> Self {
        Built {
            sql: String::new(),
            params: Vec::new(),
            reads: Reads::Nothing,
        }
    }
}

impl Built {
    fn bind(&mut self, value: Param) -> String {
        self.params.push(value);
        format!("@P{}", self.params.len())
    }

    pub fn sql_params(&self) -> Vec<&dyn ToSql> {
        self.params.iter().map(Param::as_sql).collect()
    }
}

pub fn table(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "jobs_hot",
        Pillar::Archive => "jobs_archive",
        Pillar::Dlq => "jobs_dlq",
    }
}

pub fn read_columns(pillar: Pillar) -> &'static [&'static str] {
    match pillar {
        Pillar::Hot => queries::LIST_HOT_COLUMNS,
        Pillar::Archive => queries::LIST_ARCHIVE_COLUMNS,
        Pillar::Dlq => queries::LIST_DLQ_COLUMNS,
    }
}

pub fn preview_columns(pillar: Pillar) -> &'static [&'static str] {
    match pillar {
        Pillar::Hot => queries::PREVIEW_HOT_COLUMNS,
        Pillar::Archive => queries::PREVIEW_ARCHIVE_COLUMNS,
        Pillar::Dlq => queries::PREVIEW_DLQ_COLUMNS,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyKind {
    Time,
    Int,
    Text,
}

/// The whitelist: sort column → (SQL column, key kind).
fn sort_column(pillar: Pillar, column: SortColumn) -> (&'static str, KeyKind) {
    match column {
        SortColumn::CreatedAt => ("created_at", KeyKind::Time),
        SortColumn::ScheduledAt => ("scheduled_at", KeyKind::Time),
        SortColumn::FinishedAt if pillar == Pillar::Hot => ("created_at", KeyKind::Time),
        SortColumn::FinishedAt => ("finished_at", KeyKind::Time),
        SortColumn::Priority => ("priority", KeyKind::Int),
        SortColumn::Attempt => ("attempt", KeyKind::Int),
        SortColumn::Queue => ("queue", KeyKind::Text),
        SortColumn::JobType => ("job_type", KeyKind::Text),
    }
}

/// The cursor of a row for a sort column (timestamps as microseconds since the epoch).
pub fn cursor_for(job: &JobSummary, pillar: Pillar, column: SortColumn) -> Cursor {
    let key = match (column, pillar) {
        (SortColumn::CreatedAt, _) | (SortColumn::FinishedAt, Pillar::Hot) => {
            job.created_at.timestamp_micros().to_string()
        }
        (SortColumn::ScheduledAt, _) => job.scheduled_at.timestamp_micros().to_string(),
        (SortColumn::FinishedAt, _) => job
            .finished_at
            .unwrap_or(job.created_at)
            .timestamp_micros()
            .to_string(),
        (SortColumn::Priority, _) => job.priority.to_string(),
        (SortColumn::Attempt, _) => job.attempt.to_string(),
        (SortColumn::Queue, _) => job.queue.clone(),
        (SortColumn::JobType, _) => job.job_type.clone(),
    };
    Cursor { key, id: job.id }
}

fn bad_cursor(cursor: &Cursor) -> StoreError {
    StoreError::Invalid(ValidationError::new(
        "cursor",
        format!("{cursor} does not fit this sort"),
        "start again from the first page",
    ))
}

fn key_param(kind: KeyKind, cursor: &Cursor) -> StoreResult<Param> {
    match kind {
        KeyKind::Time => {
            let micros: i64 = cursor.key.parse().map_err(|_| bad_cursor(cursor))?;
            let t = DateTime::from_timestamp_micros(micros).ok_or_else(|| bad_cursor(cursor))?;
            Ok(Param::Time(to_sql_time(t)))
        }
        KeyKind::Int => Ok(Param::Int(
            cursor.key.parse().map_err(|_| bad_cursor(cursor))?,
        )),
        KeyKind::Text => Ok(Param::Text(cursor.key.clone())),
    }
}

/// `LIKE` pattern for a substring, with the pattern characters escaped (escape char `\`).
pub fn like_pattern(text: &str) -> String {
    let mut out = String::from("%");
    for c in text.chars() {
        if matches!(c, '\\' | '%' | '_' | '[') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// WHERE predicates for a filter on one pillar (joined with AND; `1 = 1` when empty).
/// Filters that do not apply to the pillar (status outside the hot table, reason outside the
/// DLQ, finish times on the hot table) are ignored, as the filter's documentation says.
pub fn filter_predicates(
    built: &mut Built,
    schema: &SchemaName,
    pillar: Pillar,
    filter: &JobFilter,
) -> String {
    let mut parts: Vec<String> = vec!["1 = 1".into()];
    if let Some(queue) = &filter.queue {
        let p = built.bind(Param::Text(queue.clone()));
        parts.push(format!("queue = {p}"));
    }
    if let Some(job_type) = &filter.job_type {
        let p = built.bind(Param::Text(job_type.clone()));
        parts.push(format!("job_type = {p}"));
    }
    if pillar == Pillar::Hot
        && let Some(status) = filter.status
    {
        // A literal, so the filtered indexes (status = 0/1/2) can match.
        parts.push(format!("status = {}", status.code()));
    }
    if pillar == Pillar::Hot
        && let Some(timing) = filter.timing
    {
        let now = built.bind(Param::Time(to_sql_time(chrono::Utc::now())));
        parts.push(match timing {
            Timing::Due => format!("status = 0 AND scheduled_at <= {now}"),
            Timing::Scheduled => format!("status = 0 AND scheduled_at > {now}"),
            Timing::Retrying => format!("status = 0 AND scheduled_at > {now} AND attempt > 0"),
        });
    }
    if pillar == Pillar::Dlq
        && let Some(reason) = filter.reason
    {
        parts.push(format!("reason = {}", reason.code()));
    }
    if pillar == Pillar::Dlq
        && let Some(fingerprint) = &filter.error_group
    {
        // Seeks IX_jobs_dlq_fingerprint; the column is CHAR(16) BIN2, the value lowercase hex.
        let p = built.bind(Param::Text(fingerprint.to_string()));
        parts.push(format!("fingerprint = {p}"));
    }
    if let Some(tag) = &filter.tag {
        let p = built.bind(Param::Text(tag.clone()));
        // Tags are exact, like queue names, whatever the database collation.
        parts.push(format!(
            "CHARINDEX(N',' + {p} + N',', tags COLLATE Latin1_General_100_BIN2) > 0"
        ));
    }
    if let Some(text) = filter
        .text
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        parts.push(text_predicate(built, schema, pillar, text, filter));
    }
    if let Some(before) = filter.listed_before {
        let p = built.bind(Param::Time(to_sql_time(before)));
        parts.push(format!("{} < {p}", list_time(pillar)));
    }
    if let Some(from) = filter.created_from {
        let p = built.bind(Param::Time(to_sql_time(from)));
        parts.push(format!("created_at >= {p}"));
    }
    if let Some(to) = filter.created_to {
        let p = built.bind(Param::Time(to_sql_time(to)));
        parts.push(format!("created_at <= {p}"));
    }
    if pillar != Pillar::Hot {
        if let Some(from) = filter.finished_from {
            let p = built.bind(Param::Time(to_sql_time(from)));
            parts.push(format!("finished_at >= {p}"));
        }
        if let Some(to) = filter.finished_to {
            let p = built.bind(Param::Time(to_sql_time(to)));
            parts.push(format!("finished_at <= {p}"));
        }
    }
    parts.join("\n  AND ")
}

/// The list time of a pillar: what newest-first and a search window read.
fn list_time(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "created_at",
        _ => "finished_at",
    }
}

/// A text search: a substring (`LIKE '%…%'`) over id, type, tags, last error and, opt-in,
/// the payload. SQL Server has no substring index: its full-text search (`CONTAINS`) is an
/// optional feature that matches words and prefixes, not substrings. So a full job id is a
/// seek of the primary key (an id prefix of 12 hex digits or more a range of it), and the
/// substring part reads the rows listed since `scan_from`
/// (a range of the list-time index) when the console bounds it, the whole list otherwise.
fn text_predicate(
    built: &mut Built,
    schema: &SchemaName,
    pillar: Pillar,
    text: &str,
    filter: &JobFilter,
) -> String {
    let p = built.bind(Param::Text(like_pattern(&text.to_lowercase())));
    let hex = built.bind(Param::Text(like_pattern(
        &text.replace('-', "").to_ascii_lowercase(),
    )));
    let payload = if filter.payload {
        format!("\n     OR LOWER(payload) LIKE {p} ESCAPE N'\\'")
    } else {
        String::new()
    };
    let mut scan = format!(
        "(REPLACE((SELECT t.[text] FROM [{schema}].[uuid_text](id) AS t), N'-', N'') \
         LIKE {hex} ESCAPE N'\\' \
         OR LOWER(job_type) LIKE {p} ESCAPE N'\\' \
         OR LOWER(tags) LIKE {p} ESCAPE N'\\' \
         OR LOWER(last_error) LIKE {p} ESCAPE N'\\'{payload})",
        schema = schema.as_str(),
    );
    if let Some(from) = filter.scan_from {
        let w = built.bind(Param::Time(to_sql_time(from)));
        scan = format!("({} >= {w} AND {scan})", list_time(pillar));
    }
    if let Ok(id) = text.parse::<crate::model::JobId>() {
        let id = built.bind(Param::id(id));
        return format!("(id = {id} OR {scan})");
    }
    match crate::query::job_id_prefix(text) {
        // BINARY(16) compares byte by byte: a prefix is one range of the primary key.
        Some(prefix) => {
            let digits = prefix.replace('-', "").to_ascii_lowercase();
            let pad = 32 - digits.len();
            let bound = |fill: &str| {
                Uuid::parse_str(&format!("{digits}{}", fill.repeat(pad)))
                    .ok()
                    .map(JobId)
            };
            match (bound("0"), bound("f")) {
                (Some(lo), Some(hi)) => {
                    let lo = built.bind(Param::id(lo));
                    let hi = built.bind(Param::id(hi));
                    format!("(id BETWEEN {lo} AND {hi} OR {scan})")
                }
                _ => scan,
            }
        }
        None => scan,
    }
}

/// How many rows match a filter: the maintained (striped) counters for an unfiltered list
/// (committed, as the list beside it is: a few rows, locked only for a transition's commit);
/// otherwise the matching rows counted up to `cap` (`cap + 1` read, to tell "more"). A slot
/// may go negative on its own; the sum over every slot is exact.
pub fn count_statement(schema: &SchemaName, pillar: Pillar, filter: &JobFilter, cap: u64) -> Built {
    let mut built = Built {
        reads: Reads::Rows(&["matching"]),
        ..Built::default()
    };
    let name = schema.as_str();
    built.sql = if filter.is_empty() {
        format!(
            "SET NOCOUNT ON;\nSELECT CASE WHEN n.total > 0 THEN n.total ELSE 0 END AS matching\nFROM (SELECT COALESCE(SUM({column}), 0) AS total\n      FROM [{name}].[queue_counter_slots] AS c) AS n;",
            column = match pillar {
                Pillar::Hot => "c.pending_rows + c.fetched_rows + c.processing_rows",
                Pillar::Archive => "c.archive_rows",
                Pillar::Dlq => "c.dlq_rows",
            },
        )
    } else {
        let top = built.bind(Param::Int(i64::try_from(cap).unwrap_or(i64::MAX - 1) + 1));
        let predicates = filter_predicates(&mut built, schema, pillar, filter);
        format!(
            "SET NOCOUNT ON;\nSELECT COUNT_BIG(*) AS matching\nFROM (SELECT TOP ({top}) 1 AS one\n      FROM [{name}].[{table}]\n      WHERE {predicates}) AS m;",
            table = table(pillar),
        )
    };
    built
}

/// The list time of the `rows`-th newest row before `before`: where a bounded search scan
/// stops. No row matches when the list is shorter (the scan then reads it all).
pub fn search_window_statement(
    schema: &SchemaName,
    pillar: Pillar,
    before: Option<chrono::DateTime<chrono::Utc>>,
    rows: u32,
) -> Built {
    let mut built = Built::default();
    let column = list_time(pillar);
    let bound = match before {
        Some(before) => {
            let p = built.bind(Param::Time(to_sql_time(before)));
            format!("\nWHERE {column} < {p}")
        }
        None => String::new(),
    };
    let skip = built.bind(Param::Int(i64::from(rows.max(1)) - 1));
    built.reads = Reads::Rows(&["window_from"]);
    built.sql = format!(
        "SET NOCOUNT ON;\nSELECT {column} AS window_from\nFROM [{schema}].[{table}]{bound}\nORDER BY {column} DESC\nOFFSET {skip} ROWS FETCH NEXT 1 ROWS ONLY;",
        schema = schema.as_str(),
        table = table(pillar),
    );
    built
}

/// A list page. `fetch` = page size + 1. When `reversed`, rows come back in the opposite of
/// the display order (paging backwards, or the last page) and the caller flips them.
pub struct ListStatement {
    pub built: Built,
    pub reversed: bool,
}

pub fn list_statement(
    schema: &SchemaName,
    query: &JobQuery,
    fetch: u32,
) -> StoreResult<ListStatement> {
    let pillar = query.source;
    let (column, kind) = sort_column(pillar, query.sort.column);
    let (cursor, reversed) = match &query.position {
        PagePosition::First => (None, false),
        PagePosition::Last => (None, true),
        PagePosition::After(c) => (Some(c), false),
        PagePosition::Before(c) => (Some(c), true),
    };
    let direction = if reversed {
        query.sort.direction.reversed()
    } else {
        query.sort.direction
    };
    let (dir, cmp) = match direction {
        SortDirection::Asc => ("ASC", ">"),
        SortDirection::Desc => ("DESC", "<"),
    };
    let mut built = Built::default();
    let top = built.bind(Param::Int(i64::from(fetch)));
    let mut predicates = filter_predicates(&mut built, schema, pillar, &query.filter);
    if let Some(cursor) = cursor {
        let k = built.bind(key_param(kind, cursor)?);
        let id = built.bind(Param::id(cursor.id));
        predicates.push_str(&format!(
            "\n  AND ({column} {cmp} {k} OR ({column} = {k} AND id {cmp} {id}))"
        ));
    }
    built.reads = Reads::Rows(read_columns(pillar));
    built.sql = format!(
        "SET NOCOUNT ON;\nSELECT TOP ({top}) {columns}\nFROM [{schema}].[{table}]\nWHERE {predicates}\nORDER BY {column} {dir}, id {dir};",
        columns = read_columns(pillar).join(", "),
        table = table(pillar),
        schema = schema.as_str(),
    );
    Ok(ListStatement { built, reversed })
}

/// Count and newest sample of a filter's matches, as one result set: the count on every row,
/// then a sample row — or, when nothing matched, one row of NULLs, so the count always comes
/// back and is never a set of its own for a caller to tell apart by position.
pub fn preview_statement(
    schema: &SchemaName,
    pillar: Pillar,
    filter: &JobFilter,
    sample: u32,
) -> Built {
    let mut built = Built::default();
    let top = built.bind(Param::Int(i64::from(sample)));
    let predicates = filter_predicates(&mut built, schema, pillar, filter);
    let newest = if pillar == Pillar::Hot {
        "created_at"
    } else {
        "finished_at"
    };
    let sample_columns: Vec<String> = read_columns(pillar)
        .iter()
        .map(|c| format!("s.{c}"))
        .collect();
    built.reads = Reads::Rows(preview_columns(pillar));
    built.sql = format!(
        "SET NOCOUNT ON;\n\
         SELECT m.matching, {sample_columns}\n\
         FROM (SELECT COUNT_BIG(*) AS matching\n      FROM [{schema}].[{table}]\n      WHERE {predicates}) AS m\n\
         LEFT JOIN (SELECT TOP ({top}) {columns}\n           FROM [{schema}].[{table}]\n           WHERE {predicates}\n           \
         ORDER BY {newest} DESC, id DESC) AS s ON 1 = 1\n\
         ORDER BY s.{newest} DESC, s.id DESC;",
        sample_columns = sample_columns.join(", "),
        columns = read_columns(pillar).join(", "),
        table = table(pillar),
        schema = schema.as_str(),
    );
    built
}

/// The next ids (in id order, after `after`) that a bulk action over a filter may touch.
pub fn bulk_ids_statement(
    schema: &SchemaName,
    pillar: Pillar,
    filter: &JobFilter,
    action: BulkAction,
    after: Option<JobId>,
    batch: u32,
) -> Built {
    let mut built = Built::default();
    let top = built.bind(Param::Int(i64::from(batch)));
    let mut predicates = filter_predicates(&mut built, schema, pillar, filter);
    // Rows the action would leave as they are are not selected: each step changes what it
    // selects, so a run ends when the matches do.
    match (action, pillar) {
        (BulkAction::Purge, Pillar::Hot) => predicates.push_str("\n  AND status = 0"),
        (BulkAction::Cancel, _) => {
            predicates.push_str("\n  AND (status = 0 OR status = 1 OR cancel_requested = 0)")
        }
        (BulkAction::RunNow, _) => {
            let now = built.bind(Param::Time(to_sql_time(chrono::Utc::now())));
            predicates.push_str(&format!("\n  AND status = 0 AND scheduled_at > {now}"));
        }
        (BulkAction::SetPriority(priority), _) => {
            let p = built.bind(Param::Int(i64::from(priority)));
            predicates.push_str(&format!("\n  AND status = 0 AND priority <> {p}"));
        }
        _ => {}
    }
    if let Some(after) = after {
        let p = built.bind(Param::id(after));
        predicates.push_str(&format!("\n  AND id > {p}"));
    }
    built.reads = Reads::Rows(&["id"]);
    built.sql = format!(
        "SET NOCOUNT ON;\nSELECT TOP ({top}) id\nFROM [{schema}].[{table}]\nWHERE {predicates}\nORDER BY id;",
        table = table(pillar),
        schema = schema.as_str(),
    );
    built
}

/// Every shape of dynamic statement, for the policy tests.
#[cfg(test)]
pub fn all_shapes(schema: &SchemaName) -> Vec<(Reads, String)> {
    use crate::model::{FailureReason, HotStatus, JobId};
    use crate::query::JobSort;
    let full = JobFilter {
        queue: Some("q".into()),
        job_type: Some("t".into()),
        status: Some(HotStatus::Pending),
        timing: Some(crate::query::Timing::Retrying),
        reason: Some(FailureReason::Fatal),
        error_group: "0123456789abcdef".parse().ok(),
        tag: Some("x".into()),
        text: Some("boom".into()),
        payload: true,
        scan_from: Some(chrono::Utc::now()),
        listed_before: Some(chrono::Utc::now()),
        created_from: Some(chrono::Utc::now()),
        created_to: Some(chrono::Utc::now()),
        finished_from: Some(chrono::Utc::now()),
        finished_to: Some(chrono::Utc::now()),
    };
    let by_id = JobFilter {
        text: Some(JobId::new().to_string()),
        ..full.clone()
    };
    let by_id_prefix = JobFilter {
        text: Some("0190abcd-ef01".into()),
        ..full.clone()
    };
    let mut out = Vec::new();
    for pillar in Pillar::ALL {
        for column in SortColumn::ALL {
            for direction in [SortDirection::Asc, SortDirection::Desc] {
                let key = match sort_column(pillar, column).1 {
                    KeyKind::Time => "1700000000000000".to_string(),
                    KeyKind::Int => "3".to_string(),
                    KeyKind::Text => "q".to_string(),
                };
                let cursor = Cursor {
                    key,
                    id: JobId::new(),
                };
                for position in [
                    PagePosition::First,
                    PagePosition::Last,
                    PagePosition::After(cursor.clone()),
                    PagePosition::Before(cursor),
                ] {
                    let query = JobQuery {
                        source: pillar,
                        filter: full.clone(),
                        sort: JobSort { column, direction },
                        position,
                        page_size: 50,
                    };
                    let built = list_statement(schema, &query, 51).unwrap().built;
                    out.push((built.reads, built.sql));
                }
            }
        }
        for built in [
            preview_statement(schema, pillar, &full, 10),
            bulk_ids_statement(
                schema,
                pillar,
                &full,
                BulkAction::Purge,
                Some(JobId::new()),
                200,
            ),
            bulk_ids_statement(schema, pillar, &full, BulkAction::Cancel, None, 200),
            bulk_ids_statement(schema, pillar, &full, BulkAction::RunNow, None, 200),
            bulk_ids_statement(schema, pillar, &full, BulkAction::SetPriority(5), None, 200),
            count_statement(schema, pillar, &full, 10_000),
            count_statement(schema, pillar, &JobFilter::default(), 10_000),
            count_statement(schema, pillar, &by_id, 1_000),
            count_statement(schema, pillar, &by_id_prefix, 1_000),
            search_window_statement(schema, pillar, Some(chrono::Utc::now()), 20_000),
            search_window_statement(schema, pillar, None, 20_000),
        ] {
            out.push((built.reads, built.sql));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::JobId;
    use crate::query::JobSort;

    fn deck() -> SchemaName {
        SchemaName::parse("deck").unwrap()
    }

    #[test]
    fn like_patterns_escape_wildcards() {
        assert_eq!(like_pattern("50%_off[x]"), "%50\\%\\_off\\[x]%");
        assert_eq!(like_pattern("a\\b"), "%a\\\\b%");
    }

    #[test]
    fn values_are_parameters_and_columns_come_from_the_whitelist() {
        let query = JobQuery {
            source: Pillar::Dlq,
            filter: JobFilter {
                queue: Some("x'; DROP TABLE jobs_dlq; --".into()),
                ..Default::default()
            },
            sort: JobSort {
                column: SortColumn::Priority,
                direction: SortDirection::Desc,
            },
            position: PagePosition::After(Cursor {
                key: "7".into(),
                id: JobId::new(),
            }),
            page_size: 20,
        };
        let stmt = list_statement(&deck(), &query, 21).unwrap();
        let sql = &stmt.built.sql;
        assert!(!sql.contains("DROP"), "{sql}");
        assert!(sql.contains("FROM [deck].[jobs_dlq]"));
        assert!(sql.contains("ORDER BY priority DESC, id DESC"), "{sql}");
        assert!(
            sql.contains("(priority < @P3 OR (priority = @P3 AND id < @P4))"),
            "{sql}"
        );
        assert_eq!(stmt.built.params[0], Param::Int(21));
        assert_eq!(stmt.built.params[2], Param::Int(7));
        assert!(!stmt.reversed);
    }

    #[test]
    fn paging_backwards_flips_the_order() {
        let mut query = JobQuery::new(Pillar::Archive);
        query.position = PagePosition::Before(Cursor {
            key: "1700000000000000".into(),
            id: JobId::new(),
        });
        let stmt = list_statement(&deck(), &query, 51).unwrap();
        assert!(stmt.reversed);
        assert!(
            stmt.built.sql.contains("ORDER BY created_at ASC, id ASC"),
            "{}",
            stmt.built.sql
        );
        assert!(
            stmt.built.sql.contains("created_at > @P2"),
            "{}",
            stmt.built.sql
        );
        query.position = PagePosition::Last;
        assert!(list_statement(&deck(), &query, 51).unwrap().reversed);
    }

    #[test]
    fn a_cursor_from_another_sort_is_refused() {
        let mut query = JobQuery::new(Pillar::Hot);
        query.position = PagePosition::After(Cursor {
            key: "emails".into(),
            id: JobId::new(),
        });
        let err = list_statement(&deck(), &query, 51)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("first page"), "{err}");
    }

    #[test]
    fn status_is_a_literal_for_the_filtered_indexes() {
        let mut built = Built::default();
        let filter = JobFilter {
            status: Some(crate::model::HotStatus::Fetched),
            reason: Some(crate::model::FailureReason::Zombie),
            finished_from: Some(chrono::Utc::now()),
            ..Default::default()
        };
        let hot = filter_predicates(&mut built, &deck(), Pillar::Hot, &filter);
        assert!(hot.contains("status = 1"));
        assert!(!hot.contains("reason") && !hot.contains("finished_at"));
        let dlq = filter_predicates(&mut built, &deck(), Pillar::Dlq, &filter);
        assert!(dlq.contains("reason = 5") && !dlq.contains("status"));
    }
}
