//! Who is using the console and the API, and what they may do: the one place for auth.
//!
//! Users authenticate with HTTP basic auth or a bearer token; each has a role. `viewer`
//! reads, `operator` acts, `worker` only claims and reports jobs (external workers). With no users configured the console runs without auth, which
//! the server only allows on a loopback address (`AuthConfig::check_bind`).
//!
//! The server's operations endpoints (`/metrics`, `/readyz`, the OpenAPI document) need a
//! viewer too once users exist, unless their `public_…` key opens them to anyone.
//!
//! `session` is the console's door (identity and CSRF per request), `ops` the operations
//! endpoints'; the API's door (its JSON refusals) is in `deck-api`, over the same
//! [`AuthConfig::authenticate`].

pub mod ops;
pub mod session;

use std::net::SocketAddr;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// An external worker's credential: claims and reports jobs over the API's worker
    /// protocol, and nothing else (no console, no reads, no operator actions).
    Worker,
    Viewer,
    Operator,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Worker => "worker",
            Role::Viewer => "viewer",
            Role::Operator => "operator",
        }
    }

    /// Reads the console, the API's reads and the operations endpoints.
    pub fn may_read(self) -> bool {
        matches!(self, Role::Viewer | Role::Operator)
    }

    /// Enqueues and operator actions.
    pub fn may_act(self) -> bool {
        self == Role::Operator
    }

    /// Claims and reports jobs over the worker protocol.
    pub fn may_run_jobs(self) -> bool {
        matches!(self, Role::Worker | Role::Operator)
    }
}

/// One configured user. A user may have a password (basic auth), a token (bearer), or both.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub role: Role,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
}

impl std::fmt::Debug for UserConfig {
    // Never print secrets into logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserConfig")
            .field("name", &self.name)
            .field("role", &self.role)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("token", &self.token.as_ref().map(|_| "***"))
            .finish()
    }
}

/// The `[auth]` section of the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthConfig {
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// `/metrics` without credentials (it names queues and instances).
    #[serde(default)]
    pub public_metrics: bool,
    /// `/readyz` without credentials, for probes that cannot send a header.
    #[serde(default)]
    pub public_readyz: bool,
    /// `/api/v1/openapi.json` without credentials.
    #[serde(default)]
    pub public_openapi: bool,
}

/// An authenticated caller, of the console or the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub name: String,
    pub role: Role,
}

impl Principal {
    /// The API's caller when authentication is off (allowed on loopback only).
    pub fn anonymous() -> Self {
        Principal {
            name: "anonymous".to_string(),
            role: Role::Operator,
        }
    }
}

/// The challenge every 401 carries (RFC 9110 §11.6.1): basic auth, or a bearer token.
pub const AUTH_CHALLENGE: &str = "Basic realm=\"The Deck\", charset=\"UTF-8\"";

impl AuthConfig {
    /// No users: everyone who can reach the (loopback) address is an operator.
    pub fn is_open(&self) -> bool {
        self.users.is_empty()
    }

