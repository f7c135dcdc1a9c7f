//! Helpers shared by the console integration tests.

pub mod inert;
