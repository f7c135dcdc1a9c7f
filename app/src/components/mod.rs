pub mod layout;
pub mod telemetry;
