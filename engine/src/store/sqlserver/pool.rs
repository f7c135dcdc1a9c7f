//! Connections, transient faults and retries.
//!
//! A pooled connection is marked broken before each use and healthy only after the operation
//! finished cleanly, so a connection that saw an error, a timeout or a cancelled future is
//! thrown away rather than handed to the next caller mid-stream or mid-transaction.

use std::future::Future;
use std::time::Duration;

use rand::Rng;

use super::queries;
use crate::error::{StoreError, StoreResult};

pub type Client = bb8_tiberius::rt::Client;

pub struct Conn {
    pub client: Client,
    broken: bool,
}

pub struct Manager {
    inner: bb8_tiberius::ConnectionManager,
}

impl Manager {
    pub fn new(config: tiberius::Config) -> Self {
        Manager {
            inner: bb8_tiberius::ConnectionManager::new(config),
        }
    }
}

impl bb8::ManageConnection for Manager {
    type Connection = Conn;
    type Error = bb8_tiberius::Error;

    async fn connect(&self) -> Result<Conn, Self::Error> {
        let mut client = bb8::ManageConnection::connect(&self.inner).await?;
        // The setup sends no rows; drain its answer all the same.
        client
            .simple_query(queries::SESSION_SETUP.sql)
            .await?
            .into_results()
            .await?;
        Ok(Conn {
            client,
            broken: false,
        })
    }

    async fn is_valid(&self, conn: &mut Conn) -> Result<(), Self::Error> {
        conn.client
            .simple_query("SELECT 1")
            .await?
            .into_results()
            .await?;
        Ok(())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
    }
}

/// Remembers the last connect failure, so "no connection within the timeout" can say why.
#[derive(Debug, Clone, Default)]
pub struct LastConnectError(std::sync::Arc<std::sync::Mutex<Option<String>>>);

impl LastConnectError {
    pub fn get(&self) -> Option<String> {
        self.0.lock().ok().and_then(|g| g.clone())
    }
}

impl bb8::ErrorSink<bb8_tiberius::Error> for LastConnectError {
    fn sink(&self, error: bb8_tiberius::Error) {
        tracing::warn!(event = "store.sqlserver.connect_failed", %error, "cannot connect to SQL Server");
        if let Ok(mut last) = self.0.lock() {
            *last = Some(error.to_string());
        }
    }

    fn boxed_clone(&self) -> Box<dyn bb8::ErrorSink<bb8_tiberius::Error>> {
        Box::new(self.clone())
    }
}

pub type Pool = bb8::Pool<Manager>;
pub type PooledConn = bb8::PooledConnection<'static, Manager>;

/// Why an attempt failed, before it becomes a `StoreError`.
#[derive(Debug)]
pub enum Fault {
    Driver(tiberius::error::Error),
    /// No connection could be had (nothing was sent): the reason, and the server's error
    /// number when the server refused the login.
    Pool(String, Option<u32>),
    /// The pool waited its whole connection timeout already: report, do not wait again.
    PoolTimeout(String),
    /// The command did not answer in time (it may or may not have committed).
    Timeout,
    Store(StoreError),
}

impl From<tiberius::error::Error> for Fault {
    fn from(e: tiberius::error::Error) -> Self {
        Fault::Driver(e)
    }
}

impl From<StoreError> for Fault {
    fn from(e: StoreError) -> Self {
        Fault::Store(e)
    }
}

/// Server errors that mean "try again later": deadlock victim, lock timeout, database
/// unavailable or moving (Azure SQL failover and throttling), resource limits, and 601 —
/// a NOLOCK read (telemetry only) that lost its place when a page split or moved under it.
pub const TRANSIENT_SERVER_ERRORS: &[u32] = &[
    601, 1205, 1222, 4060, 4221, 10928, 10929, 40143, 40197, 40501, 40540, 40613, 49918, 49919,
    49920,
];

/// Babelfish for PostgreSQL reports PostgreSQL's own lock timeout and deadlock errors under
/// one generic number, not as 1222 and 1205: told apart by their PostgreSQL text. Like those,
/// the statement was rolled back (`XACT_ABORT`), so nothing was applied.
const BABELFISH_GENERIC_ERROR: u32 = 33_557_097;

