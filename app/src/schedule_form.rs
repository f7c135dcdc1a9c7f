//! The schedule form's text, both ways: a stored definition as the form shows it, and what
//! an operator typed turned into a `ScheduleDefinition`. Problems come back as the engine's
//! `ValidationError` (field, problem, help) with the engine's field names, so the form
//! shows a console-side mistake (a priority that is not a number) the same way as one the
//! engine found (a cron expression with 4 fields).

use deck_engine::validation::ValidationError;
use deck_engine::{MisfirePolicy, OverlapPolicy, ScheduleDefinition, ScheduleJob, ScheduleSpec};

/// The cap a `run_all` misfire policy gets when the form leaves it empty (as in deck.toml).
pub const DEFAULT_MISFIRE_CAP: u32 = 10;

/// What the form's fields hold, exactly as typed (kept on a rejected submit). Also what the
/// create and edit actions receive, field by field; a field the browser leaves out is empty
/// (not the new-schedule default of [`ScheduleForm::default`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScheduleForm {
    #[serde(default)]
    pub name: String,
    /// `cron` or `every`.
    #[serde(default)]
    pub kind: String,
    /// The cron expression, or the interval (`300`, `5m`).
    #[serde(default)]
    pub expr: String,
    #[serde(default)]
    pub time_zone: String,
    #[serde(default)]
    pub queue: String,
    #[serde(default)]
    pub job_type: String,
    #[serde(default)]
    pub payload: String,
    #[serde(default)]
    pub priority: String,
    /// Comma-separated.
    #[serde(default)]
    pub tags: String,
    #[serde(default)]
    pub max_attempts: String,
    /// Seconds (`600`) or a duration (`10m`); empty for none.
    #[serde(default)]
    pub expires_after: String,
    /// `run_once`, `run_all` or `skip`.
    #[serde(default)]
    pub misfire: String,
    #[serde(default)]
    pub misfire_cap: String,
    /// `allow` or `skip_while_active`.
    #[serde(default)]
    pub overlap: String,
}

impl Default for ScheduleForm {
    /// A new schedule's form: every five minutes in UTC, the engine's defaults elsewhere.
    fn default() -> Self {
        ScheduleForm {
            name: String::new(),
            kind: "cron".into(),
            expr: String::new(),
            time_zone: "UTC".into(),
            queue: String::new(),
            job_type: String::new(),
            payload: "{}".into(),
            priority: "0".into(),
            tags: String::new(),
            max_attempts: String::new(),
            expires_after: String::new(),
            misfire: "run_once".into(),
            misfire_cap: DEFAULT_MISFIRE_CAP.to_string(),
            overlap: "allow".into(),
        }
    }
}

impl ScheduleForm {
    /// A stored definition as the edit form shows it.
    pub fn from_definition(def: &ScheduleDefinition) -> Self {
        let (kind, expr) = match &def.spec {
            ScheduleSpec::Cron(expr) => ("cron", expr.clone()),
            ScheduleSpec::EverySecs(secs) => ("every", secs.to_string()),
        };
        let (misfire, cap) = match def.misfire {
            MisfirePolicy::RunOnce => ("run_once", DEFAULT_MISFIRE_CAP),
            MisfirePolicy::RunAll { cap } => ("run_all", cap),
            MisfirePolicy::Skip => ("skip", DEFAULT_MISFIRE_CAP),
        };
        let job = &def.job;
        ScheduleForm {
            name: def.name.clone(),
            kind: kind.into(),
            expr,
            time_zone: def.time_zone.clone(),
            queue: job.queue.clone(),
            job_type: job.job_type.clone(),
            payload: crate::format::pretty_json(&job.payload),
            priority: job.priority.to_string(),
            tags: job.tags.join(", "),
            max_attempts: job.max_attempts.map(|m| m.to_string()).unwrap_or_default(),
            expires_after: job
                .expires_after_secs
                .map(|s| s.to_string())
                .unwrap_or_default(),
            misfire: misfire.into(),
            misfire_cap: cap.to_string(),
            overlap: match def.overlap {
                OverlapPolicy::Allow => "allow",
                OverlapPolicy::SkipWhileActive => "skip_while_active",
            }
            .into(),
        }
    }

