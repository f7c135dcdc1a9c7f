//! Recurring schedules: what a schedule is, when its occurrences fall, and which of them a
//! scheduler run enqueues. No I/O here; the store keeps schedules and writes each
//! occurrence's key with its job (`Store::fire_schedule`), the scheduler loop
//! (`runtime::scheduler`) decides with [`plan`] what to fire.
//!
//! Occurrences must come out the same on every instance, so that the occurrence key
//! (schedule name + scheduled time) deduplicates them: cron occurrences are computed in the
//! schedule's time zone by croner (DST: a fixed time in a skipped hour runs right after the
//! gap, a fixed time in a repeated hour runs once; wildcard fields follow the wall clock), and
//! fixed intervals are aligned to the Unix epoch, not to whenever an instance started.

use std::str::FromStr;

use chrono::{DateTime, TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde::{Deserialize, Serialize};

use crate::model::{EnqueueRequest, JobId, Timestamp};
use crate::validation::{self, MAX_PAYLOAD_BYTES, ValidationError};

/// Longest fixed interval: one year.
pub const MAX_INTERVAL_SECS: u64 = 366 * 86_400;
/// Most missed occurrences a `run_all` misfire policy may catch up on in one go.
pub const MAX_MISFIRE_CAP: u32 = 1_000;
/// Longest expiry a scheduled job may be given.
pub const MAX_EXPIRES_AFTER_SECS: u64 = 366 * 86_400;
/// An occurrence this late is a misfire (downtime, a paused loop), not a normal tick: the
/// misfire policy decides whether it still runs.
pub const MISFIRE_GRACE_SECS: i64 = 60;
/// How many occurrences a single scheduler run looks at per schedule (a `* * * * * *`
/// schedule missed over a week would otherwise be 600,000 to walk).
const SCAN_LIMIT: usize = 10_000;

/// When a schedule's occurrences fall.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleSpec {
    /// A cron expression: 5 fields (minute first), 6 (seconds first), or an alias
    /// (`@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`).
    Cron(String),
    /// Every this many seconds, aligned to the Unix epoch (every 3600 s = on the hour, UTC).
    EverySecs(u64),
}

impl std::fmt::Display for ScheduleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScheduleSpec::Cron(expr) => write!(f, "{expr}"),
            ScheduleSpec::EverySecs(secs) => write!(
                f,
                "every {}",
                humantime::format_duration(std::time::Duration::from_secs(*secs))
            ),
        }
    }
}

/// What happens to occurrences that passed while no scheduler ran (downtime) once one runs
/// again. An occurrence up to [`MISFIRE_GRACE_SECS`] late is not a misfire and always runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum MisfirePolicy {
    /// Run the latest missed occurrence once; the others are skipped.
    #[default]
    RunOnce,
    /// Run every missed occurrence, oldest first, at most `cap` of them (the latest `cap`).
    RunAll { cap: u32 },
    /// Run none of them; wait for the next occurrence.
    Skip,
}

/// Whether an occurrence runs while the job of the previous one is still active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OverlapPolicy {
    /// Always enqueue.
    #[default]
    Allow,
    /// Skip the occurrence (recorded as skipped) while the last job is pending or running.
    SkipWhileActive,
}

/// The job each occurrence enqueues.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleJob {
    pub queue: String,
    pub job_type: String,
    /// JSON text. Empty means `null`.
    #[serde(default)]
    pub payload: String,
    #[serde(default)]
    pub priority: i32,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// The job goes to the DLQ as expired if it has not started this long after its
    /// occurrence.
    #[serde(default)]
    pub expires_after_secs: Option<u64>,
}

/// A schedule as declared (deck.toml, the API, the console, `Engine` builder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleDefinition {
    /// Unique; the schedule's identity in every door.
    pub name: String,
    pub spec: ScheduleSpec,
    /// IANA time zone the cron expression is read in (`Europe/Berlin`); `UTC` by default.
    #[serde(default = "utc_name")]
    pub time_zone: String,
    pub job: ScheduleJob,
    #[serde(default)]
    pub misfire: MisfirePolicy,
    #[serde(default)]
    pub overlap: OverlapPolicy,
}

fn utc_name() -> String {
    "UTC".to_string()
}

