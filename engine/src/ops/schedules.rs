//! Recurring schedules through the one door: create, edit, pause, resume, run now and delete
//! (audited as `schedule.*`), the start-up declaration of `deck.toml`'s and the `Engine`
//! builder's schedules, and the fire every scheduler run and "run now" share.

use chrono::Utc;
use serde::Serialize;

use crate::error::{StoreError, StoreResult};
use crate::events::{EngineEvent, EventKind};
use crate::model::{Applied, JobId};
use crate::schedule::{
    self, FireOutcome, Occurrence, OverlapPolicy, Schedule, ScheduleDefinition, ScheduleFire,
    ScheduleOrigin,
};
use crate::validation;

use super::Operations;

/// What the start-up declaration changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DeclareReport {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub unchanged: Vec<String>,
    /// Declared at an earlier start, no longer declared now: paused (kept with their
    /// history, so an operator can look at them and delete them).
    pub paused_undeclared: Vec<String>,
}

impl Operations {
    /// Create a schedule; its first occurrence is the first one after now.
    pub async fn create_schedule(
        &self,
        actor: &str,
        definition: ScheduleDefinition,
    ) -> StoreResult<Schedule> {
        check_definition(actor, &definition)?;
        let detail = serde_json::to_string(&definition).ok();
        let name = definition.name.clone();
        let created = self
            .audit_refusal(
                self.store
                    .create_schedule(definition, ScheduleOrigin::Operator, true)
                    .await,
                actor,
                "schedule.create",
                &name,
                None,
            )
            .await?;
        self.announce(&created, "created");
        self.audited(actor, "schedule.create", name, 1, detail)
            .write()
            .await?;
        Ok(created)
    }

    /// Replace a schedule's definition; its state (paused, last run, history) stays. A
    /// declared schedule stays declared: the next start puts the declared definition back.
    pub async fn edit_schedule(
        &self,
        actor: &str,
        definition: ScheduleDefinition,
    ) -> StoreResult<Schedule> {
        check_definition(actor, &definition)?;
        let current = self
            .audit_refusal(
                self.schedule(&definition.name).await,
                actor,
                "schedule.edit",
                &definition.name,
                None,
            )
            .await?;
        let detail = serde_json::json!({
            "before": current.definition,
            "after": definition,
        })
        .to_string();
        let name = definition.name.clone();
        let edited = self
            .audit_refusal(
                self.store
                    .replace_schedule(definition, current.origin)
                    .await,
                actor,
                "schedule.edit",
                &name,
                None,
            )
            .await?;
        self.announce(&edited, "edited");
        self.audited(actor, "schedule.edit", name, 1, Some(detail))
            .write()
            .await?;
        Ok(edited)
    }

    /// Pause (`enabled: false`) or resume a schedule. Occurrences that pass while it is
    /// paused are not caught up on when it resumes.
    pub async fn set_schedule_enabled(
        &self,
        actor: &str,
        name: &str,
        enabled: bool,
    ) -> StoreResult<Schedule> {
        validation::validate_name("actor", actor)?;
        validation::validate_name("schedule", name)?;
        let (action, verb) = if enabled {
            ("schedule.resume", "resumed")
        } else {
            ("schedule.pause", "paused")
        };
        let changed = self
            .audit_refusal(
                self.store.set_schedule_enabled(name, enabled).await,
                actor,
                action,
                name,
                None,
            )
            .await?;
        self.announce(&changed, verb);
        self.audited(actor, action, name.to_string(), 1, None)
            .write()
            .await?;
        Ok(changed)
    }