    /// The definition the form describes. Only the form's own reading is checked here (a
    /// number that is not one, an unknown choice); the rest is the engine's
    /// `validate_definition`, run by the operation.
    pub fn definition(&self) -> Result<ScheduleDefinition, ValidationError> {
        let expr = self.expr.trim();
        let spec = match self.kind.trim() {
            "cron" => ScheduleSpec::Cron(expr.to_string()),
            "every" => ScheduleSpec::EverySecs(seconds("every_secs", expr)?.ok_or_else(|| {
                ValidationError::new(
                    "every_secs",
                    "is empty",
                    "give the interval in seconds (300) or as a duration (5m, 1h)",
                )
            })?),
            other => {
                return Err(ValidationError::new(
                    "kind",
                    format!("{other:?} is not a kind of schedule"),
                    "choose cron (an expression) or every (a fixed interval)",
                ));
            }
        };
        let priority = match self.priority.trim() {
            "" => 0,
            p => p.parse::<i32>().map_err(|_| {
                ValidationError::new(
                    "job.priority",
                    format!("{p:?} is not a whole number"),
                    "give a whole number such as 0 or 10, or leave it empty for 0",
                )
            })?,
        };
        let max_attempts = match self.max_attempts.trim() {
            "" => None,
            m => Some(m.parse::<u32>().map_err(|_| {
                ValidationError::new(
                    "job.max_attempts",
                    format!("{m:?} is not a whole number"),
                    "give at least 1 attempt, or leave it empty for the engine's default",
                )
            })?),
        };
        let misfire = match self.misfire.trim() {
            "run_once" | "" => MisfirePolicy::RunOnce,
            "skip" => MisfirePolicy::Skip,
            "run_all" => MisfirePolicy::RunAll {
                cap: match self.misfire_cap.trim() {
                    "" => DEFAULT_MISFIRE_CAP,
                    c => c.parse::<u32>().map_err(|_| {
                        ValidationError::new(
                            "misfire.cap",
                            format!("{c:?} is not a whole number"),
                            "give how many missed occurrences to catch up on, e.g. 10",
                        )
                    })?,
                },
            },
            other => {
                return Err(ValidationError::new(
                    "misfire",
                    format!("{other:?} is not a misfire policy"),
                    "choose run once, run all (up to the cap) or skip",
                ));
            }
        };
        let overlap = match self.overlap.trim() {
            "allow" | "" => OverlapPolicy::Allow,
            "skip_while_active" => OverlapPolicy::SkipWhileActive,
            other => {
                return Err(ValidationError::new(
                    "overlap",
                    format!("{other:?} is not an overlap policy"),
                    "choose allow or skip while active",
                ));
            }
        };
        Ok(ScheduleDefinition {
            name: self.name.trim().to_string(),
            spec,
            time_zone: match self.time_zone.trim() {
                "" => "UTC".to_string(),
                tz => tz.to_string(),
            },
            job: ScheduleJob {
                queue: self.queue.trim().to_string(),
                job_type: self.job_type.trim().to_string(),
                payload: compact_json(&self.payload),
                priority,
                tags: self
                    .tags
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !t.is_empty())
                    .map(str::to_string)
                    .collect(),
                max_attempts,
                expires_after_secs: seconds("job.expires_after_secs", self.expires_after.trim())?,
            },
            misfire,
            overlap,
        })
    }
}

/// JSON as typed, compacted when it parses (the form shows it pretty-printed); text that
/// does not parse is passed on as it is, for the engine to say what is wrong with it.
fn compact_json(text: &str) -> String {
    let text = text.trim();
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(v) => serde_json::to_string(&v).unwrap_or_else(|_| text.to_string()),
        Err(_) => text.to_string(),
    }
}

/// Whole seconds (`300`) or a duration (`5m`, `1h 30m`); `None` when empty.
fn seconds(field: &str, text: &str) -> Result<Option<u64>, ValidationError> {
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(secs) = text.parse::<u64>() {
        return Ok(Some(secs));
    }
    let d = humantime::parse_duration(text).map_err(|_| {
        ValidationError::new(
            field,
            format!("{text:?} is neither a number of seconds nor a duration"),
            "give seconds (300) or a duration such as 90s, 5m or 1h 30m",
        )
    })?;
    if d.subsec_nanos() != 0 {
        return Err(ValidationError::new(
            field,
            format!("{text:?} is not a whole number of seconds"),
            "give whole seconds, e.g. 1s or 90s",
        ));
    }
    Ok(Some(d.as_secs()))
}

