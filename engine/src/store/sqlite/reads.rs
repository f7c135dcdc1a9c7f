//! Committed reads: one job, finished jobs, filtered keyset pages and bulk previews.
//! Every filter value is a bound parameter; sort columns come from a fixed whitelist.
//! Rows with equal sort values are ordered by rowid (insertion order), which every index
//! entry carries anyway.

use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params};

use crate::error::{StoreError, StoreResult};
use crate::model::{Job, JobId, Pillar, Timestamp};
use crate::query::{
    BulkPreview, Cursor, JobCount, JobFilter, JobQuery, JobSummary, MAX_PAGE_SIZE, Page,
    PagePosition, SEARCH_WINDOW_ROWS, SortColumn, SortDirection, Timing,
};
use crate::validation::ValidationError;

use super::codec::{
    from_us, id_text, ids_json, job_from_row, select_job, summary_cols, summary_from_row, table,
    to_us,
};
use super::connection::db_err;

pub(crate) fn get_job(conn: &Connection, id: JobId) -> StoreResult<Option<Job>> {
    // One read transaction over the three pillars: a job moving between them (resurrected
    // from the dead-letter pillar into the hot one, say) is seen in one of them, never in
    // neither. It is also one snapshot to set up instead of three. The writer calls this
    // inside its own transaction, which already is one.
    let _snapshot = if conn.is_autocommit() {
        Some(conn.unchecked_transaction().map_err(db_err("get job"))?)
    } else {
        None
    };
    for pillar in Pillar::ALL {
        let sql = format!("{} WHERE id = ?1", select_job(pillar));
        let job = conn
            .prepare_cached(&sql)
            .map_err(db_err("get job"))?
            .query_row([id_text(id)], |r| job_from_row(pillar, r))
            .optional()
            .map_err(db_err("get job"))?;
        if job.is_some() {
            return Ok(job);
        }
    }
    Ok(None)
}

pub(crate) fn finished_jobs(conn: &Connection, ids: &[JobId]) -> StoreResult<Vec<Job>> {
    let mut out = Vec::new();
    if ids.is_empty() {
        return Ok(out);
    }
    let json = ids_json(ids);
    for pillar in [Pillar::Archive, Pillar::Dlq] {
        let sql = format!(
            "{} WHERE id IN (SELECT value FROM json_each(?1))",
            select_job(pillar)
        );
        let mut stmt = conn.prepare_cached(&sql).map_err(db_err("finished jobs"))?;
        let jobs = stmt
            .query_map([&json], |r| job_from_row(pillar, r))
            .map_err(db_err("finished jobs"))?;
        for job in jobs {
            out.push(job.map_err(db_err("finished jobs"))?);
        }
    }
    Ok(out)
}

/// `WHERE` conditions for a filter on one pillar, joined with AND, and their values in order.
pub(crate) fn filter_sql(pillar: Pillar, f: &JobFilter) -> (String, Vec<Value>) {
    filter_sql_for(pillar, f, false, TextPlan::Walk)
}

/// A filter's `WHERE` conditions: fixed SQL text, and the one built for a text search.
#[derive(Default)]
struct Conditions(Vec<std::borrow::Cow<'static, str>>);

impl Conditions {
    fn push(&mut self, sql: &'static str) {
        self.0.push(sql.into());
    }

    fn push_owned(&mut self, sql: String) {
        self.0.push(sql.into());
    }

    fn joined(&self) -> String {
        if self.0.is_empty() {
            "1".to_string()
        } else {
            self.0.join(" AND ")
        }
    }
}

/// The list time of a pillar: what the newest-first order and a search window read.
fn list_time(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "created_at",
        _ => "finished_at",
    }
}

fn search_text(f: &JobFilter) -> Option<&str> {
    f.text.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

/// How a text search is put to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TextPlan {
    /// Collect the matching rowids from the indexes (and the bounded scan), then read and
    /// sort those rows: for a term few rows match, which a walk would test every row for.
    Candidates,
    /// Walk the list in its sort order and test each row: for a term many rows match, whose
    /// first page fills after a few rows (collecting them all would read them all).
    Walk,
}