    /// Enqueue the schedule's job now, outside its timing (also when it is paused); the
    /// schedule's cursor does not move, and the overlap policy does not apply: an operator
    /// asked for this run.
    pub async fn run_schedule_now(&self, actor: &str, name: &str) -> StoreResult<FireOutcome> {
        validation::validate_name("actor", actor)?;
        validation::validate_name("schedule", name)?;
        let current = self
            .audit_refusal(
                self.schedule(name).await,
                actor,
                "schedule.run_now",
                name,
                None,
            )
            .await?;
        let now = Utc::now();
        let job_id = JobId::new();
        let fire = ScheduleFire {
            schedule: name.to_string(),
            occurrences: vec![Occurrence {
                scheduled_at: now,
                job: schedule::job_for(&current.definition, now, now),
                job_id,
            }],
            handled_through: None,
            skip_while_active: false,
            manual: true,
        };
        let outcome = self
            .audit_refusal(
                self.fire(&current.definition, fire).await,
                actor,
                "schedule.run_now",
                name,
                None,
            )
            .await?
            .into_iter()
            .next()
            .unwrap_or(FireOutcome::AlreadyHandled);
        let count = u64::from(matches!(outcome, FireOutcome::Enqueued(_)));
        let mut audited = self.audited(
            actor,
            "schedule.run_now",
            name.to_string(),
            count,
            serde_json::to_string(&outcome).ok(),
        );
        if let FireOutcome::Enqueued(id) = outcome {
            audited = audited.job(id);
        }
        audited.write().await?;
        Ok(outcome)
    }

    /// Delete a schedule and its history; the jobs it enqueued stay. `NotApplied` when
    /// there is none by that name (audited with count 0).
    pub async fn delete_schedule(&self, actor: &str, name: &str) -> StoreResult<Applied> {
        validation::validate_name("actor", actor)?;
        validation::validate_name("schedule", name)?;
        let applied = self.store.delete_schedule(name).await?;
        if applied.is_applied() {
            self.events.send_with(|| {
                EngineEvent::new(
                    EventKind::OperatorAction,
                    format!("schedule {name} deleted"),
                )
            });
        }
        self.audited(
            actor,
            "schedule.delete",
            name.to_string(),
            u64::from(applied.is_applied()),
            None,
        )
        .write()
        .await?;
        Ok(applied)
    }