/// The form input an engine field name points at (`cron` → `expr`, `tags[2]` → `tags`), so
/// the form can mark it; `None` for problems that are not one field's.
pub fn input_for(field: &str) -> Option<&'static str> {
    Some(match field {
        "name" => "name",
        "kind" => "kind",
        "cron" | "every_secs" => "expr",
        "time_zone" => "time_zone",
        "job.queue" => "queue",
        "job.job_type" => "job_type",
        "job.payload" => "payload",
        "job.priority" => "priority",
        "job.max_attempts" => "max_attempts",
        "job.expires_after_secs" => "expires_after",
        "misfire" => "misfire",
        "misfire.cap" => "misfire_cap",
        "overlap" => "overlap",
        f if f == "tags" || f.starts_with("tags[") => "tags",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> ScheduleForm {
        ScheduleForm {
            name: " nightly ".into(),
            expr: "0 2 * * *".into(),
            time_zone: "Europe/Berlin".into(),
            queue: "reports".into(),
            job_type: "report.generate".into(),
            payload: "{\n  \"kind\": \"daily\"\n}".into(),
            priority: "3".into(),
            tags: "finance, , nightly".into(),
            max_attempts: "2".into(),
            expires_after: "10m".into(),
            misfire: "run_all".into(),
            misfire_cap: "5".into(),
            overlap: "skip_while_active".into(),
            ..ScheduleForm::default()
        }
    }

    #[test]
    fn the_form_reads_into_a_definition_and_back() {
        let def = form().definition().unwrap();
        assert_eq!(def.name, "nightly");
        assert_eq!(def.spec, ScheduleSpec::Cron("0 2 * * *".into()));
        assert_eq!(def.job.payload, r#"{"kind":"daily"}"#);
        assert_eq!(def.job.tags, vec!["finance".to_string(), "nightly".into()]);
        assert_eq!(def.job.expires_after_secs, Some(600));
        assert_eq!(def.misfire, MisfirePolicy::RunAll { cap: 5 });
        assert_eq!(def.overlap, OverlapPolicy::SkipWhileActive);
        deck_engine::schedule::validate_definition(&def).unwrap();
        let shown = ScheduleForm::from_definition(&def);
        assert_eq!(shown.definition().unwrap(), def, "{shown:?}");
        assert_eq!(shown.expires_after, "600");
    }

    #[test]
    fn intervals_are_seconds_or_durations() {
        let every = |expr: &str| {
            ScheduleForm {
                kind: "every".into(),
                expr: expr.into(),
                ..form()
            }
            .definition()
        };
        assert_eq!(every("300").unwrap().spec, ScheduleSpec::EverySecs(300));
        assert_eq!(every("1h 30m").unwrap().spec, ScheduleSpec::EverySecs(5400));
        assert_eq!(every("soon").unwrap_err().field, "every_secs");
        assert_eq!(every("").unwrap_err().field, "every_secs");
        assert_eq!(every("1500ms").unwrap_err().field, "every_secs");
    }

    #[test]
    fn what_the_form_cannot_read_names_the_engines_field() {
        let bad = |f: ScheduleForm| f.definition().unwrap_err().field;
        assert_eq!(
            bad(ScheduleForm {
                priority: "high".into(),
                ..form()
            }),
            "job.priority"
        );
        assert_eq!(
            bad(ScheduleForm {
                max_attempts: "-1".into(),
                ..form()
            }),
            "job.max_attempts"
        );
        assert_eq!(
            bad(ScheduleForm {
                misfire_cap: "lots".into(),
                ..form()
            }),
            "misfire.cap"
        );
        assert_eq!(
            bad(ScheduleForm {
                kind: "weekly".into(),
                ..form()
            }),
            "kind"
        );
        for field in [
            "job.priority",
            "misfire.cap",
            "cron",
            "every_secs",
            "tags[3]",
            "tags",
            "time_zone",
        ] {
            assert!(input_for(field).is_some(), "{field}");
        }
        assert_eq!(input_for("cron"), Some("expr"));
        assert_eq!(input_for("actor"), None);
    }
}
