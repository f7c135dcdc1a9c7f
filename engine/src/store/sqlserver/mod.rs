//! The SQL Server store (placeholder until the backend lands).
use std::sync::Arc;

use crate::error::{StoreError, StoreResult};
use crate::store::{Store, StoreOptions};

pub async fn open(connection: &str, _options: &StoreOptions) -> StoreResult<Arc<dyn Store>> {
    Err(StoreError::Unavailable {
        url: connection.into(),
        cause: "not built yet".into(),
        help: String::new(),
    })
}