/// Who declared a schedule: the start-up upsert only touches its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleOrigin {
    /// `deck.toml` or the `Engine` builder: upserted at every start.
    Declared,
    /// Created at run time (console, API, `Operations`).
    Operator,
}

impl ScheduleOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            ScheduleOrigin::Declared => "declared",
            ScheduleOrigin::Operator => "operator",
        }
    }

    pub fn parse(text: &str) -> Option<ScheduleOrigin> {
        match text {
            "declared" => Some(ScheduleOrigin::Declared),
            "operator" => Some(ScheduleOrigin::Operator),
            _ => None,
        }
    }
}

/// A stored schedule: its definition and where it stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub definition: ScheduleDefinition,
    pub enabled: bool,
    pub origin: ScheduleOrigin,
    /// Occurrences up to this time are handled (run or skipped); the scheduler looks after it.
    pub handled_through: Timestamp,
    /// The last occurrence that was run or skipped, or a manual run.
    pub last_run: Option<ScheduleRun>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

impl Schedule {
    pub fn name(&self) -> &str {
        &self.definition.name
    }
}

/// One handled occurrence (or manual run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleRun {
    pub schedule: String,
    /// The occurrence's time (for a manual run: when it was asked for).
    pub scheduled_at: Timestamp,
    /// The job it enqueued; `None` when the overlap policy skipped it.
    pub job_id: Option<JobId>,
    pub manual: bool,
    pub recorded_at: Timestamp,
}

/// One occurrence to handle in a `Store::fire_schedule` call.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    pub scheduled_at: Timestamp,
    /// The job to enqueue, with its id fixed (so a retried call finds its own rows).
    pub job: EnqueueRequest,
    pub job_id: JobId,
}

/// What a scheduler run (or "run now") asks the store to write for one schedule, all in one
/// transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleFire {
    pub schedule: String,
    /// Occurrences to run, oldest first. Each is written only if its key is not there yet.
    pub occurrences: Vec<Occurrence>,
    /// Move `handled_through` forward to this (never back). `None` for a manual run.
    pub handled_through: Option<Timestamp>,
    /// Skip an occurrence while the schedule's last job is still active.
    pub skip_while_active: bool,
    pub manual: bool,
}

/// What became of one occurrence of a fire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "job_id")]
pub enum FireOutcome {
    /// Its job was enqueued.
    Enqueued(JobId),
    /// Another instance (or an earlier call) handled it already.
    AlreadyHandled,
    /// The previous job was still active and the overlap policy skipped it.
    SkippedOverlap,
}

/// What a scheduler run decided for one schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Occurrences to run, oldest first.
    pub run: Vec<Timestamp>,
    /// Occurrences passed over by the misfire policy.
    pub skipped: usize,
    /// The cursor after this run.
    pub handled_through: Timestamp,
}

/// A definition that parsed: its time zone and cron expression resolved.
#[derive(Debug, Clone)]
pub struct Timing {
    zone: Tz,
    kind: TimingKind,
}

#[derive(Debug, Clone)]
enum TimingKind {
    Cron(Box<Cron>),
    Every(i64),
}

impl Timing {
    /// Parse a spec in a time zone, with messages that say what to write instead.
    pub fn parse(spec: &ScheduleSpec, time_zone: &str) -> Result<Timing, ValidationError> {
        let zone = parse_zone(time_zone)?;
        let kind = match spec {
            ScheduleSpec::Cron(expr) => TimingKind::Cron(Box::new(parse_cron(expr)?)),
            ScheduleSpec::EverySecs(secs) => {
                if *secs == 0 || *secs > MAX_INTERVAL_SECS {
                    return Err(ValidationError::new(
                        "every_secs",
                        format!("is {secs}"),
                        format!("give an interval of 1 to {MAX_INTERVAL_SECS} seconds"),
                    ));
                }
                TimingKind::Every(i64::try_from(*secs).unwrap_or(i64::MAX))
            }
        };
        Ok(Timing { zone, kind })
    }