fn babelfish_transient(code: u32, message: &str) -> bool {
    code == BABELFISH_GENERIC_ERROR
        && (message.contains("canceling statement due to lock timeout")
            || message.contains("deadlock detected")
            || message.contains("could not serialize access"))
}

/// Duplicate key. Transient only for enqueue, whose retry then finds the winning row.
pub const DUPLICATE_KEY_ERRORS: &[u32] = &[2601, 2627];

/// Whether an operation may run again after a failure whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeat {
    /// Idempotent: retried on every transient fault, including a lost connection after
    /// the commit may have happened.
    Always,
    /// Retried only when the failure shows nothing was applied (the server reported the error,
    /// so `XACT_ABORT` rolled the transaction back, or no connection was had).
    IfNotApplied,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transience {
    Permanent,
    /// Nothing was applied; safe to repeat anything.
    NotApplied,
    /// The outcome is unknown.
    Ambiguous,
}

pub fn classify(fault: &Fault, duplicate_is_transient: bool) -> Transience {
    match fault {
        Fault::Driver(e) => match e {
            tiberius::error::Error::Server(token) => {
                let code = token.code();
                if TRANSIENT_SERVER_ERRORS.contains(&code)
                    || (duplicate_is_transient && DUPLICATE_KEY_ERRORS.contains(&code))
                    || babelfish_transient(code, token.message())
                {
                    Transience::NotApplied
                } else {
                    Transience::Permanent
                }
            }
            tiberius::error::Error::Io { .. } | tiberius::error::Error::Routing { .. } => {
                Transience::Ambiguous
            }
            _ => Transience::Permanent,
        },
        Fault::Pool(_, Some(code)) if !TRANSIENT_SERVER_ERRORS.contains(code) => {
            Transience::Permanent
        }
        Fault::Pool(..) | Fault::PoolTimeout(_) => Transience::NotApplied,
        Fault::Timeout => Transience::Ambiguous,
        Fault::Store(e) if e.is_transient() => Transience::Ambiguous,
        Fault::Store(_) => Transience::Permanent,
    }
}

/// Bounded retries with full jitter: at most `attempts` tries, waits drawn from
/// 0..min(cap, base × 2^n).
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 5,
            base: Duration::from_millis(50),
            cap: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    pub fn delay(&self, retry: u32) -> Duration {
        let ceiling = self
            .base
            .saturating_mul(1u32 << retry.min(16))
            .min(self.cap);
        let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(rand::rng().random_range(0..=millis))
    }
}

pub fn into_store_error(
    operation: &'static str,
    fault: Fault,
    transience: Transience,
) -> StoreError {
    match fault {
        Fault::Store(e) => e,
        Fault::Driver(e) => StoreError::database(operation, e, transience != Transience::Permanent),
        Fault::Pool(message, _) => StoreError::database(
            operation,
            format!("no database connection: {message}"),
            transience != Transience::Permanent,
        ),
        Fault::PoolTimeout(message) => StoreError::database(
            operation,
            format!("no database connection: {message}"),
            true,
        ),
        Fault::Timeout => StoreError::database(operation, "the command timed out", true),
    }
}

