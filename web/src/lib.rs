//! The Deck's web platform: what the console (`deck-app`) and the JSON API (`deck-api`)
//! both stand on, so neither imports the other. Who may do what (`auth`: users, roles,
//! credentials, the console's session and CSRF check, the operations endpoints' access),
//! the browser security headers, and the telemetry snapshot read once per tick and shared
//! by every page, `/api/v1/stats`, `/metrics` and `/readyz`.

pub mod auth;
pub mod security_headers;
pub mod telemetry;
pub mod tick_cache;

pub use auth::{AuthConfig, Principal, Role, UserConfig};
pub use telemetry::{SharedTelemetry, Telemetry};
pub use tick_cache::TickCache;