    /// Make the stored declared schedules what `declared` says (at start): new names are
    /// created (enabled), changed definitions replaced (pause state and history kept),
    /// declared schedules no longer in the list paused. Schedules an operator created are
    /// left alone, unless the list declares the same name: the declaration then takes the
    /// schedule over. Each change is audited under `actor` (`deck.toml`); unchanged
    /// schedules write nothing.
    pub async fn declare_schedules(
        &self,
        actor: &str,
        declared: Vec<ScheduleDefinition>,
    ) -> StoreResult<DeclareReport> {
        validation::validate_name("actor", actor)?;
        for (i, def) in declared.iter().enumerate() {
            schedule::validate_definition(def).map_err(|mut e| {
                e.field = format!("schedules[{i}].{}", e.field);
                e
            })?;
            if declared[..i].iter().any(|d| d.name == def.name) {
                return Err(validation::ValidationError::new(
                    format!("schedules[{i}].name"),
                    format!("{:?} is declared twice", def.name),
                    "give every schedule its own name",
                )
                .into());
            }
        }
        let stored = self.store.list_schedules().await?;
        let mut report = DeclareReport::default();
        for def in declared.iter() {
            let name = def.name.clone();
            match stored.iter().find(|s| s.definition.name == def.name) {
                None => {
                    let detail = serde_json::to_string(def).ok();
                    let created = self
                        .store
                        .create_schedule(def.clone(), ScheduleOrigin::Declared, true)
                        .await;
                    match created {
                        Ok(created) => self.announce(&created, "declared"),
                        // Another instance starting at the same moment declared it first.
                        Err(StoreError::Conflict { .. }) => {
                            report.unchanged.push(name);
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                    self.audited(actor, "schedule.create", name.clone(), 1, detail)
                        .write()
                        .await?;
                    report.created.push(name);
                }
                Some(s) if s.definition == *def && s.origin == ScheduleOrigin::Declared => {
                    report.unchanged.push(name);
                }
                Some(s) => {
                    let detail = serde_json::json!({
                        "before": s.definition,
                        "after": def,
                    })
                    .to_string();
                    let replaced = self
                        .store
                        .replace_schedule(def.clone(), ScheduleOrigin::Declared)
                        .await?;
                    self.announce(&replaced, "updated from its declaration");
                    self.audited(actor, "schedule.edit", name.clone(), 1, Some(detail))
                        .write()
                        .await?;
                    report.updated.push(name);
                }
            }
        }
        for s in &stored {
            let gone = s.origin == ScheduleOrigin::Declared
                && s.enabled
                && !declared.iter().any(|d| d.name == s.definition.name);
            if !gone {
                continue;
            }
            let paused = self.store.set_schedule_enabled(s.name(), false).await?;
            self.announce(&paused, "paused: no longer declared");
            self.audited(
                actor,
                "schedule.pause",
                s.name().to_string(),
                1,
                Some("no longer declared; paused (delete it to remove it)".into()),
            )
            .write()
            .await?;
            report.paused_undeclared.push(s.name().to_string());
        }
        Ok(report)
    }

    /// One schedule by name.
    pub async fn schedule(&self, name: &str) -> StoreResult<Schedule> {
        self.store
            .list_schedules()
            .await?
            .into_iter()
            .find(|s| s.definition.name == name)
            .ok_or_else(|| StoreError::ScheduleNotFound(name.to_string()))
    }

    /// Write a fire (scheduler run or run now): wake this process's fetcher for the jobs
    /// it enqueued and announce them.
    pub(crate) async fn fire(
        &self,
        definition: &ScheduleDefinition,
        fire: ScheduleFire,
    ) -> StoreResult<Vec<FireOutcome>> {
        let times: Vec<_> = fire.occurrences.iter().map(|o| o.scheduled_at).collect();
        let outcomes = self.store.fire_schedule(fire).await?;
        let enqueued = outcomes
            .iter()
            .any(|o| matches!(o, FireOutcome::Enqueued(_)));
        if enqueued && let Some(rt) = &self.runtime {
            rt.wake_fetcher();
        }
        for (outcome, at) in outcomes.iter().zip(times) {
            match outcome {
                FireOutcome::Enqueued(id) => self.events.send_with(|| {
                    EngineEvent::new(
                        EventKind::Enqueued,
                        format!(
                            "enqueued by schedule {} for {}",
                            definition.name,
                            at.format("%Y-%m-%d %H:%M:%S UTC")
                        ),
                    )
                    .job(*id, &definition.job.queue, &definition.job.job_type)
                }),
                FireOutcome::SkippedOverlap => self.events.send_with(|| {
                    EngineEvent::new(
                        EventKind::Enqueued,
                        format!(
                            "schedule {} skipped {}: its last job is still active",
                            definition.name,
                            at.format("%Y-%m-%d %H:%M:%S UTC")
                        ),
                    )
                }),
                FireOutcome::AlreadyHandled => {}
            }
        }
        Ok(outcomes)
    }

    fn announce(&self, schedule: &Schedule, verb: &str) {
        self.events.send_with(|| {
            let def = &schedule.definition;
            EngineEvent::new(
                EventKind::OperatorAction,
                format!(
                    "schedule {} {verb}: {} in {}, enqueues {} on {}{}{}",
                    def.name,
                    def.spec,
                    def.time_zone,
                    def.job.job_type,
                    def.job.queue,
                    if def.overlap == OverlapPolicy::SkipWhileActive {
                        ", one at a time"
                    } else {
                        ""
                    },
                    if schedule.enabled { "" } else { ", paused" }
                ),
            )
        });
    }
}

/// What a create and an edit both check before the store sees the definition.
fn check_definition(actor: &str, definition: &ScheduleDefinition) -> StoreResult<()> {
    validation::validate_name("actor", actor)?;
    schedule::validate_definition(definition)?;
    Ok(())
}
