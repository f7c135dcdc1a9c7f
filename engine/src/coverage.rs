//! Work no instance takes: pending jobs held against what the live instances claim (their
//! queues and job types, as their rows report them). A queue no live instance serves, or a
//! job type none of the instances serving its queue runs, waits forever without an error
//! anywhere; the console shows these as warnings. External (pull) workers count while they
//! beat; quieted and lost instances, and engines without workers, take nothing.

use serde::Serialize;

use crate::model::{InstanceInfo, InstanceKind, InstanceStatus, Timestamp};
use crate::telemetry::PendingGroup;

/// Pending work that no live instance takes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Untaken {
    /// No live instance claims from the queue at all.
    Queue { queue: String, pending: u64 },
    /// Instances claim from the queue, but none of them runs this job type.
    Type {
        queue: String,
        job_type: String,
        pending: u64,
    },
}

impl Untaken {
    pub fn queue(&self) -> &str {
        match self {
            Untaken::Queue { queue, .. } | Untaken::Type { queue, .. } => queue,
        }
    }

    pub fn pending(&self) -> u64 {
        match self {
            Untaken::Queue { pending, .. } | Untaken::Type { pending, .. } => *pending,
        }
    }

    /// What an operator reads, with the fix.
    pub fn message(&self) -> String {
        match self {
            Untaken::Queue { queue, pending } => format!(
                "no instance serves queue {queue} ({pending} pending): start a worker whose \
                 queues include it, or resume a quieted one"
            ),
            Untaken::Type {
                queue,
                job_type,
                pending,
            } => format!(
                "no instance takes type {job_type} in queue {queue} ({pending} pending): \
                 register a handler for it, or start a worker that pulls it"
            ),
        }
    }
}

/// Whether an instance claims jobs now: live, not quieted, with workers (engines) or a
/// heartbeat (external workers, whose row stands for their pulls).
fn is_taker(i: &InstanceInfo, now: Timestamp) -> bool {
    i.status(now) == InstanceStatus::Live
        && !i.quiet
        && (i.kind == InstanceKind::External || i.workers_total > 0)
}

fn serves_queue(i: &InstanceInfo, queue: &str) -> bool {
    i.queues
        .as_ref()
        .is_none_or(|qs| qs.iter().any(|q| q == queue))
}

/// The pending work of `pending` that none of `instances` takes at `now`, queues before
/// types, each queue once; queues `paused` says are paused are left out (they wait by an
/// operator's choice).
pub fn untaken(
    pending: &[PendingGroup],
    instances: &[InstanceInfo],
    now: Timestamp,
    paused: impl Fn(&str) -> bool,
) -> Vec<Untaken> {
    let takers: Vec<&InstanceInfo> = instances.iter().filter(|i| is_taker(i, now)).collect();
    let mut queues: Vec<Untaken> = Vec::new();
    let mut types: Vec<Untaken> = Vec::new();
    for g in pending
        .iter()
        .filter(|g| g.pending > 0 && !paused(&g.queue))
    {
        if takers.iter().any(|i| i.takes(&g.queue, &g.job_type)) {
            continue;
        }
        if takers.iter().any(|i| serves_queue(i, &g.queue)) {
            types.push(Untaken::Type {
                queue: g.queue.clone(),
                job_type: g.job_type.clone(),
                pending: g.pending,
            });
        } else if let Some(Untaken::Queue { pending, .. }) =
            queues.iter_mut().find(|u| u.queue() == g.queue)
        {
            *pending += g.pending;
        } else {
            queues.push(Untaken::Queue {
                queue: g.queue.clone(),
                pending: g.pending,
            });
        }
    }
    queues.sort_by(|a, b| a.queue().cmp(b.queue()));
    queues.extend(types);
    queues
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn group(queue: &str, job_type: &str, pending: u64) -> PendingGroup {
        PendingGroup {
            queue: queue.into(),
            job_type: job_type.into(),
            pending,
        }
    }

    fn engine(queues: Option<&[&str]>, types: Option<&[&str]>) -> InstanceInfo {
        let names = |n: Option<&[&str]>| n.map(|n| n.iter().map(|s| s.to_string()).collect());
        InstanceInfo {
            id: "i".into(),
            host: "h".into(),
            pid: 1,
            version: "v".into(),
            started_at: Utc::now(),
            heartbeat_at: Utc::now(),
            workers_total: 10,
            workers_busy: 0,
            kind: InstanceKind::Engine,
            queues: names(queues),
            job_types: names(types),
            quiet: false,
            held_jobs: 0,
            stopped: false,
        }
    }

    #[test]
    fn a_queue_nobody_serves_and_a_type_nobody_runs_are_named() {
        let pending = [
            group("mail", "email.send", 5),
            group("mail", "email.digest", 2),
            group("reports", "report.build", 3),
            group("reports", "report.mail", 1),
        ];
        let instances = [engine(Some(&["mail"]), Some(&["email.send"]))];
        let found = untaken(&pending, &instances, Utc::now(), |_| false);
        assert_eq!(
            found,
            [
                Untaken::Queue {
                    queue: "reports".into(),
                    pending: 4
                },
                Untaken::Type {
                    queue: "mail".into(),
                    job_type: "email.digest".into(),
                    pending: 2
                },
            ]
        );
        assert!(
            found[1]
                .message()
                .contains("no instance takes type email.digest")
        );
        assert!(
            found[0]
                .message()
                .contains("no instance serves queue reports")
        );
        // A paused queue waits by choice.
        let found = untaken(&pending, &instances, Utc::now(), |q| q == "reports");
        assert_eq!(found.len(), 1);
    }

    #[test]
    fn only_live_claiming_instances_take_work() {
        let pending = [group("q", "t", 1)];
        let taker = engine(None, None);
        assert!(
            untaken(&pending, std::slice::from_ref(&taker), Utc::now(), |_| {
                false
            })
            .is_empty()
        );
        let lost = InstanceInfo {
            heartbeat_at: Utc::now() - chrono::Duration::seconds(120),
            ..taker.clone()
        };
        let quiet = InstanceInfo {
            quiet: true,
            ..taker.clone()
        };
        let console_only = InstanceInfo {
            workers_total: 0,
            ..taker.clone()
        };
        for none in [lost, quiet, console_only] {
            assert_eq!(untaken(&pending, &[none], Utc::now(), |_| false).len(), 1,);
        }
        // An external worker pulling the type takes it while it beats.
        let external = InstanceInfo {
            kind: InstanceKind::External,
            workers_total: 0,
            job_types: Some(vec!["t".into()]),
            ..taker
        };
        assert!(untaken(&pending, &[external], Utc::now(), |_| false).is_empty());
    }
}