    /// The first occurrence strictly after `after`; `None` when there is none (a cron
    /// expression like `0 0 30 2 *`).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            TimingKind::Every(secs) => {
                let t = after.timestamp();
                let next = t.div_euclid(*secs).checked_add(1)?.checked_mul(*secs)?;
                Utc.timestamp_opt(next, 0).single()
            }
            TimingKind::Cron(cron) => {
                // Occurrences fall on whole seconds: search from `after`'s whole second (no
                // whole-second time lies between it and `after`), so no sub-second part of a
                // creation or edit time is carried into the occurrences.
                let whole = Utc.timestamp_opt(after.timestamp(), 0).single()?;
                let local = whole.with_timezone(&self.zone);
                cron.find_next_occurrence(&local, false)
                    .ok()
                    .map(|t| t.with_timezone(&Utc))
            }
        }
    }

    /// The next `n` occurrences after `after`.
    pub fn upcoming(&self, after: Timestamp, n: usize) -> Vec<Timestamp> {
        let mut out = Vec::with_capacity(n);
        let mut from = after;
        while out.len() < n {
            match self.next_after(from) {
                Some(t) if t > from => {
                    out.push(t);
                    from = t;
                }
                _ => break,
            }
        }
        out
    }

    /// The zone occurrences are computed in.
    pub fn zone(&self) -> Tz {
        self.zone
    }
}

/// Every IANA time-zone name [`parse_zone`] accepts (exactly these, case as written), in the
/// tz database's order: what the API's document lists as the time-zone names it takes.
pub fn zone_names() -> impl Iterator<Item = &'static str> {
    chrono_tz::TZ_VARIANTS.iter().map(|tz| tz.name())
}

/// An IANA time-zone name as chrono-tz knows it.
pub fn parse_zone(name: &str) -> Result<Tz, ValidationError> {
    Tz::from_str(name).map_err(|_| {
        ValidationError::new(
            "time_zone",
            format!("{name:?} is not an IANA time zone"),
            "give a name from the tz database, e.g. UTC, Europe/Berlin or America/New_York",
        )
    })
}

fn parse_cron(expr: &str) -> Result<Cron, ValidationError> {
    let trimmed = expr.trim();
    let fields = trimmed.split_whitespace().count();
    if !trimmed.starts_with('@') && !(5..=6).contains(&fields) {
        return Err(ValidationError::new(
            "cron",
            format!("{expr:?} has {fields} fields"),
            "give 5 fields (minute hour day-of-month month day-of-week), 6 with seconds first, \
             or an alias such as @hourly or @daily",
        ));
    }
    Cron::from_str(trimmed).map_err(|e| {
        ValidationError::new(
            "cron",
            format!("{expr:?} is not a cron expression: {e}"),
            "e.g. \"*/5 * * * *\" (every five minutes), \"0 30 2 * * *\" (02:30:00 daily) or \
             @hourly",
        )
    })
}

/// Check a whole definition; the parsed timing comes back for the caller's use.
pub fn validate_definition(def: &ScheduleDefinition) -> Result<Timing, ValidationError> {
    validation::validate_name("name", &def.name)?;
    if def.name == "." || def.name == ".." {
        // A path segment browsers and routers resolve: the schedule's URL would point
        // elsewhere.
        return Err(ValidationError::new(
            "name",
            format!("{:?} is not a schedule name", def.name),
            "give a name with at least one character other than a dot",
        ));
    }
    let timing = Timing::parse(&def.spec, &def.time_zone)?;
    if timing.next_after(Utc::now()).is_none() {
        return Err(ValidationError::new(
            "cron",
            format!("{} never occurs again", def.spec),
            "give an expression with future occurrences (check day-of-month against month)",
        ));
    }
    let job = &def.job;
    validation::validate_name("job.queue", &job.queue)?;
    validation::validate_name("job.job_type", &job.job_type)?;
    validation::validate_json(
        "job.payload",
        validation::normalize_payload(&job.payload),
        MAX_PAYLOAD_BYTES,
    )?;
    validation::validate_tags(&job.tags)?;
    if job.max_attempts == Some(0) {
        return Err(ValidationError::new(
            "job.max_attempts",
            "is 0",
            "give at least 1 attempt, or leave it out for the engine's default",
        ));
    }
    validation::validate_stored_int("job.max_attempts", job.max_attempts, 1)?;
    if let Some(secs) = job.expires_after_secs
        && (secs == 0 || secs > MAX_EXPIRES_AFTER_SECS)
    {
        return Err(ValidationError::new(
            "job.expires_after_secs",
            format!("is {secs}"),
            format!("give 1 to {MAX_EXPIRES_AFTER_SECS} seconds, or leave it out"),
        ));
    }
    if let MisfirePolicy::RunAll { cap } = def.misfire
        && (cap == 0 || cap > MAX_MISFIRE_CAP)
    {
        return Err(ValidationError::new(
            "misfire.cap",
            format!("is {cap}"),
            format!("catch up on 1 to {MAX_MISFIRE_CAP} missed occurrences"),
        ));
    }
    Ok(timing)
}

