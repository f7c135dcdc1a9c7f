//! Job-list parameters in the URL: every filter, the sort and the page position, parsed
//! with messages that say what is wrong, and rendered back into links.

use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use deck_engine::{
    Cursor, FailureReason, Fingerprint, HotStatus, JobFilter, JobQuery, JobSort, MAX_PAGE_SIZE,
    PagePosition, Pillar, SortColumn, SortDirection,
};

use crate::request::Query;

/// The filter keys, in the order links carry them.
const FILTER_KEYS: [&str; 12] = [
    "queue", "type", "status", "reason", "group", "tag", "q", "payload", "older", "on", "from",
    "to",
];

#[derive(Debug, Clone)]
pub struct ListParams {
    pub query: JobQuery,
    /// Raw filter values as given (for the form and for links).
    pub raw: Vec<(&'static str, String)>,
    /// Problems with the given parameters; the list still renders without them.
    pub problems: Vec<String>,
}

impl ListParams {
    pub fn source(&self) -> Pillar {
        self.query.source
    }

    pub fn raw(&self, key: &str) -> &str {
        self.raw
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    /// Source and filters (no sort, no position) as query pairs.
    pub fn filter_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![("source", self.query.source.as_str().to_string())];
        pairs.extend(self.raw.iter().filter(|(_, v)| !v.is_empty()).cloned());
        pairs
    }

    /// Source, filters and sort (no position): the base of paging links.
    pub fn sorted_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = self.filter_pairs();
        if !is_default_sort(self.query.source, &self.query.filter, self.query.sort) {
            pairs.push(("sort", self.query.sort.column.as_str().to_string()));
            pairs.push((
                "dir",
                match self.query.sort.direction {
                    SortDirection::Asc => "asc",
                    SortDirection::Desc => "desc",
                }
                .to_string(),
            ));
        }
        pairs
    }

    /// Just the filters as a query string (what a bulk-by-filter run is given).
    pub fn filter_query(&self) -> String {
        serde_urlencoded::to_string(self.filter_pairs()).unwrap_or_default()
    }
}

