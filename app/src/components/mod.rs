pub mod layout;
pub mod telemetry;

/// The command an empty console suggests, runnable as printed in a shell in the directory
/// where `deck serve` runs on its default database (`server/tests/cli.rs` runs it).
pub const ENQUEUE_EXAMPLE: &str =
    r#"deck enqueue --queue emails --type send_welcome --payload '{"to":"a@b.c"}'"#;
