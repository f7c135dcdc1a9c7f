//! The embedded SQLite store (placeholder until the backend lands).
use std::sync::Arc;

use crate::error::{StoreError, StoreResult};
use crate::store::{Store, StoreOptions};

pub async fn open(path: &str, _options: &StoreOptions) -> StoreResult<Arc<dyn Store>> {
    Err(StoreError::Unavailable {
        url: path.into(),
        cause: "not built yet".into(),
        help: String::new(),
    })
}
