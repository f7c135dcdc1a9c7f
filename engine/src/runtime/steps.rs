//! Sweeps made of store steps (rescue, retention): each step one short transaction of at
//! most `limit` rows, repeated until a step comes back short.

use std::future::Future;

use crate::error::StoreResult;

/// Steps per kind in one sweep, so one sweep cannot run for ever while rows keep arriving
/// faster than it moves them (the next sweep carries on).
pub(crate) const MAX_STEPS: usize = 200;

/// Run `step` until it moves fewer than `limit` rows, at most `MAX_STEPS` times; returns
/// how many rows moved in all.
pub(crate) async fn until_short<F, Fut>(limit: u32, mut step: F) -> StoreResult<u64>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<u64>>,
{
    let mut moved = 0;
    for _ in 0..MAX_STEPS {
        let n = step().await?;
        moved += n;
        if n < u64::from(limit) {
            break;
        }
    }
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn steps_until_one_comes_back_short_or_the_cap() {
        let mut left = 25u64;
        let moved = until_short(10, || {
            let n = left.min(10);
            left -= n;
            async move { Ok(n) }
        })
        .await
        .unwrap();
        assert_eq!(moved, 25);

        let mut calls = 0;
        let moved = until_short(1, || {
            calls += 1;
            async { Ok(1) }
        })
        .await
        .unwrap();
        assert_eq!((moved, calls), (MAX_STEPS as u64, MAX_STEPS));
    }
}
