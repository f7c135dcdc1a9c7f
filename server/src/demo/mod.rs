//! The demo workload of `deck serve --demo`: handlers that behave like a small company's
//! background work (emails, reports, billing, media), and a producer (`workload`) that keeps
//! a realistic mix flowing so every job state shows up in the console within a minute.

pub mod batches;
pub mod handlers;
pub mod schedules;
pub mod webhook;
pub mod workload;

pub use handlers::register;
