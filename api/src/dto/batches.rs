//! Batch bodies: a batch as `POST /batches` takes it (members as on `POST /jobs`, and the
//! callbacks), and a batch with its counts and callbacks as every read answers.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use deck_engine::{Batch, BatchCallback, BatchCallbacks, BatchEvent, BatchRequest, JobSummary};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::openapi::schema::{AllOfBuilder, ArrayBuilder, ObjectBuilder, Schema, Type};
use utoipa::openapi::{Ref, RefOr};
use utoipa::{PartialSchema, ToSchema};
use uuid::Uuid;

use super::{EnqueueJob, StateDto, json_value, state_dto};
use crate::error::ApiError;
use crate::limits::{AnyJson, Description, Name};
use crate::wire::{integer, objects, optional_integer, optional_object};

/// A job a callback enqueues. Its payload is built by the engine:
/// `{"batch_id", "event", "description", "total", "succeeded", "dead", "args"}`, where `args`
/// is the `payload` given here.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbackBody {
    #[schema(value_type = Name, example = "reports")]
    pub queue: String,
    #[serde(rename = "type")]
    #[schema(value_type = Name, example = "report.summarize")]
    pub job_type: String,
    /// Handed to the callback as `args`: any JSON value. Absent means `null`.
    #[serde(default)]
    #[schema(value_type = AnyJson)]
    pub payload: Value,
    #[serde(default, deserialize_with = "integer")]
    pub priority: i32,
    #[serde(default, deserialize_with = "optional_integer")]
    #[schema(minimum = 1, maximum = 2_147_483_647)]
    pub max_attempts: Option<u32>,
}

impl CallbackBody {
    fn into_callback(self) -> BatchCallback {
        BatchCallback {
            queue: self.queue,
            job_type: self.job_type,
            payload: (!self.payload.is_null()).then(|| self.payload.to_string()),
            priority: self.priority,
            max_attempts: self.max_attempts,
        }
    }
}

/// Which callbacks a batch has. Each is enqueued at most once, in the transaction of the
/// member move that makes it due.
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallbacksBody {
    /// Every member succeeded.
    #[serde(default, deserialize_with = "optional_object")]
    pub on_success: Option<CallbackBody>,
    /// Every member reached a final state (succeeded or dead).
    #[serde(default, deserialize_with = "optional_object")]
    pub on_complete: Option<CallbackBody>,
    /// A member died (the first death).
    #[serde(default, deserialize_with = "optional_object")]
    pub on_death: Option<CallbackBody>,
}

/// A batch to create: its members are written in one transaction, all or none.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBatch {
    /// Shown in the console and handed to the callbacks.
    #[serde(default)]
    #[schema(value_type = Option<Description>, example = "October invoices")]
    pub description: Option<String>,
    /// 1 to 10,000 members, each as on `POST /jobs` but without an idempotency key.
    #[serde(deserialize_with = "objects")]
    #[schema(value_type = Vec<BatchMember>, min_items = 1, max_items = 10_000)]
    pub jobs: Vec<EnqueueJob>,
    #[serde(default, deserialize_with = "optional_object")]
    pub callbacks: Option<CallbacksBody>,
}

impl NewBatch {
    pub fn into_request(self, actor: &str) -> BatchRequest {
        let callbacks = self.callbacks.unwrap_or_default();
        BatchRequest {
            description: self.description,
            created_by: Some(actor.to_string()),
            jobs: self
                .jobs
                .into_iter()
                .map(|j| j.into_request(actor))
                .collect(),
            callbacks: BatchCallbacks {
                on_success: callbacks.on_success.map(CallbackBody::into_callback),
                on_complete: callbacks.on_complete.map(CallbackBody::into_callback),
                on_death: callbacks.on_death.map(CallbackBody::into_callback),
            },
        }
    }
}

/// A batch member: an `EnqueueJob` without `idempotency_key` (and so without a uniqueness
/// window): a member found by its key would be some other job, and the batch's counts could
/// never add up to its own members.
pub struct BatchMember;

impl PartialSchema for BatchMember {
    fn schema() -> RefOr<Schema> {
        let keyless = ObjectBuilder::new()
            .property(
                "idempotency_key",
                ObjectBuilder::new().schema_type(Type::Null),
            )
            .property(
                "unique_for_ms",
                ObjectBuilder::new().schema_type(Type::Null),
            )
            .property(
                "unique_states",
                ArrayBuilder::new()
                    .items(ObjectBuilder::new())
                    .max_items(Some(0)),
            );
        AllOfBuilder::new()
            .item(RefOr::Ref(Ref::from_schema_name("EnqueueJob")))
            .item(keyless)
            .description(Some(
                "A job as on `POST /jobs`, without `idempotency_key`, `unique_for_ms` or \
                 `unique_states`.",
            ))
            .into()
    }
}

