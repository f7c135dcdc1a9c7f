//! JSON errors of the API: a stable machine code, a human message that says how to fix the
//! request, and the offending field when there is one.
//!
//! Every failure the API can produce goes through `ApiError`, so clients see one shape:
//! `{"error": {"code": "...", "message": "...", "field": "..."}}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use deck_engine::StoreError;
use deck_engine::validation::ValidationError;
use deck_web::auth::AUTH_CHALLENGE;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The body of every error response.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable code (`invalid_field`, `job_not_found`, ...). Match on this,
    /// never on the message.
    #[schema(example = "invalid_field")]
    pub code: String,
    /// What went wrong and how to fix it, for people.
    #[schema(example = "invalid queue: is empty (give a queue of 1 to 255 characters)")]
    pub message: String,
    /// The request field at fault (`queue`, `jobs[3].payload`, ...), when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// An API failure on its way to becoming a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub field: Option<String>,
    /// Seconds a client should wait before retrying (503s on transient store faults).
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            field: None,
            retry_after: None,
        }
    }

    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message.clone(),
                field: self.field.clone(),
            },
        }
    }
}

impl From<ValidationError> for ApiError {
    fn from(e: ValidationError) -> Self {
        let field = e.field.clone();
        ApiError::bad_request("invalid_field", e.to_string()).with_field(field)
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Invalid(v) => v.into(),
            StoreError::JobNotFound(id) => ApiError::not_found(
                "job_not_found",
                format!("job {id} not found; it may never have existed or been pruned"),
            ),
            StoreError::ScheduleNotFound(ref name) => ApiError::not_found(
                "schedule_not_found",
                format!("no schedule is named {name:?}; GET /api/v1/schedules lists them"),
            ),
            StoreError::InvalidState { .. } => ApiError::conflict("invalid_state", e.to_string()),
            StoreError::Conflict {
                code,
                field,
                message,
            } => {
                let conflict = ApiError::conflict(code, message);
                match field {
                    Some(field) => conflict.with_field(field),
                    None => conflict,
                }
            }
            // The action stands; the caller must know its audit row is missing (a retry
            // would act twice).
            StoreError::Unaudited { .. } => {
                tracing::error!(event = "api.unaudited", error = %e);
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "unaudited",
                    e.to_string(),
                )
            }
            StoreError::Database {
                transient: true, ..
            } => {
                tracing::warn!(event = "api.store_busy", error = %e);
                ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "store_busy",
                        format!("{e}; retry shortly"),
                    )
                }
            }
            StoreError::Closed => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "shutting_down",
                "the server is shutting down; retry against another instance or after restart",
            ),
            // A full disk or a replaced database file: nothing the caller did; retry here
            // once the operator fixed it, or elsewhere.
            StoreError::Config { .. }
            | StoreError::Unavailable { .. }
            | StoreError::Schema { .. }
            | StoreError::Storage { .. }
            | StoreError::FileReplaced { .. } => {
                tracing::error!(event = "api.store_unavailable", error = %e);
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    e.to_string(),
                )
            }
            StoreError::Database { .. } => {
                tracing::error!(event = "api.store_error", error = %e);
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "store_error",
                    e.to_string(),
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(AUTH_CHALLENGE),
            );
        }
        if let Some(secs) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use deck_engine::JobId;

    #[test]
    fn validation_errors_name_the_field() {
        let e: ApiError = StoreError::Invalid(ValidationError::new(
            "jobs[1].queue",
            "is empty",
            "give a queue",
        ))
        .into();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert_eq!(e.code, "invalid_field");
        assert_eq!(e.field.as_deref(), Some("jobs[1].queue"));
        assert!(e.message.contains("is empty"));
    }

    #[test]
    fn store_errors_map_to_statuses() {
        let id = JobId::new();
        assert_eq!(
            ApiError::from(StoreError::JobNotFound(id)).status,
            StatusCode::NOT_FOUND
        );
        let busy = ApiError::from(StoreError::database("claim", "locked", true));
        assert_eq!(busy.status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(busy.retry_after, Some(1));
        assert_eq!(
            ApiError::from(StoreError::database("claim", "boom", false)).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let full = ApiError::from(StoreError::Storage {
            operation: "enqueue",
            message: "database or disk is full".into(),
            help: "free space".into(),
        });
        assert_eq!(
            (full.status, full.code),
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
        );
        let replaced = ApiError::from(StoreError::FileReplaced {
            path: "/var/lib/deck/deck.db".into(),
            change: "deleted",
        });
        assert_eq!(
            (replaced.status, replaced.code),
            (StatusCode::SERVICE_UNAVAILABLE, "store_unavailable")
        );
        assert!(
            replaced.message.contains("restart deck"),
            "{}",
            replaced.message
        );
    }
}
