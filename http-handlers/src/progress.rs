//! Progress from a receiver: each request carries a token for that attempt; while the
//! request is in flight, the receiver may `POST /api/v1/jobs/{id}/progress` with it. The
//! token is the only credential that call needs, and it dies with the attempt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use deck_engine::{JobContext, JobId};

/// The header a progress call carries its token in.
pub const PROGRESS_TOKEN_HEADER: &str = "Deck-Progress-Token";

/// Tokens of the attempts now in flight to HTTP endpoints. Cheap to clone; every clone sees
/// the same tokens.
#[derive(Clone, Default)]
pub struct ProgressTokens(Arc<Mutex<HashMap<JobId, Issued>>>);

struct Issued {
    token: String,
    ctx: JobContext,
}

/// Why a progress call was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProgressRefused {
    /// No attempt of this job is in flight here with that token (it ended, or the token is
    /// from another attempt, or wrong).
    #[error("no attempt of this job in flight here holds that progress token")]
    NotInFlight,
}

impl ProgressTokens {
    /// A token for `ctx`'s attempt, valid until the lease drops.
    pub(crate) fn issue(&self, ctx: &JobContext) -> ProgressLease {
        let token = format!("{:032x}", rand::random::<u128>());
        self.lock().insert(
            ctx.id(),
            Issued {
                token: token.clone(),
                ctx: ctx.clone(),
            },
        );
        ProgressLease {
            tokens: self.clone(),
            id: ctx.id(),
            token,
        }
    }

    /// Record progress for the attempt holding `token`.
    pub fn report(
        &self,
        id: JobId,
        token: &str,
        percent: u8,
        message: &str,
    ) -> Result<(), ProgressRefused> {
        let map = self.lock();
        let issued = map.get(&id).ok_or(ProgressRefused::NotInFlight)?;
        if !same(issued.token.as_bytes(), token.as_bytes()) {
            return Err(ProgressRefused::NotInFlight);
        }
        issued.ctx.report_progress(percent, message);
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Issued>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Compares in constant time, so a guess learns nothing from how long a refusal took.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An issued token; dropping it (the request ended) revokes it.
pub(crate) struct ProgressLease {
    tokens: ProgressTokens,
    id: JobId,
    pub(crate) token: String,
}

impl Drop for ProgressLease {
    fn drop(&mut self) {
        let mut map = self.tokens.lock();
        if map.get(&self.id).is_some_and(|i| i.token == self.token) {
            map.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_by_content_and_length() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
    }

    fn uuid_nil() -> deck_engine::JobId {
        "00000000-0000-0000-0000-000000000000".parse().unwrap()
    }

    #[test]
    fn an_unknown_job_is_refused() {
        let tokens = ProgressTokens::default();
        assert_eq!(
            tokens.report(uuid_nil(), "x", 50, "half"),
            Err(ProgressRefused::NotInFlight)
        );
    }
}
