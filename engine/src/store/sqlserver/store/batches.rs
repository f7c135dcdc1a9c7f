//! Batches on SQL Server. Not written yet: every call answers that the store cannot do it.

use super::SqlServerStore;
use crate::batch::{Batch, BatchCreated, BatchId, BatchRequest};
use crate::error::{StoreError, StoreResult};
use crate::query::JobSummary;

fn not_yet() -> StoreError {
    StoreError::database(
        "batches",
        "batches are not implemented on the SQL Server store yet",
        false,
    )
}

impl SqlServerStore {
    pub(super) async fn create_batch_rows(&self, _req: BatchRequest) -> StoreResult<BatchCreated> {
        Err(not_yet())
    }

    pub(super) async fn batch_row(&self, _id: BatchId) -> StoreResult<Option<Batch>> {
        Err(not_yet())
    }

    pub(super) async fn batch_rows(
        &self,
        _before: Option<BatchId>,
        _limit: u32,
    ) -> StoreResult<Vec<Batch>> {
        Err(not_yet())
    }

    pub(super) async fn batch_member_rows(
        &self,
        _id: BatchId,
        _limit: u32,
    ) -> StoreResult<Vec<JobSummary>> {
        Err(not_yet())
    }
}