    /// Problems with the configuration, all at once.
    pub fn validate(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        for (i, u) in self.users.iter().enumerate() {
            if u.name.trim().is_empty() || u.name.contains(':') {
                problems.push(format!(
                    "auth.users[{i}]: name {:?} must be non-empty and contain no ':'",
                    u.name
                ));
            }
            if u.password.is_none() && u.token.is_none() {
                problems.push(format!(
                    "auth.users[{i}] ({}): give a password (basic auth) or a token (bearer), or both",
                    u.name
                ));
            }
            if u.token.as_ref().is_some_and(|t| t.len() < 16) {
                problems.push(format!(
                    "auth.users[{i}] ({}): tokens must be at least 16 characters",
                    u.name
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("\n"))
        }
    }

    /// Refuse to serve an unauthenticated console on anything but loopback.
    pub fn check_bind(&self, addr: SocketAddr) -> Result<(), String> {
        if self.is_open() && !addr.ip().is_loopback() {
            return Err(format!(
                "refusing to serve the console on {addr} without credentials\n  \
                 help: bind to 127.0.0.1 (--listen 127.0.0.1:{port}), or add users under [auth] in deck.toml:\n    \
                 [[auth.users]]\n    name = \"ops\"\n    role = \"operator\"   # or \"viewer\", or \"worker\" for external workers\n    \
                 password = \"…\"        # basic auth; or token = \"…\" for bearer",
                port = addr.port()
            ));
        }
        Ok(())
    }

    /// Everything `deck serve` checks before it listens on `addr`: no unusable users, no
    /// open console off loopback. Says (in the log) which endpoints need sign-in.
    pub fn check_serving(&self, addr: SocketAddr) -> Result<(), String> {
        if let Err(problems) = self.validate() {
            return Err(format!("invalid [auth] configuration:\n{problems}"));
        }
        self.check_bind(addr)?;
        if !self.is_open() {
            let public: Vec<&str> = [
                (self.public_metrics, "/metrics"),
                (self.public_readyz, "/readyz"),
                (self.public_openapi, "/api/v1/openapi.json"),
            ]
            .into_iter()
            .filter_map(|(open, path)| open.then_some(path))
            .collect();
            tracing::info!(
                event = "console.auth",
                users = self.users.len(),
                public = ?public,
                "console, API and operations endpoints require sign-in (open to anyone: /healthz{})",
                public.iter().map(|p| format!(", {p}")).collect::<String>()
            );
        }
        Ok(())
    }

    /// Who sent this `Authorization` header value. `None` means unauthenticated.
    pub fn authenticate(&self, authorization: Option<&str>) -> Option<Principal> {
        if self.is_open() {
            return Some(Principal {
                name: "local".to_string(),
                role: Role::Operator,
            });
        }
        let header = authorization?.trim();
        if let Some(token) = strip_scheme(header, "bearer") {
            let token = token.trim();
            // Compare against every user so the time taken does not reveal which one matched.
            let mut found = None;
            for u in &self.users {
                if let Some(expected) = &u.token
                    && constant_time_eq(expected.as_bytes(), token.as_bytes())
                {
                    found = Some(u);
                }
            }
            return found.map(identity);
        }
        if let Some(encoded) = strip_scheme(header, "basic") {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(encoded.trim())
                .ok()?;
            let decoded = String::from_utf8(decoded).ok()?;
            let (name, password) = decoded.split_once(':')?;
            let mut found = None;
            for u in &self.users {
                if let Some(expected) = &u.password {
                    let name_ok = constant_time_eq(u.name.as_bytes(), name.as_bytes());
                    let pw_ok = constant_time_eq(expected.as_bytes(), password.as_bytes());
                    if name_ok & pw_ok {
                        found = Some(u);
                    }
                }
            }
            return found.map(identity);
        }
        None
    }
}

fn identity(u: &UserConfig) -> Principal {
    Principal {
        name: u.name.clone(),
        role: u.role,
    }
}

fn strip_scheme<'a>(header: &'a str, scheme: &str) -> Option<&'a str> {
    let (s, rest) = header.split_once(' ')?;
    s.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// Equal-length comparison whose time depends only on the lengths.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AuthConfig {
        AuthConfig {
            users: vec![
                UserConfig {
                    name: "ops".into(),
                    role: Role::Operator,
                    password: Some("s3cret".into()),
                    token: Some("op-token-0123456789".into()),
                },
                UserConfig {
                    name: "watcher".into(),
                    role: Role::Viewer,
                    password: Some("look".into()),
                    token: None,
                },
            ],
            ..AuthConfig::default()
        }
    }

    fn basic(user: &str, pw: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
        )
    }

    #[test]
    fn basic_auth_and_tokens_map_to_roles() {
        let c = config();
        assert_eq!(
            c.authenticate(Some(&basic("ops", "s3cret")))
                .map(|i| i.role),
            Some(Role::Operator)
        );
        assert_eq!(
            c.authenticate(Some(&basic("watcher", "look")))
                .map(|i| i.role),
            Some(Role::Viewer)
        );
        assert_eq!(
            c.authenticate(Some("Bearer op-token-0123456789"))
                .map(|i| i.name),
            Some("ops".to_string())
        );
    }

    #[test]
    fn wrong_or_missing_credentials_are_rejected() {
        let c = config();
        assert_eq!(c.authenticate(None), None);
        assert_eq!(c.authenticate(Some(&basic("ops", "wrong"))), None);
        assert_eq!(c.authenticate(Some(&basic("watcher", "s3cret"))), None);
        assert_eq!(c.authenticate(Some("Bearer nope")), None);
        assert_eq!(c.authenticate(Some("Basic !!!")), None);
    }

    #[test]
    fn open_console_only_on_loopback() {
        let open = AuthConfig::default();
        assert!(open.check_bind("127.0.0.1:8080".parse().unwrap()).is_ok());
        assert!(open.check_bind("[::1]:8080".parse().unwrap()).is_ok());
        let err = open
            .check_bind("0.0.0.0:8080".parse().unwrap())
            .unwrap_err();
        assert!(err.contains("refusing"), "{err}");
        assert!(config().check_bind("0.0.0.0:8080".parse().unwrap()).is_ok());
    }

    #[test]
    fn validation_lists_every_problem() {
        let c = AuthConfig {
            users: vec![UserConfig {
                name: "".into(),
                role: Role::Viewer,
                password: None,
                token: Some("short".into()),
            }],
            ..AuthConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(err.lines().count(), 2, "{err}");
    }
}