impl ToSchema for BatchMember {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("BatchMember")
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push(("EnqueueJob".to_string(), EnqueueJob::schema()));
        <EnqueueJob as ToSchema>::schemas(schemas);
    }
}

/// The engine names a member's type key `job_type`; on the wire it is `type`.
pub fn wire_field(mut e: ApiError) -> ApiError {
    let Some(field) = e.field.clone() else {
        return e;
    };
    let Some(head) = field.strip_suffix(".job_type") else {
        return e;
    };
    let wire = format!("{head}.type");
    e.message = e
        .message
        .replacen(&format!("invalid {field}:"), &format!("invalid {wire}:"), 1);
    e.field = Some(wire);
    e
}

/// A callback as configured, and the job it became once it fired.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallbackView {
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    #[schema(value_type = AnyJson)]
    pub payload: Value,
    pub priority: i32,
    pub max_attempts: Option<u32>,
    /// The callback's job, once it fired (`null` until then).
    #[schema(value_type = Option<String>, format = Uuid)]
    pub job_id: Option<Uuid>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CallbacksView {
    pub on_success: Option<CallbackView>,
    pub on_complete: Option<CallbackView>,
    pub on_death: Option<CallbackView>,
}

/// A batch and its members' counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub description: Option<String>,
    pub created_by: Option<String>,
    pub created_at: DateTime<Utc>,
    /// Members (a purged pending member leaves the batch).
    pub total: u32,
    pub succeeded: u32,
    pub dead: u32,
    /// Members not finished yet.
    pub pending: u32,
    /// True while every member is finished (a resurrected member reopens the batch).
    pub finished: bool,
    pub finished_at: Option<DateTime<Utc>>,
    pub callbacks: CallbacksView,
}

impl From<&Batch> for BatchView {
    fn from(b: &Batch) -> Self {
        let view = |event: BatchEvent| {
            b.callbacks.get(event).map(|cb| CallbackView {
                queue: cb.queue.clone(),
                job_type: cb.job_type.clone(),
                payload: cb.payload.as_deref().map_or(Value::Null, json_value),
                priority: cb.priority,
                max_attempts: cb.max_attempts,
                job_id: b.fired(event).map(|id| id.0),
            })
        };
        BatchView {
            id: b.id.0,
            description: b.description.clone(),
            created_by: b.created_by.clone(),
            created_at: b.created_at,
            total: b.total,
            succeeded: b.succeeded,
            dead: b.dead,
            pending: b.pending(),
            finished: b.finished_at.is_some(),
            finished_at: b.finished_at,
            callbacks: CallbacksView {
                on_success: view(BatchEvent::Success),
                on_complete: view(BatchEvent::Complete),
                on_death: view(BatchEvent::Death),
            },
        }
    }
}

/// What creating a batch wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchCreatedView {
    pub batch: BatchView,
    /// The members' ids, in request order.
    #[schema(value_type = Vec<String>)]
    pub job_ids: Vec<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchList {
    /// Newest first.
    pub batches: Vec<BatchView>,
    /// Pass as `?before=` for the next (older) page; `null` on the last page.
    #[schema(value_type = Option<String>, format = Uuid)]
    pub next_before: Option<Uuid>,
}

/// One member, wherever it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberView {
    #[schema(value_type = String, format = Uuid)]
    pub id: Uuid,
    pub queue: String,
    #[serde(rename = "type")]
    pub job_type: String,
    pub state: StateDto,
    /// Why a dead member died.
    pub reason: Option<String>,
    pub attempt: u32,
    /// The last attempt's error message (shortened).
    pub error: Option<String>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<&JobSummary> for MemberView {
    fn from(j: &JobSummary) -> Self {
        let (state, reason) = state_dto(j.state);
        MemberView {
            id: j.id.0,
            queue: j.queue.clone(),
            job_type: j.job_type.clone(),
            state,
            reason,
            attempt: j.attempt,
            error: j.last_error.clone(),
            finished_at: j.finished_at,
        }
    }
}

/// A batch with its members (active first, then dead, then succeeded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BatchDetail {
    #[serde(flatten)]
    pub batch: BatchView,
    /// At most `?members=` of them (100 when absent).
    pub members: Vec<MemberView>,
}
