//! Worker names and lease tokens of the pull protocol.
//!
//! A lease is the owner id written on the jobs one claim started: `ext:<worker>:<random>`.
//! Every later report names it, and the stores check it as they check an in-process
//! worker's id, so a stale lease (its jobs rescued, cancelled, finished) changes nothing.
//! The `ext:<worker>` part is the worker's instance row: when the worker falls silent, the
//! rescuer's dead-owner check (instance id, then `:`) finds the jobs of all its leases.

use crate::validation::ValidationError;

/// What every external worker's instance id starts with.
pub const INSTANCE_PREFIX: &str = crate::model::EXTERNAL_INSTANCE_PREFIX;
/// Longest worker name: the lease must fit the stores' 255-character worker ids.
pub const MAX_WORKER_NAME: usize = 100;
/// Hex digits of a lease's random part (128 bits: not guessable).
const SECRET_DIGITS: usize = 32;

/// Worker names are 1–100 letters, digits, `.`, `_`, `-` or `@`. No `:` or `/`: those end an
/// instance id in a worker id, and a name containing one could claim another's jobs as dead.
pub fn validate_worker_name(name: &str) -> Result<(), ValidationError> {
    let help = "name the worker with 1 to 100 letters, digits, '.', '_', '-' or '@' \
                (for example billing-py@host1)";
    if name.is_empty() {
        return Err(ValidationError::new("worker", "is empty", help));
    }
    if name.chars().count() > MAX_WORKER_NAME {
        return Err(ValidationError::new(
            "worker",
            format!("is {} characters long", name.chars().count()),
            help,
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@')))
    {
        return Err(ValidationError::new(
            "worker",
            format!("contains {c:?}"),
            help,
        ));
    }
    Ok(())
}

/// The instance id of the external worker `name` (already validated).
pub fn instance_id(name: &str) -> String {
    format!("{INSTANCE_PREFIX}{name}")
}

/// One claim's lease, as a worker holds it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Lease {
    token: String,
    /// Where the worker name ends in `token`.
    name_end: usize,
}

impl Lease {
    /// A fresh lease for the worker `name` (already validated).
    pub(crate) fn issue(name: &str) -> Lease {
        let token = format!("{}:{:032x}", instance_id(name), rand::random::<u128>());
        Lease {
            name_end: INSTANCE_PREFIX.len() + name.len(),
            token,
        }
    }

    /// A lease as a worker sent it back.
    pub fn parse(token: &str) -> Result<Lease, ValidationError> {
        let bad = |problem: &str| {
            ValidationError::new(
                "lease",
                problem,
                "send the lease exactly as the claim answer gave it",
            )
        };
        let rest = token
            .strip_prefix(INSTANCE_PREFIX)
            .ok_or_else(|| bad("is not a lease this server issued"))?;
        let (name, secret) = rest
            .rsplit_once(':')
            .ok_or_else(|| bad("is not a lease this server issued"))?;
        validate_worker_name(name).map_err(|_| bad("names no valid worker"))?;
        if secret.len() != SECRET_DIGITS || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("is not a lease this server issued"));
        }
        Ok(Lease {
            token: token.to_string(),
            name_end: INSTANCE_PREFIX.len() + name.len(),
        })
    }

    /// The token, also the owner id on the jobs it holds.
    pub fn as_str(&self) -> &str {
        &self.token
    }

    /// The worker that holds it.
    pub fn worker(&self) -> &str {
        &self.token[INSTANCE_PREFIX.len()..self.name_end]
    }

    /// The worker's instance id.
    pub fn instance_id(&self) -> &str {
        &self.token[..self.name_end]
    }
}

impl std::fmt::Display for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_round_trips_and_names_its_worker() {
        let lease = Lease::issue("billing-py@host1");
        let back = Lease::parse(lease.as_str()).unwrap();
        assert_eq!(back, lease);
        assert_eq!(back.worker(), "billing-py@host1");
        assert_eq!(back.instance_id(), "ext:billing-py@host1");
        assert!(lease.as_str().len() <= 255);
        assert_ne!(Lease::issue("w").as_str(), Lease::issue("w").as_str());
    }

    #[test]
    fn forged_or_damaged_leases_are_refused() {
        let good = Lease::issue("w1");
        for bad in [
            "",
            "w1:0123",
            "ext:w1",
            "ext::0123456789abcdef0123456789abcdef",
            "ext:w 1:0123456789abcdef0123456789abcdef",
            "ext:w1:0123456789abcdef0123456789abcdeg",
            "ext:w1:0123456789abcdef",
        ] {
            assert!(Lease::parse(bad).is_err(), "{bad:?}");
        }
        let mut longer = good.as_str().to_string();
        longer.push('0');
        assert!(Lease::parse(&longer).is_err());
    }

    #[test]
    fn worker_names_cannot_end_an_instance_id_early() {
        for bad in ["", "a:b", "a/b", "a b", "é", &"x".repeat(101)] {
            assert!(validate_worker_name(bad).is_err(), "{bad:?}");
        }
        for good in ["w", "billing-py@host1", "node_worker.2", &"x".repeat(100)] {
            assert!(validate_worker_name(good).is_ok(), "{good:?}");
        }
    }
}
