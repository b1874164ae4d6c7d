//! The CLI's `explain`, `list` and `prune`: the same catalog operations the action uses on a
//! miss (explain) and after a save (prune), run by hand.

use super::fingerprint::compute;
use super::{Context, Error, explain, prune as pruning};
use crate::config::{Config, ConfigError, DEFAULT_PREFIX};
use crate::outcome::CatalogOutcome;
use crate::units;

pub(super) fn explain(ctx: &Context, config: &Config) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let record = compute(ctx, config)?;
    let backend = (ctx.backend)(config, runner.env(), runner.secret_sink());
    let catalog = (ctx.catalog)(config, runner.env())?;
    let explanation = explain::explain_and_log(
        ctx,
        config,
        backend.as_ref(),
        catalog.as_ref(),
        &record,
        usize::MAX,
        "nothing to explain",
    );
    Ok(CatalogOutcome::Explain { key: record.key, explanation })
}

pub(super) fn list(ctx: &Context, config: &Config) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    let catalog = (ctx.catalog)(config, runner.env())?;
    let current_ref = runner.env().non_empty("GITHUB_REF");
    let entries = pruning::ours(catalog.as_ref(), &config.prefix, current_ref)?;
    let default = if config.prefix == DEFAULT_PREFIX { " (the default prefix; `--prefix` names another)" } else { "" };
    let listed = units::count_of(entries.len(), "entry");
    runner.info(&format!("{listed} of `{}`{default} in {}", config.prefix, catalog.describe()));
    for e in &entries {
        runner.info(&format!(
            "  {}  {}  {}{}",
            e.key,
            units::bytes(e.size),
            e.created,
            e.r#ref.as_deref().map(|r| format!("  {r}")).unwrap_or_default()
        ));
    }
    Ok(CatalogOutcome::List { keys: entries.into_iter().map(|e| e.key).collect() })
}

pub(super) fn prune(ctx: &Context, config: &Config, dry_run: bool) -> Result<CatalogOutcome, Error> {
    let runner = ctx.runner;
    if let Some(detail) = pruning::refusal(&config.prefix).filter(|_| !dry_run) {
        return Err(ConfigError::Invalid { name: "prefix", detail }.into());
    }
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
    Ok(CatalogOutcome::Prune { deleted: report.deleted.into_iter().map(|e| e.key).collect() })
}