pub fn href(path: &str, pairs: &[(&'static str, String)]) -> String {
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
    crate::format::url(path, &pairs)
}

pub(crate) fn parse_time(value: &str, end_of_day: bool) -> Result<DateTime<Utc>, String> {
    let v = value.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(v) {
        return Ok(t.with_timezone(&Utc));
    }
    for fmt in [
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d %H:%M:%S",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(v, fmt) {
            return Ok(Utc.from_utc_datetime(&t));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(v, "%Y-%m-%d") {
        let t = if end_of_day {
            d.and_hms_milli_opt(23, 59, 59, 999)
        } else {
            d.and_hms_opt(0, 0, 0)
        };
        if let Some(t) = t {
            return Ok(Utc.from_utc_datetime(&t));
        }
    }
    Err(format!(
        "date {v:?} not understood; use YYYY-MM-DD or YYYY-MM-DDTHH:MM (UTC)"
    ))
}

pub fn parse(q: &Query, default_page_size: u32) -> ListParams {
    let mut problems = Vec::new();
    let source = match q.get("source") {
        None => Pillar::Hot,
        Some(s) => s.parse().unwrap_or_else(|e| {
            problems.push(format!("{e}"));
            Pillar::Hot
        }),
    };
    let mut raw: Vec<(&'static str, String)> = Vec::new();
    for key in FILTER_KEYS {
        if let Some(v) = q.get(key) {
            raw.push((key, v.to_string()));
        }
    }
    let mut filter = JobFilter {
        queue: q.get("queue").map(str::to_string),
        job_type: q.get("type").map(str::to_string),
        tag: q.get("tag").map(str::to_string),
        text: q.get("q").map(str::to_string),
        ..JobFilter::default()
    };
    if let Some(s) = q.get("status") {
        if source == Pillar::Hot {
            // The pending tiles' splits (due, scheduled, retrying) are statuses to the
            // operator: one select, one key.
            match (s.parse::<deck_engine::Timing>(), s.parse::<HotStatus>()) {
                (Ok(timing), _) => filter.timing = Some(timing),
                (_, Ok(st)) => filter.status = Some(st),
                (_, Err(_)) => problems.push(format!(
                    "status {s:?} is not one of pending, due, scheduled, retrying, fetched, processing"
                )),
            }
        } else {
            problems.push("status applies to active jobs only; ignored".into());
            raw.retain(|(k, _)| *k != "status");
        }
    }
    if let Some(r) = q.get("reason") {
        if source == Pillar::Dlq {
            match r.parse::<FailureReason>() {
                Ok(reason) => filter.reason = Some(reason),
                Err(e) => problems.push(e.to_string()),
            }
        } else {
            problems.push("reason applies to dead letters only; ignored".into());
            raw.retain(|(k, _)| *k != "reason");
        }
    }
    if let Some(g) = q.get("group").filter(|g| !g.trim().is_empty()) {
        if source == Pillar::Dlq {
            match g.parse::<Fingerprint>() {
                Ok(fp) => filter.error_group = Some(fp),
                Err(e) => problems.push(e.to_string()),
            }
        } else {
            problems.push("error group applies to dead letters only; ignored".into());
            raw.retain(|(k, _)| *k != "group");
        }
    }
    if let Some(v) = q.get("payload").filter(|v| !v.is_empty()) {
        match v.to_ascii_lowercase().as_str() {
            "1" | "on" | "true" | "yes" => filter.payload = true,
            "0" | "off" | "false" | "no" => raw.retain(|(k, _)| *k != "payload"),
            _ => {
                problems.push(format!(
                    "payload={v:?} not understood; use payload=1 to search payloads too"
                ));
                raw.retain(|(k, _)| *k != "payload");
            }
        }
    }
    if let Some(v) = q.get("older").filter(|v| !v.is_empty()) {
        // Only a search's "search older" link sets it: an exact time, not a day.
        match DateTime::parse_from_rfc3339(v.trim()) {
            Ok(t) => filter.listed_before = Some(t.with_timezone(&Utc)),
            Err(_) => {
                problems.push(format!("older={v:?} is not a time like 2026-01-02T03:04:05.000006Z; follow the \"search older\" link"));
                raw.retain(|(k, _)| *k != "older");
            }
        }
    }
    let on_finished = q.get("on") == Some("finished") && source != Pillar::Hot;
    let from = q.get("from").map(|v| parse_time(v, false));
    let to = q.get("to").map(|v| parse_time(v, true));
    for (slot, value) in [(0, from), (1, to)] {
        match value {
            None => {}
            Some(Err(e)) => problems.push(e),
            Some(Ok(t)) => match (slot, on_finished) {
                (0, false) => filter.created_from = Some(t),
                (0, true) => filter.finished_from = Some(t),
                (_, false) => filter.created_to = Some(t),
                (_, true) => filter.finished_to = Some(t),
            },
        }
    }

    let mut sort = JobSort::default_for(source, &filter);
    if let Some(c) = q.get("sort") {
        match c.parse::<SortColumn>() {
            Ok(c) => sort.column = c,
            Err(e) => problems.push(e.to_string()),
        }
    }
    if let Some(d) = q.get("dir") {
        match d.parse::<SortDirection>() {
            Ok(d) => sort.direction = d,
            Err(e) => problems.push(e.to_string()),
        }
    }
    let position = if q.get("last").is_some() {
        PagePosition::Last
    } else if let Some(c) = q.get("after") {
        match c.parse::<Cursor>() {
            Ok(c) => PagePosition::After(c),
            Err(e) => {
                problems.push(e.to_string());
                PagePosition::First
            }
        }
    } else if let Some(c) = q.get("before") {
        match c.parse::<Cursor>() {
            Ok(c) => PagePosition::Before(c),
            Err(e) => {
                problems.push(e.to_string());
                PagePosition::First
            }
        }
    } else {
        PagePosition::First
    };
    let page_size = q
        .get("size")
        .and_then(|s| s.parse::<u32>().ok())
        .unwrap_or(default_page_size)
        .clamp(1, MAX_PAGE_SIZE);
    ListParams {
        query: JobQuery {
            source,
            filter,
            sort,
            position,
            page_size,
        },
        raw,
        problems,
    }
}

/// The default sort of a source, so links leave it out.
pub fn is_default_sort(source: Pillar, filter: &JobFilter, sort: JobSort) -> bool {
    sort == JobSort::default_for(source, filter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_sort_and_cursor_come_from_the_url() {
        let id = deck_engine::JobId::new();
        let q = Query::parse(&format!(
            "source=dlq&queue=emails&reason=fatal&q=timeout&from=2026-01-02&to=2026-01-03&on=finished&sort=priority&dir=asc&after={id}~17"
        ));
        let p = parse(&q, 50);
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(p.source(), Pillar::Dlq);
        assert_eq!(p.query.filter.queue.as_deref(), Some("emails"));
        assert_eq!(p.query.filter.reason, Some(FailureReason::Fatal));
        assert_eq!(p.query.filter.text.as_deref(), Some("timeout"));
        assert!(p.query.filter.finished_from.is_some() && p.query.filter.finished_to.is_some());
        assert!(p.query.filter.created_from.is_none());
        assert_eq!(p.query.sort.column, SortColumn::Priority);
        assert_eq!(p.query.sort.direction, SortDirection::Asc);
        assert!(
            matches!(p.query.position, PagePosition::After(ref c) if c.id == id && c.key == "17")
        );
    }

    #[test]
    fn bad_values_are_reported_not_fatal() {
        let p = parse(
            &Query::parse("source=active&status=nope&sort=payload&from=yesterday"),
            50,
        );
        assert_eq!(p.problems.len(), 3, "{:?}", p.problems);
        assert_eq!(p.query.filter.status, None);
        assert_eq!(p.query.sort.column, SortColumn::CreatedAt);
    }

    #[test]
    fn an_error_group_selects_dead_letters_and_survives_into_links() {
        let p = parse(
            &Query::parse("source=dlq&group=00AB12cd34EF5678&queue=mail"),
            50,
        );
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert_eq!(
            p.query.filter.error_group.as_ref().map(|f| f.as_str()),
            Some("00ab12cd34ef5678")
        );
        assert_eq!(
            p.filter_query(),
            "source=dlq&queue=mail&group=00AB12cd34EF5678"
        );
        let bad = parse(&Query::parse("source=dlq&group=nope"), 50);
        assert_eq!(bad.problems.len(), 1, "{:?}", bad.problems);
        assert_eq!(bad.query.filter.error_group, None);
        let active = parse(&Query::parse("source=active&group=00ab12cd34ef5678"), 50);
        assert_eq!(active.problems.len(), 1);
        assert_eq!(active.filter_query(), "source=active");
    }

    #[test]
    fn reason_on_active_jobs_is_dropped_from_links() {
        let p = parse(&Query::parse("source=active&reason=Fatal&queue=a"), 50);
        assert_eq!(p.problems.len(), 1);
        assert_eq!(p.filter_query(), "source=active&queue=a");
    }

    #[test]
    fn payload_search_and_search_older_come_from_the_url() {
        let p = parse(
            &Query::parse("q=c-42&payload=on&older=2026-01-02T03:04:05.000006Z"),
            50,
        );
        assert!(p.problems.is_empty(), "{:?}", p.problems);
        assert!(p.query.filter.payload);
        let older = p.query.filter.listed_before.expect("older parsed");
        assert_eq!(older.to_rfc3339(), "2026-01-02T03:04:05.000006+00:00");
        assert_eq!(
            p.filter_query(),
            "source=active&q=c-42&payload=on&older=2026-01-02T03%3A04%3A05.000006Z"
        );
        let bad = parse(&Query::parse("payload=maybe&older=last+week"), 50);
        assert_eq!(bad.problems.len(), 2, "{:?}", bad.problems);
        assert!(!bad.query.filter.payload && bad.query.filter.listed_before.is_none());
        assert_eq!(bad.filter_query(), "source=active");
    }

    #[test]
    fn a_created_range_lists_finished_jobs_by_creation() {
        let p = parse(&Query::parse("source=archive&from=2026-01-02"), 50);
        assert_eq!(p.query.sort.column, SortColumn::CreatedAt);
        assert!(is_default_sort(p.source(), &p.query.filter, p.query.sort));
        let plain = parse(&Query::parse("source=archive"), 50);
        assert_eq!(plain.query.sort.column, SortColumn::FinishedAt);
        assert!(!is_default_sort(
            plain.source(),
            &p.query.filter,
            plain.query.sort
        ));
    }
}
