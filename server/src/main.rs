//! `deck`: the engine, the console and the JSON API in one binary, plus the operator's
//! command-line tools (migrate, stats, enqueue, bench).

mod bench;
mod cli;
mod commands;
mod config;
mod connections;
mod demo;
mod health;
mod http;
mod logging;
mod metrics;
mod request_limits;
mod serve;
mod state;
mod testing;
mod traces;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let default_level = match cli.command {
        Command::Serve(_) => "info",
        // Tools print their answer on stdout; keep stderr quiet unless asked.
        _ => "warn",
    };
    let traces = logging::init(default_level, runtime.handle());

    let code = match runtime.block_on(run(cli, traces.export().clone())) {
        Ok(code) => code,
        Err(e) => {
            report(&e);
            ExitCode::FAILURE
        }
    };
    // While the runtime still exists: the last spans are sent on it.
    traces.shutdown();
    code
}

async fn run(cli: Cli, traces: traces::Export) -> anyhow::Result<ExitCode> {
    let done = match cli.command {
        // `serve` chooses its own status: a shutdown that left work to the rescuer is not 0.
        Command::Serve(args) => return serve::run(cli.config, args, traces).await,
        Command::Migrate(args) => commands::migrate::run(cli.config, args).await,
        Command::Stats(args) => commands::stats::run(cli.config, args).await,
        Command::Enqueue(args) => commands::enqueue::run(cli.config, args).await,
        Command::Bench(cmd) => bench::run(cmd).await,
    };
    done.map(|()| ExitCode::SUCCESS)
}

/// Print an error and its causes the way cargo does: the headline, then each cause on its
/// own line. Messages that already carry `help:` lines keep them.
fn report(err: &anyhow::Error) {
    eprintln!("error: {err}");
    for cause in err.chain().skip(1) {
        eprintln!("  cause: {cause}");
    }
}