/// Past this many candidate rows a text search walks the sorted list instead.
const MAX_CANDIDATES: i64 = 2_000;

/// The shortest term the trigram index answers.
const MIN_INDEXED_TERM: usize = 3;

/// The parts of a text search, each answered by an index except the last, which scans
/// (within `scan_from` when given): the job id, an id prefix (the primary key's order), the
/// job type (the distinct types, read off the type index, that contain the term; finished
/// lists only: the active table has no type index), the error text (the trigram index of
/// migration 0008) and the LIKE over id, type, tags, last error and (opt-in) the payload.
/// `Candidates` unions their rowids; `Walk` tests each row against them, with every column
/// written `+col` so the planner keeps to the sort's index.
fn text_condition(
    pillar: Pillar,
    text: &str,
    f: &JobFilter,
    plan: TextPlan,
) -> (String, Vec<Value>) {
    let t = table(pillar);
    let walk = plan == TextPlan::Walk;
    let plus = if walk { "+" } else { "" };
    // Each part as a condition on the row (`Walk`) or as the rowids it yields (`Candidates`).
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut values = Vec::new();
    let pattern = like_pattern(text);
    let on_row = |cond: String| (cond.clone(), format!("SELECT rowid FROM {t} WHERE {cond}"));

    if let Ok(id) = text.parse::<JobId>() {
        parts.push(on_row(format!("{plus}id = ?")));
        values.push(Value::Text(id_text(id)));
    } else if let Some(prefix) = crate::query::job_id_prefix(text) {
        // Ids are lowercase hyphenated text: a prefix is one range of the primary key.
        parts.push(on_row(format!("({plus}id >= ? AND {plus}id < ?)")));
        values.push(Value::Text(prefix.clone()));
        values.push(Value::Text(format!("{prefix}~")));
    }
    // Walking, each row is at hand: a LIKE on it costs less than collecting what an index
    // holds for a common term (thousands of rowids) to test the row against.
    if pillar != Pillar::Hot {
        if walk {
            parts.push(on_row("+job_type LIKE ? ESCAPE '\\'".to_string()));
        } else {
            // A loose scan of the type index: one seek per distinct type.
            parts.push(on_row(format!(
                "job_type IN (WITH RECURSIVE types(v) AS (SELECT min(job_type) FROM {t} \
                 UNION ALL SELECT (SELECT min(job_type) FROM {t} WHERE job_type > types.v) \
                 FROM types WHERE types.v IS NOT NULL) \
                 SELECT v FROM types WHERE v LIKE ? ESCAPE '\\')"
            )));
        }
        values.push(Value::Text(pattern.clone()));
    }
    if text.chars().count() >= MIN_INDEXED_TERM {
        if walk {
            parts.push(on_row("+last_error LIKE ? ESCAPE '\\'".to_string()));
            values.push(Value::Text(pattern.clone()));
        } else {
            let matches = format!("SELECT rowid FROM {t}_errors WHERE {t}_errors MATCH ?");
            parts.push((format!("rowid IN ({matches})"), matches));
            values.push(Value::Text(format!("\"{}\"", text.replace('"', "\"\""))));
        }
    }
    // LIKE is case-insensitive (ASCII, like lower()) and needs no allocation per row.
    let mut likes = String::from(
        "(id LIKE ? ESCAPE '\\' OR job_type LIKE ? ESCAPE '\\' \
         OR tags LIKE ? ESCAPE '\\' OR last_error LIKE ? ESCAPE '\\'",
    );
    let mut like_count = 4;
    if f.payload {
        likes.push_str(" OR payload LIKE ? ESCAPE '\\'");
        like_count += 1;
    }
    likes.push(')');
    let scan = match f.scan_from {
        Some(from) => {
            values.push(Value::Integer(to_us(from)));
            format!("({plus}{} >= ? AND {likes})", list_time(pillar))
        }
        None => likes,
    };
    values.extend(std::iter::repeat_n(Value::Text(pattern), like_count));
    parts.push(on_row(scan));

    let sql = match plan {
        TextPlan::Walk => {
            let conds: Vec<&str> = parts.iter().map(|(cond, _)| cond.as_str()).collect();
            format!("({})", conds.join(" OR "))
        }
        TextPlan::Candidates => {
            let selects: Vec<&str> = parts.iter().map(|(_, rows)| rows.as_str()).collect();
            format!("rowid IN ({})", selects.join(" UNION ALL "))
        }
    };
    (sql, values)
}

