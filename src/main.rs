//! The `exact-cache` binary: parse, run, render the error, exit.

use exact_cache::{cli, commands, env::Env, fingerprint::HostSystem, runner::Runner};
use std::process::ExitCode;

fn main() -> ExitCode {
    let env = Env::capture();
    let runner = Runner::from_env(&env);
    runner.route_panics();
    let invocation = match cli::parse(std::env::args_os()) {
        Ok(invocation) => invocation,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    runner.set_quiet(invocation.quiet);
    let code = match commands::run(&invocation, &runner, &HostSystem::default()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            runner.error(&exact_cache::text::error_report(&e));
            ExitCode::FAILURE
        }
    };
    runner.finish();
    code
}
