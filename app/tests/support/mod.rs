//! Helpers shared by the console integration tests.

pub mod console;
pub mod inert;
