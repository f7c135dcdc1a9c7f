//! `deck migrate`: apply the schema, or print it (`--print`) for a DBA to review and run.

use std::path::PathBuf;

use deck_engine::store::open::DatabaseUrl;

use crate::cli::MigrateArgs;
use crate::commands::{emit, load_config, open_store};

pub async fn run(config: Option<PathBuf>, args: MigrateArgs) -> anyhow::Result<()> {
    let loaded = load_config(config, |s| args.db.apply(s))?;
    let settings = &loaded.settings;
    match DatabaseUrl::parse(&settings.database)? {
        DatabaseUrl::Sqlite { path } => {
            if args.print {
                anyhow::bail!(
                    "printing the SQLite schema is not available yet\n  help: the embedded store \
                     applies its own migrations when it opens; run `deck migrate` without --print"
                );
            }
            // Opening the embedded store applies its pending migrations.
            let store = open_store(settings).await?;
            store.ping().await?;
            emit(&format!("sqlite://{path}: schema is up to date\n"))?;
        }
        DatabaseUrl::SqlServer { .. } => {
            anyhow::bail!(
                "deck migrate for SQL Server is not available yet\n  help: `deck serve` creates \
                 the schema itself while store.auto_create_schema is true (the default)"
            );
        }
    }
    Ok(())
}