/// Which occurrences after `handled_through` and up to `now` to run. Occurrences at most
/// [`MISFIRE_GRACE_SECS`] late are ticks and always run; the older ones are misfires, and the
/// policy chooses among them only: `RunOnce` the latest misfire, `RunAll` the latest `cap`
/// misfires, `Skip` none.
pub fn plan(
    timing: &Timing,
    policy: MisfirePolicy,
    handled_through: Timestamp,
    now: Timestamp,
) -> Plan {
    let mut due = Vec::new();
    let mut from = handled_through;
    while let Some(t) = timing.next_after(from) {
        if t > now || t <= from {
            break;
        }
        if due.len() == SCAN_LIMIT {
            due.remove(0);
        }
        due.push(t);
        from = t;
    }
    let Some(&latest) = due.last() else {
        return Plan {
            run: Vec::new(),
            skipped: 0,
            handled_through,
        };
    };
    // `due` is oldest first, so the misfires are a prefix and the ticks the rest.
    let misfires = due
        .iter()
        .take_while(|t| (now - **t).num_seconds() > MISFIRE_GRACE_SECS)
        .count();
    let keep = match policy {
        MisfirePolicy::RunOnce => misfires.min(1),
        MisfirePolicy::RunAll { cap } => misfires.min(cap as usize),
        MisfirePolicy::Skip => 0,
    };
    let run = due[misfires - keep..].to_vec();
    Plan {
        skipped: due.len() - run.len(),
        run,
        handled_through: latest,
    }
}

/// The job one occurrence enqueues: the schedule's template, due at the occurrence, tagged
/// with the schedule's name.
pub fn job_for(
    def: &ScheduleDefinition,
    scheduled_at: Timestamp,
    now: Timestamp,
) -> EnqueueRequest {
    let job = &def.job;
    let mut tags = job.tags.clone();
    let tag = schedule_tag(&def.name);
    if !tags.contains(&tag) && tag.chars().count() <= validation::MAX_NAME_CHARS {
        tags.push(tag);
    }
    if validation::validate_tags(&tags).is_err() {
        tags = job.tags.clone();
    }
    let start = scheduled_at.max(now);
    EnqueueRequest {
        queue: job.queue.clone(),
        job_type: job.job_type.clone(),
        payload: job.payload.clone(),
        tags,
        priority: job.priority,
        max_attempts: job.max_attempts,
        expires_at: job.expires_after_secs.and_then(|secs| {
            start.checked_add_signed(chrono::Duration::seconds(i64::try_from(secs).ok()?))
        }),
        created_by: Some(format!("schedule {}", def.name)),
        ..EnqueueRequest::default()
    }
}

/// The tag every scheduled job carries (schedule names may hold commas, tags may not).
pub fn schedule_tag(name: &str) -> String {
    format!("schedule:{}", name.replace(',', "_"))
}

