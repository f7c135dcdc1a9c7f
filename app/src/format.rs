//! Numbers, durations and times as an operator reads them.

use chrono::{DateTime, Utc};

/// `1234567` → `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A rate per second with one decimal below 100/s.
pub fn rate(per_sec: f64) -> String {
    if per_sec >= 100.0 {
        format!("{}/s", count(per_sec.round() as u64))
    } else {
        format!("{per_sec:.1}/s")
    }
}

pub fn percent(share: f64) -> String {
    if share > 0.0 && share < 0.001 {
        "<0.1%".to_string()
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

/// A duration in milliseconds, short: `850 ms`, `12.5 s`, `3 m 20 s`, `2 h 5 m`, `3 d 4 h`.
pub fn millis(ms: u64) -> String {
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms < 60_000 {
        format!("{:.1} s", ms as f64 / 1_000.0)
    } else {
        seconds(ms / 1_000)
    }
}

pub fn seconds(s: u64) -> String {
    match s {
        0..60 => format!("{s} s"),
        60..3_600 => format!("{} m {} s", s / 60, s % 60),
        3_600..86_400 => format!("{} h {} m", s / 3_600, (s % 3_600) / 60),
        _ => format!("{} d {} h", s / 86_400, (s % 86_400) / 3_600),
    }
}

/// A duration as a settings field shows it and `parse_duration_input` reads it back:
/// `1h`, `1h 30m`, `500ms`, `0s`.
pub fn duration_input(d: std::time::Duration) -> String {
    if d.is_zero() {
        "0s".into()
    } else {
        humantime::format_duration(d).to_string()
    }
}

/// A settings duration as an operator writes it (`2s`, `1h 30m`, `500ms`); the error says
/// what is wrong and what would do.
pub fn parse_duration_input(field: &str, text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        return Err(format!(
            "{field} {text:?} needs a unit: write e.g. {text}ms, {text}s or {text}m"
        ));
    }
    humantime::parse_duration(text).map_err(|e| {
        format!("{field} {text:?} is not a duration ({e}): write e.g. 500ms, 2s, 1h 30m or 7d")
    })
}

/// Absolute time to the second, in UTC and saying so: `2026-12-05 14:03:07 UTC`. Every
/// absolute time the console shows goes through here (or [`zoned`]), so none is bare.
pub fn time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `12 s ago` / `in 3 m 0 s`, relative to `now`.
pub fn ago(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let delta = now.signed_duration_since(t).num_seconds();
    if delta >= 0 {
        format!("{} ago", seconds(delta as u64))
    } else {
        format!("in {}", seconds(delta.unsigned_abs()))
    }
}

/// A JSON object's fields as `(name, value)` rows for a definition list: nested objects as
/// dotted names (`filter.queue`), nulls and empty objects left out, strings without their
/// quotes, a list of plain values joined with commas. `None` when the text is not a JSON
/// object (shown as it is then).
pub fn json_fields(text: &str) -> Option<Vec<(String, String)>> {
    let serde_json::Value::Object(map) = serde_json::from_str(text).ok()? else {
        return None;
    };
    let mut out = Vec::new();
    for (key, value) in &map {
        flatten_field(key.clone(), value, &mut out);
    }
    Some(out)
}

fn flatten_field(name: String, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    use serde_json::Value;
    match value {
        Value::Null => {}
        Value::Object(map) => {
            for (key, v) in map {
                flatten_field(format!("{name}.{key}"), v, out);
            }
        }
        Value::String(s) => out.push((name, s.clone())),
        Value::Array(items) if items.iter().all(|v| !v.is_object() && !v.is_array()) => {
            let items: Vec<String> = items
                .iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            out.push((name, items.join(", ")));
        }
        other => out.push((name, other.to_string())),
    }
}

/// Pretty-print JSON text; text that does not parse is shown as it is.
pub fn pretty_json(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_else(|_| text.to_string()),
        Err(_) => text.to_string(),
    }
}

/// Short form of a job id for dense tables: the last 12 hex digits (the random part of a v7).
pub fn short_id(id: &str) -> String {
    let n = id.chars().count();
    if n > 13 {
        id.chars().skip(n - 12).collect()
    } else {
        id.to_string()
    }
}