/// Which plan a text search takes: candidates when the indexes and the bounded scan yield
/// few rows, checked by counting them up to `MAX_CANDIDATES` (a few ms at most). A search
/// that scans everything (no `scan_from`) walks: its candidates would be a full scan too.
fn text_plan(conn: &Connection, pillar: Pillar, f: &JobFilter) -> StoreResult<TextPlan> {
    let Some(text) = search_text(f) else {
        return Ok(TextPlan::Walk);
    };
    if f.scan_from.is_none() {
        return Ok(TextPlan::Walk);
    }
    let (cond, mut values) = text_condition(pillar, text, f, TextPlan::Candidates);
    // `rowid IN (a UNION ALL b …)`: count the union itself, stopping at the limit.
    let union = &cond["rowid IN (".len()..cond.len() - 1];
    values.push(Value::Integer(MAX_CANDIDATES + 1));
    let sql = format!("SELECT count(*) FROM ({union} LIMIT ?)");
    let n: i64 = conn
        .prepare_cached(&sql)
        .map_err(db_err("text search plan"))?
        .query_row(rusqlite::params_from_iter(values), |r| r.get(0))
        .map_err(db_err("text search plan"))?;
    Ok(if n > MAX_CANDIDATES {
        TextPlan::Walk
    } else {
        TextPlan::Candidates
    })
}