/// A time shown in a schedule's zone, for pages and messages.
pub fn in_zone(t: Timestamp, zone: Tz) -> DateTime<Tz> {
    t.with_timezone(&zone)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    fn cron(expr: &str, zone: &str) -> Timing {
        Timing::parse(&ScheduleSpec::Cron(expr.into()), zone).unwrap()
    }

    #[test]
    fn five_six_field_and_alias_expressions_parse_and_others_say_what_to_write() {
        cron("*/5 * * * *", "UTC");
        cron("30 */5 * * * *", "UTC");
        cron("@hourly", "UTC");
        let e = Timing::parse(&ScheduleSpec::Cron("* * *".into()), "UTC").unwrap_err();
        assert!(e.problem.contains("3 fields"), "{e}");
        let e = Timing::parse(&ScheduleSpec::Cron("61 * * * *".into()), "UTC").unwrap_err();
        assert_eq!(e.field, "cron");
        let e = Timing::parse(&ScheduleSpec::Cron("@hourly".into()), "Mars/Olympus").unwrap_err();
        assert_eq!(e.field, "time_zone");
        let e = Timing::parse(&ScheduleSpec::EverySecs(0), "UTC").unwrap_err();
        assert_eq!(e.field, "every_secs");
    }

    #[test]
    fn the_zone_names_are_exactly_the_zones_that_parse() {
        let names: Vec<&str> = zone_names().collect();
        assert!(names.len() > 400, "{}", names.len());
        for name in &names {
            assert_eq!(parse_zone(name).map(|z| z.name()), Ok(*name));
        }
        for other in ["", "utc", "europe/berlin", "Nowhere/Land", " UTC"] {
            assert!(!names.contains(&other));
            assert!(parse_zone(other).is_err(), "{other:?}");
        }
    }

    #[test]
    fn cron_is_read_in_the_schedules_zone() {
        let t = cron("0 9 * * *", "Europe/Berlin");
        // 09:00 in Berlin in winter is 08:00 UTC.
        assert_eq!(
            t.next_after(at("2026-12-03T00:00:00Z")),
            Some(at("2026-12-03T08:00:00Z"))
        );
        assert_eq!(
            t.upcoming(at("2026-12-03T00:00:00Z"), 3),
            vec![
                at("2026-12-03T08:00:00Z"),
                at("2026-12-04T08:00:00Z"),
                at("2026-12-05T08:00:00Z")
            ]
        );
    }

    #[test]
    fn a_fixed_time_in_the_spring_gap_runs_after_it_and_in_the_autumn_repeat_once() {
        // Berlin skips 02:00–03:00 on 2026-03-29 and repeats 02:00–03:00 on 2026-10-25.
        let t = cron("30 2 * * *", "Europe/Berlin");
        let spring = t.upcoming(at("2026-03-28T12:00:00Z"), 2);
        assert_eq!(
            spring[0],
            at("2026-03-29T01:00:00Z"),
            "03:00 CEST, right after the gap"
        );
        assert_eq!(spring[1], at("2026-03-30T00:30:00Z"));
        let autumn = t.upcoming(at("2026-10-24T12:00:00Z"), 2);
        assert_eq!(
            autumn[0],
            at("2026-10-25T00:30:00Z"),
            "the first 02:30 only"
        );
        assert_eq!(autumn[1], at("2026-10-26T01:30:00Z"));
    }

    #[test]
    fn intervals_align_to_the_epoch_so_every_instance_agrees() {
        let t = Timing::parse(&ScheduleSpec::EverySecs(3600), "Asia/Kolkata").unwrap();
        assert_eq!(
            t.next_after(at("2026-12-03T10:17:00Z")),
            Some(at("2026-12-03T11:00:00Z"))
        );
        assert_eq!(
            t.next_after(at("2026-12-03T11:00:00Z")),
            Some(at("2026-12-03T12:00:00Z")),
            "strictly after"
        );
    }

    #[test]
    fn misfire_policies_choose_among_missed_occurrences() {
        let t = cron("0 * * * *", "UTC");
        let cursor = at("2026-12-03T00:00:00Z");
        let now = at("2026-12-03T05:30:00Z");
        let once = plan(&t, MisfirePolicy::RunOnce, cursor, now);
        assert_eq!(once.run, vec![at("2026-12-03T05:00:00Z")]);
        assert_eq!(once.skipped, 4);
        assert_eq!(once.handled_through, at("2026-12-03T05:00:00Z"));
        let all = plan(&t, MisfirePolicy::RunAll { cap: 3 }, cursor, now);
        assert_eq!(
            all.run,
            vec![
                at("2026-12-03T03:00:00Z"),
                at("2026-12-03T04:00:00Z"),
                at("2026-12-03T05:00:00Z")
            ]
        );
        let skip = plan(&t, MisfirePolicy::Skip, cursor, now);
        assert!(skip.run.is_empty());
        assert_eq!(skip.skipped, 5);
        assert_eq!(skip.handled_through, at("2026-12-03T05:00:00Z"));
        // On time is not a misfire: even Skip runs it.
        let tick = plan(
            &t,
            MisfirePolicy::Skip,
            at("2026-12-03T05:00:00Z"),
            at("2026-12-03T06:00:02Z"),
        );
        assert_eq!(tick.run, vec![at("2026-12-03T06:00:00Z")]);
        let nothing = plan(
            &t,
            MisfirePolicy::RunOnce,
            at("2026-12-03T06:00:00Z"),
            at("2026-12-03T06:30:00Z"),
        );
        assert!(nothing.run.is_empty());
        assert_eq!(nothing.handled_through, at("2026-12-03T06:00:00Z"));
    }

    #[test]
    fn occurrences_fall_on_whole_seconds_whatever_the_cursors_fraction() {
        let after = at("2026-12-03T01:29:59.406865946Z");
        let every_minute = cron("* * * * *", "UTC");
        assert_eq!(
            every_minute.next_after(after),
            Some(at("2026-12-03T01:30:00Z"))
        );
        let every_second = cron("* * * * * *", "Europe/Berlin");
        assert_eq!(
            every_second.next_after(after),
            Some(at("2026-12-03T01:30:00Z")),
            "the next whole second, not one second after the fraction"
        );
        assert_eq!(
            every_second.next_after(at("2026-12-03T01:30:00Z")),
            Some(at("2026-12-03T01:30:01Z")),
            "strictly after a whole second"
        );
        let interval = Timing::parse(&ScheduleSpec::EverySecs(90), "UTC").unwrap();
        for t in every_minute
            .upcoming(after, 5)
            .into_iter()
            .chain(interval.upcoming(after, 5))
        {
            assert_eq!(t.timestamp_subsec_nanos(), 0, "{t} has a sub-second part");
        }
    }

    #[test]
    fn after_an_outage_each_policy_runs_what_it_promises_and_ticks_always_run() {
        // Down 100 s on an every-10-s schedule: the occurrences 65, 75, 85 and 95 s late
        // are misfires, the six within the grace are ticks.
        let t = Timing::parse(&ScheduleSpec::EverySecs(10), "UTC").unwrap();
        let cursor = at("2026-12-03T00:00:00Z");
        let now = at("2026-12-03T00:01:45Z");
        let ticks: Vec<Timestamp> = (5..=10)
            .map(|i| cursor + chrono::Duration::seconds(10 * i))
            .collect();
        let misfire = |i: i64| cursor + chrono::Duration::seconds(10 * i);
        let once = plan(&t, MisfirePolicy::RunOnce, cursor, now);
        assert_eq!(once.run, [vec![misfire(4)], ticks.clone()].concat());
        assert_eq!(once.skipped, 3);
        let all = plan(&t, MisfirePolicy::RunAll { cap: 3 }, cursor, now);
        assert_eq!(
            all.run,
            [vec![misfire(2), misfire(3), misfire(4)], ticks.clone()].concat()
        );
        assert_eq!(all.skipped, 1);
        let all_of_them = plan(&t, MisfirePolicy::RunAll { cap: 10 }, cursor, now);
        assert_eq!(all_of_them.run.len(), 10);
        let skip = plan(&t, MisfirePolicy::Skip, cursor, now);
        assert_eq!(skip.run, ticks);
        assert_eq!(skip.skipped, 4);
        for p in [once, all, skip] {
            assert_eq!(p.handled_through, misfire(10));
        }
    }

    #[test]
    fn scheduled_jobs_carry_the_template_and_the_schedules_tag() {
        let def = crate::conformance::support::report_schedule("nightly");
        validate_definition(&def).unwrap();
        let occ = at("2026-12-03T00:00:00Z");
        let req = job_for(&def, occ, occ);
        assert_eq!(req.queue, "reports");
        assert_eq!(
            req.tags,
            vec!["finance".to_string(), "schedule:nightly".into()]
        );
        assert_eq!(req.expires_at, Some(at("2026-12-03T00:10:00Z")));
        assert_eq!(req.max_attempts, Some(3));
        let mut bad = def.clone();
        bad.job.max_attempts = Some(0);
        assert_eq!(
            validate_definition(&bad).unwrap_err().field,
            "job.max_attempts"
        );
        bad = def;
        bad.misfire = MisfirePolicy::RunAll { cap: 0 };
        assert_eq!(validate_definition(&bad).unwrap_err().field, "misfire.cap");
    }
}
