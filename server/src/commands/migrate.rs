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
                return emit(&deck_engine::store::sqlite::migration_script());
            }
            // Opening the embedded store applies its pending migrations.
            let store = open_store(settings).await?;
            store.ping().await?;
            emit(&format!("sqlite://{path}: schema is up to date\n"))?;
        }
        DatabaseUrl::SqlServer { connection } => {
            use deck_engine::store::sqlserver;
            if args.print {
                // Printing needs no connection: a DBA can review it anywhere.
                return emit(&sqlserver::migration_script(&settings.store.schema)?);
            }
            let report = sqlserver::migrate(&connection, &settings.store).await?;
            let applied = if report.applied.is_empty() {
                "nothing to apply".to_string()
            } else {
                format!("applied version(s) {:?}", report.applied)
            };
            emit(&format!(
                "SQL Server schema [{}] is at version {} ({applied})\n",
                report.schema, report.version
            ))?;
            if let Some(tolerated) = &report.tolerated {
                emit(&format!("note: {tolerated}\n"))?;
            }
        }
    }
    Ok(())
}
