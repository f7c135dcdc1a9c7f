//! One round trip per store operation: a statement batch from `queries` (or one `job_lists`
//! builds) sent on a pooled connection under the retry policy its safety allows, and its one
//! declared answer read back (`reader`). Every concern module reaches the database this way.

use std::time::Duration;

use super::SqlServerStore;
use super::connection::SchemaName;
use super::job_lists::Built;
use super::pool::{self, Fault, PooledConn, Repeat};
use super::queries::{Reads, Statement};
use super::reader;
use super::rows::count;
use super::wire;
use crate::error::{StoreError, StoreResult};

/// Hand the connection to an attempt and take it back with the result (see `pool::run`).
macro_rules! attempt {
    (|$client:ident| $body:expr) => {
        move |mut conn: PooledConn| async move {
            let result: Result<_, Fault> = async {
                let $client = &mut conn.client;
                $body
            }
            .await;
            (conn, result)
        }
    };
}
pub(super) use attempt;

impl SqlServerStore {
    pub(super) fn schema(&self) -> &SchemaName {
        &self.schema
    }

    pub(super) fn sql(&self, template: &str) -> String {
        template.replace("{schema}", self.schema.as_str())
    }

    pub(super) async fn run<T, F, Fut>(
        &self,
        operation: &'static str,
        repeat: Repeat,
        attempt: F,
    ) -> StoreResult<T>
    where
        F: FnMut(PooledConn) -> Fut,
        Fut: std::future::Future<Output = (PooledConn, Result<T, Fault>)>,
    {
        self.run_with_timeout(operation, repeat, self.command_timeout, attempt)
            .await
    }

    /// [`Self::run`] with a time limit of its own instead of the command timeout.
    pub(super) async fn run_with_timeout<T, F, Fut>(
        &self,
        operation: &'static str,
        repeat: Repeat,
        timeout: Duration,
        attempt: F,
    ) -> StoreResult<T>
    where
        F: FnMut(PooledConn) -> Fut,
        Fut: std::future::Future<Output = (PooledConn, Result<T, Fault>)>,
    {
        pool::run(
            &self.pool,
            &self.last_connect_error,
            operation,
            repeat,
            false,
            self.retry,
            timeout,
            attempt,
        )
        .await
    }

    /// Run a statement and read its one declared answer (`reader`).
    async fn answer(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &'static str,
        reads: Reads,
        sql: &str,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        self.run(
            operation,
            repeat,
            attempt!(|client| {
                let stream = wire::query(client, sql, params).await?;
                reader::read_declared(statement, reads, stream).await
            }),
        )
        .await
    }

    /// The rows of a fixed statement.
    pub(super) async fn rows_of(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        let sql = self.sql(statement.sql);
        self.answer(
            operation,
            repeat,
            statement.name,
            statement.reads,
            &sql,
            params,
        )
        .await
    }

    /// The rows of a fixed statement that is re-sent after any transient fault and whose
    /// second attempt may meet the first one's rows at a key: a duplicate key is transient
    /// too, and the attempt after it finds those rows committed (a batch, a schedule run).
    pub(super) async fn rows_of_keyed(
        &self,
        operation: &'static str,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
    ) -> StoreResult<Vec<tiberius::Row>> {
        let sql = self.sql(statement.sql);
        let sql = &sql;
        pool::run(
            &self.pool,
            &self.last_connect_error,
            operation,
            Repeat::Always,
            true,
            self.retry,
            self.command_timeout,
            attempt!(|client| {
                let stream = wire::query(client, sql, params).await?;
                reader::read_declared(statement.name, statement.reads, stream).await
            }),
        )
        .await
    }

    /// The rows of a console statement built at run time.
    pub(super) async fn rows_of_built(
        &self,
        operation: &'static str,
        built: &Built,
    ) -> StoreResult<Vec<tiberius::Row>> {
        let params = built.sql_params();
        self.answer(
            operation,
            Repeat::Always,
            "job list",
            built.reads,
            &built.sql,
            &params,
        )
        .await
    }

    /// A single-row, single-count answer (`SELECT … AS name`).
    pub(super) async fn count_of(
        &self,
        operation: &'static str,
        repeat: Repeat,
        statement: &Statement,
        params: &[&dyn tiberius::ToSql],
        column: &'static str,
    ) -> StoreResult<u64> {
        let rows = self.rows_of(operation, repeat, statement, params).await?;
        match rows.first() {
            Some(row) => count(row, column).map_err(|f| self.fault(operation, f)),
            None => Ok(0),
        }
    }

    pub(super) fn fault(&self, operation: &'static str, fault: Fault) -> StoreError {
        pool::into_store_error(operation, fault, pool::Transience::Permanent)
    }

    pub(super) fn map_rows<T>(
        &self,
        operation: &'static str,
        rows: &[tiberius::Row],
        f: impl Fn(&tiberius::Row) -> Result<T, Fault>,
    ) -> StoreResult<Vec<T>> {
        rows.iter()
            .map(|r| f(r).map_err(|e| self.fault(operation, e)))
            .collect()
    }
}