/// Escape `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
fn like_pattern(needle: &str) -> String {
    let mut out = String::with_capacity(needle.len() + 2);
    out.push('%');
    for c in needle.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// `by_created`: the page is sorted by creation time, which has its own (created_at, id)
/// index. The equality filters are then written `+col = ?` so the planner walks that index
/// in order and stops after one page, instead of seeking the filter's index and sorting
/// every matching row (a queue holding 200,000 of 1,000,000 archived rows: 350 ms vs 1 ms).
fn filter_sql_for(
    pillar: Pillar,
    f: &JobFilter,
    by_created: bool,
    plan: TextPlan,
) -> (String, Vec<Value>) {
    let mut conds = Conditions::default();
    let mut values: Vec<Value> = Vec::new();
    let walk_created = by_created && pillar != Pillar::Hot;
    if let Some(q) = &f.queue {
        conds.push(if walk_created {
            "+queue = ?"
        } else {
            "queue = ?"
        });
        values.push(Value::Text(q.clone()));
    }
    if let Some(t) = &f.job_type {
        conds.push(if walk_created {
            "+job_type = ?"
        } else {
            "job_type = ?"
        });
        values.push(Value::Text(t.clone()));
    }
    if let (Pillar::Hot, Some(s)) = (pillar, f.status) {
        conds.push("status = ?");
        values.push(Value::Integer(s.code()));
    }
    if let (Pillar::Hot, Some(timing)) = (pillar, f.timing) {
        conds.push(match timing {
            Timing::Due => "status = 0 AND scheduled_at <= ?",
            Timing::Scheduled => "status = 0 AND scheduled_at > ?",
            Timing::Retrying => "status = 0 AND scheduled_at > ? AND attempt > 0",
        });
        values.push(Value::Integer(super::codec::now_us()));
    }
    if let (Pillar::Dlq, Some(r)) = (pillar, f.reason) {
        conds.push(if walk_created {
            "+reason = ?"
        } else {
            "reason = ?"
        });
        values.push(Value::Integer(r.code()));
    }
    if let (Pillar::Dlq, Some(fp)) = (pillar, &f.error_group) {
        conds.push(if walk_created {
            "+fingerprint = ?"
        } else {
            "fingerprint = ?"
        });
        values.push(Value::Text(fp.to_string()));
    }
    if let Some(tag) = &f.tag {
        conds.push("instr(tags, ?) > 0");
        values.push(Value::Text(format!(",{tag},")));
    }
    if let Some(text) = search_text(f) {
        let (sql, text_values) = text_condition(pillar, text, f, plan);
        conds.push_owned(sql);
        values.extend(text_values);
    }
    if let Some(t) = f.listed_before {
        conds.push_owned(format!("{} < ?", list_time(pillar)));
        values.push(Value::Integer(to_us(t)));
    }
    if let Some(t) = f.created_from {
        conds.push("created_at >= ?");
        values.push(Value::Integer(to_us(t)));
    }
    if let Some(t) = f.created_to {
        conds.push("created_at <= ?");
        values.push(Value::Integer(to_us(t)));
    }
    if pillar != Pillar::Hot {
        if let Some(t) = f.finished_from {
            conds.push("finished_at >= ?");
            values.push(Value::Integer(to_us(t)));
        }
        if let Some(t) = f.finished_to {
            conds.push("finished_at <= ?");
            values.push(Value::Integer(to_us(t)));
        }
    }
    (conds.joined(), values)
}

/// The column a sort reads and whether its cursor key is text.
fn sort_column(pillar: Pillar, column: SortColumn) -> (&'static str, bool) {
    match column {
        SortColumn::CreatedAt => ("created_at", false),
        SortColumn::ScheduledAt => ("scheduled_at", false),
        SortColumn::FinishedAt if pillar == Pillar::Hot => ("created_at", false),
        SortColumn::FinishedAt => ("finished_at", false),
        SortColumn::Priority => ("priority", false),
        SortColumn::Attempt => ("attempt", false),
        SortColumn::Queue => ("queue", true),
        SortColumn::JobType => ("job_type", true),
    }
}

fn cursor_value(cursor: &Cursor, text: bool) -> StoreResult<Value> {
    if text {
        return Ok(Value::Text(cursor.key.clone()));
    }
    cursor.key.parse::<i64>().map(Value::Integer).map_err(|_| {
        StoreError::Invalid(ValidationError::new(
            "cursor",
            format!("{:?} is not a position in this sort", cursor.key),
            "follow the page links, or start again from the first page",
        ))
    })
}

fn key_text(v: &Value) -> String {
    match v {
        Value::Integer(i) => i.to_string(),
        Value::Text(t) => t.clone(),
        Value::Real(r) => r.to_string(),
        _ => String::new(),
    }
}

pub(crate) fn list_jobs(conn: &Connection, q: &JobQuery) -> StoreResult<Page<JobSummary>> {
    let pillar = q.source;
    let (col, text_key) = sort_column(pillar, q.sort.column);
    let size = q.page_size.clamp(1, MAX_PAGE_SIZE) as usize;
    let plan = text_plan(conn, pillar, &q.filter)?;
    let (mut where_sql, mut values) = filter_sql_for(
        pillar,
        &q.filter,
        q.sort.column == SortColumn::CreatedAt,
        plan,
    );

    // Reading backwards (Before, Last) uses the reversed order and flips the rows after.
    let (read_dir, flip) = match q.position {
        PagePosition::First | PagePosition::After(_) => (q.sort.direction, false),
        PagePosition::Before(_) | PagePosition::Last => (q.sort.direction.reversed(), true),
    };
    if let PagePosition::After(c) | PagePosition::Before(c) = &q.position {
        let op = match read_dir {
            SortDirection::Asc => ">",
            SortDirection::Desc => "<",
        };
        // The rowid breaks ties (the list indexes end in it; see migration 0003), found from
        // the cursor's id. If that row has gone since the page was drawn, the page starts at
        // the first row of its sort value: a few rows may show twice, none is skipped.
        where_sql.push_str(&format!(
            " AND ({col}, rowid) {op} (?, coalesce((SELECT c.rowid FROM {} AS c WHERE c.id = ?), ?))",
            table(pillar)
        ));
        values.push(cursor_value(c, text_key)?);
        values.push(Value::Text(id_text(c.id)));
        values.push(Value::Integer(match read_dir {
            SortDirection::Asc => i64::MIN,
            SortDirection::Desc => i64::MAX,
        }));
    }
    let dir = match read_dir {
        SortDirection::Asc => "ASC",
        SortDirection::Desc => "DESC",
    };
    values.push(Value::Integer(size as i64 + 1));
    let sql = format!(
        "SELECT {}, {col} FROM {} WHERE {where_sql} ORDER BY {col} {dir}, rowid {dir} LIMIT ?",
        summary_cols(pillar),
        table(pillar)
    );
    let key_idx = 13;
    let mut stmt = conn.prepare_cached(&sql).map_err(db_err("list jobs"))?;
    let mut rows: Vec<(JobSummary, String)> = stmt
        .query_map(rusqlite::params_from_iter(values), |r| {
            Ok((
                summary_from_row(pillar, r)?,
                key_text(&r.get::<_, Value>(key_idx)?),
            ))
        })
        .map_err(db_err("list jobs"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("list jobs"))?;
    let more = rows.len() > size;
    rows.truncate(size);
    if flip {
        rows.reverse();
    }
    let cursor = |row: Option<&(JobSummary, String)>| {
        row.map(|(s, key)| Cursor {
            key: key.clone(),
            id: s.id,
        })
    };
    let (prev, next) = match q.position {
        PagePosition::First => (None, if more { cursor(rows.last()) } else { None }),
        PagePosition::After(_) => (
            cursor(rows.first()),
            if more { cursor(rows.last()) } else { None },
        ),
        PagePosition::Before(_) => (
            if more { cursor(rows.first()) } else { None },
            cursor(rows.last()),
        ),
        PagePosition::Last => (if more { cursor(rows.first()) } else { None }, None),
    };
    Ok(Page {
        items: rows.into_iter().map(|(s, _)| s).collect(),
        prev,
        next,
    })
}

pub(crate) fn count_jobs(
    conn: &Connection,
    source: Pillar,
    filter: &JobFilter,
) -> StoreResult<JobCount> {
    if filter.is_empty() {
        let sql = match source {
            Pillar::Hot => "SELECT count(*) FROM jobs",
            Pillar::Archive => "SELECT coalesce(sum(archive_rows), 0) FROM queue_counters",
            Pillar::Dlq => "SELECT coalesce(sum(dlq_rows), 0) FROM queue_counters",
        };
        let n: i64 = conn
            .prepare_cached(sql)
            .map_err(db_err("count jobs"))?
            .query_row([], |r| r.get(0))
            .map_err(db_err("count jobs"))?;
        return Ok(JobCount {
            matching: u64::try_from(n).unwrap_or(0),
            capped: false,
        });
    }
    let plan = text_plan(conn, source, filter)?;
    let (where_sql, mut values) = filter_sql_for(source, filter, false, plan);
    let cap = i64::try_from(crate::query::count_cap(filter)).unwrap_or(i64::MAX);
    values.push(Value::Integer(cap + 1));
    let sql = format!(
        "SELECT count(*) FROM (SELECT 1 FROM {} WHERE {where_sql} LIMIT ?)",
        table(source)
    );
    let n: i64 = conn
        .prepare_cached(&sql)
        .map_err(db_err("count jobs"))?
        .query_row(rusqlite::params_from_iter(values), |r| r.get(0))
        .map_err(db_err("count jobs"))?;
    Ok(JobCount {
        matching: u64::try_from(n.min(cap)).unwrap_or(0),
        capped: n > cap,
    })
}

/// Walks `SEARCH_WINDOW_ROWS` entries of the list-time index (no row is read).
pub(crate) fn search_window(
    conn: &Connection,
    source: Pillar,
    before: Option<Timestamp>,
) -> StoreResult<Option<Timestamp>> {
    let col = list_time(source);
    let sql = format!(
        "SELECT {col} FROM {} WHERE {col} < ?1 ORDER BY {col} DESC LIMIT 1 OFFSET ?2",
        table(source)
    );
    let at: Option<i64> = conn
        .prepare_cached(&sql)
        .map_err(db_err("search window"))?
        .query_row(
            params![
                before.map_or(i64::MAX, to_us),
                i64::from(SEARCH_WINDOW_ROWS) - 1
            ],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err("search window"))?;
    Ok(at.map(from_us))
}

fn newest_first(pillar: Pillar) -> &'static str {
    match pillar {
        Pillar::Hot => "created_at DESC, rowid DESC",
        _ => "finished_at DESC, rowid DESC",
    }
}

pub(crate) fn bulk_preview(
    conn: &Connection,
    source: Pillar,
    filter: &JobFilter,
    sample: u32,
) -> StoreResult<BulkPreview> {
    let (where_sql, values) = filter_sql(source, filter);
    let count_sql = format!("SELECT count(*) FROM {} WHERE {where_sql}", table(source));
    let matching: i64 = conn
        .prepare_cached(&count_sql)
        .map_err(db_err("bulk preview"))?
        .query_row(rusqlite::params_from_iter(values.iter()), |r| r.get(0))
        .map_err(db_err("bulk preview"))?;
    let mut values = values;
    values.push(Value::Integer(i64::from(sample.min(MAX_PAGE_SIZE))));
    let sql = format!(
        "SELECT {} FROM {} WHERE {where_sql} ORDER BY {} LIMIT ?",
        summary_cols(source),
        table(source),
        newest_first(source)
    );
    let sample = conn
        .prepare_cached(&sql)
        .map_err(db_err("bulk preview"))?
        .query_map(rusqlite::params_from_iter(values), |r| {
            summary_from_row(source, r)
        })
        .map_err(db_err("bulk preview"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("bulk preview"))?;
    Ok(BulkPreview {
        matching: u64::try_from(matching).unwrap_or(0),
        sample,
    })
}

/// Ids matching a filter plus an extra fixed condition, newest first, at most `limit`.
pub(crate) fn matching_ids(
    conn: &Connection,
    source: Pillar,
    filter: &JobFilter,
    (extra, extra_values): (&str, Vec<Value>),
    after: Option<JobId>,
    limit: u32,
) -> StoreResult<Vec<JobId>> {
    let (where_sql, mut values) = filter_sql(source, filter);
    values.extend(extra_values);
    // Ids are fixed-width lowercase text, so text order is id order (as SQL Server's
    // BINARY(16) order is).
    let after_sql = match after {
        Some(id) => {
            values.push(Value::Text(id_text(id)));
            "AND id > ?"
        }
        None => "",
    };
    values.push(Value::Integer(i64::from(limit)));
    let sql = format!(
        "SELECT id FROM {} WHERE {where_sql} AND {extra} {after_sql} ORDER BY id LIMIT ?",
        table(source),
    );
    let ids: Vec<String> = conn
        .prepare_cached(&sql)
        .map_err(db_err("bulk by filter"))?
        .query_map(rusqlite::params_from_iter(values), |r| r.get(0))
        .map_err(db_err("bulk by filter"))?
        .collect::<Result<_, _>>()
        .map_err(db_err("bulk by filter"))?;
    Ok(ids.iter().filter_map(|t| t.parse().ok()).collect())
}