/// Run `attempt` with a fresh pooled connection until it succeeds, fails for good, or the
/// retry budget is spent. `attempt` gets the connection and must hand it back with the result.
#[allow(clippy::too_many_arguments)]
pub async fn run<T, F, Fut>(
    pool: &Pool,
    last_connect_error: &LastConnectError,
    operation: &'static str,
    repeat: Repeat,
    duplicate_is_transient: bool,
    policy: RetryPolicy,
    command_timeout: Duration,
    mut attempt: F,
) -> StoreResult<T>
where
    F: FnMut(PooledConn) -> Fut,
    Fut: Future<Output = (PooledConn, Result<T, Fault>)>,
{
    let mut tries = 0;
    loop {
        tries += 1;
        let outcome = match pool.get_owned().await {
            Err(bb8::RunError::TimedOut) => {
                Err(Fault::PoolTimeout(match last_connect_error.get() {
                    Some(cause) => cause,
                    None => "timed out waiting for a free connection".to_string(),
                }))
            }
            Err(bb8::RunError::User(e)) => {
                let code = match &e {
                    bb8_tiberius::Error::Tiberius(t) => t.code(),
                    bb8_tiberius::Error::Io(_) => None,
                };
                Err(Fault::Pool(e.to_string(), code))
            }
            Ok(mut conn) => {
                conn.broken = true;
                match tokio::time::timeout(command_timeout, attempt(conn)).await {
                    // The future (and with it the connection, still marked broken) is gone.
                    Err(_) => Err(Fault::Timeout),
                    Ok((mut conn, result)) => {
                        if result.is_ok() {
                            conn.broken = false;
                        }
                        result
                    }
                }
            }
        };
        let fault = match outcome {
            Ok(value) => return Ok(value),
            Err(fault) => fault,
        };
        let transience = classify(&fault, duplicate_is_transient);
        let may_repeat = match (transience, repeat) {
            (Transience::Permanent, _) => false,
            (Transience::NotApplied, _) => true,
            (Transience::Ambiguous, Repeat::Always) => true,
            (Transience::Ambiguous, Repeat::IfNotApplied) => false,
        };
        let waited = matches!(fault, Fault::PoolTimeout(_));
        if !may_repeat || waited || tries >= policy.attempts {
            return Err(into_store_error(operation, fault, transience));
        }
        let wait = policy.delay(tries - 1);
        tracing::warn!(
            event = "store.sqlserver.retry",
            operation,
            attempt = tries,
            wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            error = ?fault,
            "transient database fault; retrying"
        );
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_faults_are_ambiguous_and_pool_faults_are_not() {
        let io = Fault::Driver(tiberius::error::Error::Io {
            kind: std::io::ErrorKind::ConnectionReset,
            message: "reset".into(),
        });
        assert_eq!(classify(&io, false), Transience::Ambiguous);
        assert_eq!(
            classify(&Fault::Pool("refused".into(), None), false),
            Transience::NotApplied
        );
        // A refused login will not succeed on the next try; a paused Azure database may.
        assert_eq!(
            classify(&Fault::Pool("login failed".into(), Some(18456)), false),
            Transience::Permanent
        );
        assert_eq!(
            classify(&Fault::Pool("paused".into(), Some(40613)), false),
            Transience::NotApplied
        );
        assert_eq!(classify(&Fault::Timeout, false), Transience::Ambiguous);
        let conversion = Fault::Driver(tiberius::error::Error::Conversion("x".into()));
        assert_eq!(classify(&conversion, false), Transience::Permanent);
        let missing = Fault::Store(StoreError::JobNotFound(crate::model::JobId::new()));
        assert_eq!(classify(&missing, false), Transience::Permanent);
    }

    #[test]
    fn babelfish_lock_timeouts_and_deadlocks_are_transient() {
        assert!(babelfish_transient(
            33_557_097,
            "canceling statement due to lock timeout"
        ));
        assert!(babelfish_transient(33_557_097, "deadlock detected"));
        assert!(!babelfish_transient(
            33_557_097,
            "missing FROM-clause entry for table \"c\""
        ));
        assert!(!babelfish_transient(50_000, "deadlock detected"));
    }

    #[test]
    fn the_transient_list_covers_the_documented_codes() {
        for code in [
            601, 1205, 1222, 4060, 40197, 40501, 40613, 49918, 49919, 49920,
        ] {
            assert!(TRANSIENT_SERVER_ERRORS.contains(&code), "{code}");
        }
        assert!(!TRANSIENT_SERVER_ERRORS.contains(&2627));
    }

    #[test]
    fn backoff_is_bounded_and_jittered() {
        let policy = RetryPolicy::default();
        for retry in 0..40 {
            let wait = policy.delay(retry);
            assert!(wait <= policy.cap, "{wait:?}");
            assert!(wait <= policy.base * 2u32.pow(retry.min(10)), "{wait:?}");
        }
        let spread: std::collections::HashSet<_> = (0..50).map(|_| policy.delay(5)).collect();
        assert!(spread.len() > 1, "waits are jittered");
    }

    #[test]
    fn errors_keep_their_transience() {
        let e = into_store_error("claim", Fault::Timeout, Transience::Ambiguous);
        assert!(e.is_transient());
        let e = into_store_error(
            "claim",
            Fault::Driver(tiberius::error::Error::Conversion("bad".into())),
            Transience::Permanent,
        );
        assert!(!e.is_transient());
        assert!(e.to_string().contains("claim"));
    }
}
