//! `exact-cache fingerprint`: compute the key, write the fingerprint file; no network.

use super::{Context, Error, compute, report, write_fingerprint};
use crate::config::Config;

pub(super) fn run(ctx: &Context, config: &Config) -> Result<(), Error> {
    let record = compute(ctx, config)?;
    let path = write_fingerprint(config, ctx.runner.env(), &record)?;
    let runner = ctx.runner;
    runner.set_output("key", &record.key)?;
    runner.set_output("fingerprint-file", &path.to_string_lossy())?;
    runner.info(&format!("fingerprint file: {}", path.display()));
    runner.append_summary(&report::fingerprint_summary(&report::Shown::new(runner, config), &record))?;
    Ok(())
}
