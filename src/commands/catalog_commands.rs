//! The CLI's `explain`, `list` and `prune`: the same catalog operations the action uses on a
//! miss (explain) and after a save (prune), run by hand.

use super::{Context, Error, compute, explain, prune as pruning, report::Shown};
use crate::config::Config;
use crate::units;

pub(super) fn explain(ctx: &Context, config: &Config) -> Result<(), Error> {
    let runner = ctx.runner;
    let record = compute(ctx, config)?;
    let backend = (ctx.backend)(config, runner.env(), runner.secret_sink());
    let catalog = (ctx.catalog)(config, runner.env())?;
    match explain::explain(
        &Shown::new(runner, config),
        backend.as_ref(),
        catalog.as_ref(),
        &record,
        runner.env().non_empty("GITHUB_REF"),
        runner.env().non_empty("GITHUB_BASE_REF"),
    ) {
        Ok(e) => {
            runner.info(&format!("compared with `{}`:", e.against.key));
            for line in &e.changes {
                runner.info(&format!("  {line}"));
            }
            if e.changes.is_empty() {
                runner.info("  no component differs");
            }
            runner.set_output("against", &e.against.key)?;
            runner.set_output("changes", &e.changes.join("\n"))?;
        }
        Err(reason) => runner.info(&format!("nothing to explain: {}", crate::text::error_line(&reason))),
    }
    runner.set_output("key", &record.key)?;
    Ok(())
}

pub(super) fn list(ctx: &Context, config: &Config) -> Result<(), Error> {
    let runner = ctx.runner;
    let catalog = (ctx.catalog)(config, runner.env())?;
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let entries = pruning::ours(catalog.as_ref(), &config.prefix, current_ref)?;
    runner.info(&format!("{} entries of `{}` in {}", entries.len(), config.prefix, catalog.describe()));
    for e in &entries {
        runner.info(&format!(
            "  {}  {}  {}{}",
            e.key,
            units::bytes(e.size),
            e.created,
            e.r#ref.as_deref().map(|r| format!("  {r}")).unwrap_or_default()
        ));
    }
    runner.set_output("keys", &entries.iter().map(|e| e.key.as_str()).collect::<Vec<_>>().join("\n"))?;
    Ok(())
}

pub(super) fn prune(ctx: &Context, config: &Config, dry_run: bool) -> Result<(), Error> {
    let runner = ctx.runner;
    let catalog = (ctx.catalog)(config, runner.env())?;
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let report = pruning::prune(catalog.as_ref(), &config.prefix, current_ref, config.prune_keep, dry_run, None)?;
    let verb = if dry_run { "would delete" } else { "deleted" };
    for e in &report.deleted {
        runner.info(&format!("{verb} {}", e.key));
    }
    for (e, why) in &report.failed {
        runner.warning(&format!("could not delete {}: {why}", e.key));
    }
    runner.info(&format!("kept {} newest, {verb} {}", report.kept.len(), report.deleted.len()));
    runner.set_output("deleted", &report.deleted.iter().map(|e| e.key.as_str()).collect::<Vec<_>>().join("\n"))?;
    Ok(())
}