/// Percent-encode a query-string value (RFC 3986 unreserved characters pass through).
pub fn enc(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Undo percent-encoding in a URL path segment (`+` stays a plus: this is a path, not a
/// form). `None` when an escape is broken or the bytes are not UTF-8.
pub fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A time in an IANA time zone, with the zone's abbreviation: `2026-12-03 09:00:00 CET`. A
/// zone name that does not parse shows the time in UTC (the name was checked when it was
/// stored; this only keeps a page from failing over it).
pub fn zoned(t: DateTime<Utc>, zone: &str) -> String {
    match deck_engine::schedule::parse_zone(zone) {
        Ok(tz) => deck_engine::schedule::in_zone(t, tz)
            .format("%Y-%m-%d %H:%M:%S %Z")
            .to_string(),
        Err(_) => time(t),
    }
}

/// Build `path?k=v&…` from the pairs whose value is not empty.
pub fn url(path: &str, pairs: &[(&str, &str)]) -> String {
    let query: Vec<String> = pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_get_thousands_separators() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1_000), "1,000");
        assert_eq!(count(1_234_567), "1,234,567");
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(millis(850), "850 ms");
        assert_eq!(millis(12_500), "12.5 s");
        assert_eq!(millis(200_000), "3 m 20 s");
        assert_eq!(seconds(7_500), "2 h 5 m");
        assert_eq!(seconds(3 * 86_400 + 4 * 3_600), "3 d 4 h");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(enc("a b&c=d/é"), "a%20b%26c%3Dd%2F%C3%A9");
        assert_eq!(
            url("/jobs", &[("source", "dlq"), ("queue", ""), ("q", "x y")]),
            "/jobs?source=dlq&q=x%20y"
        );
    }

    #[test]
    fn path_segments_decode_what_enc_encoded() {
        for text in ["a b/c?d#e", "café + more", "..", "%41"] {
            assert_eq!(percent_decode(&enc(text)).as_deref(), Some(text), "{text}");
        }
        assert_eq!(percent_decode("a+b").as_deref(), Some("a+b"));
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%zz"), None);
        assert_eq!(percent_decode("%ff"), None, "not UTF-8");
    }

    #[test]
    fn times_show_in_their_zone() {
        let t = chrono::DateTime::parse_from_rfc3339("2026-12-03T08:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(zoned(t, "Europe/Berlin"), "2026-12-03 09:00:00 CET");
        assert_eq!(zoned(t, "UTC"), "2026-12-03 08:00:00 UTC");
        assert_eq!(zoned(t, "Mars/Olympus"), "2026-12-03 08:00:00 UTC");
        assert_eq!(
            time(t),
            "2026-12-03 08:00:00 UTC",
            "absolute times name their zone"
        );
    }

    #[test]
    fn json_fields_leave_out_nulls_and_name_nested_fields() {
        let text = r#"{"reason":"bad data","filter":{"queue":"mail","type":null,"tags":["a","b"]},
                       "count":3,"until":null,"empty":{}}"#;
        let mut fields = json_fields(text).unwrap_or_default();
        // The order is serde_json's map order, which a feature elsewhere may change.
        fields.sort();
        assert_eq!(
            Some(fields),
            Some(vec![
                ("count".to_string(), "3".to_string()),
                ("filter.queue".to_string(), "mail".to_string()),
                ("filter.tags".to_string(), "a, b".to_string()),
                ("reason".to_string(), "bad data".to_string()),
            ])
        );
        assert_eq!(json_fields("[1,2]"), None);
        assert_eq!(json_fields("plain words"), None);
    }

    #[test]
    fn bad_json_is_shown_unchanged() {
        assert_eq!(pretty_json("{not json"), "{not json");
        assert_eq!(pretty_json(r#"{"a":1}"#), "{\n  \"a\": 1\n}");
    }
}

#[cfg(test)]
mod duration_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn settings_durations_read_back_what_they_show() {
        for ms in [
            0,
            1,
            500,
            1_000,
            90_000,
            3_600_000,
            5_400_000,
            7 * 86_400_000,
        ] {
            let d = Duration::from_millis(ms);
            let shown = duration_input(d);
            assert_eq!(parse_duration_input("x", &shown), Ok(d), "{shown}");
        }
        assert_eq!(duration_input(Duration::from_millis(3_600_000)), "1h");
    }

    #[test]
    fn a_bare_number_or_nonsense_is_refused_with_an_example() {
        let e = parse_duration_input("base delay", "3600").unwrap_err();
        assert!(e.contains("needs a unit") && e.contains("3600s"), "{e}");
        let e = parse_duration_input("base delay", "soon").unwrap_err();
        assert!(
            e.contains("is not a duration") && e.contains("1h 30m"),
            "{e}"
        );
    }
}
