//! A restore's words: how its attempt ended (a miss reason, a stack put in place, the files it
//! kept), a replacement, what `clean-on-miss` removed, what the hit is worth, the hooks it
//! arms, its summary and its `strict` error.

use super::{Said, Shown, named};
use crate::backend::CacheMode;
use crate::keys::Key;
use crate::outcome::{Attempt, Cleaned, MissReason, RestoreOutcome, StackApplied, StackStop, Transfer, Worth};
use crate::reads::Record;
use crate::runner::summary::{Inline, Markdown};
use crate::stack::{MAX_GENERATIONS, Slot};
use crate::text::{error_chain, error_line, shorten};
use crate::units;
use std::path::Path;

/// Files `clean-on-miss` removed that the summary names; a step summary holds at most 1 MiB.
const CLEANED_SHOWN: usize = 2000;

pub fn group(key: &Key) -> String {
    format!("Restore {key}")
}

/// `not reused (corrupt): …`: a warning when the reason is trouble.
pub fn not_reused(reason: MissReason, detail: Option<&str>) -> Said {
    let text = match detail {
        Some(d) => format!("not reused ({reason}): {d}"),
        None => format!("not reused ({reason})"),
    };
    if reason.is_trouble() { Said::Warning(text) } else { Said::Info(text) }
}

/// The detail of `prefix-only`.
pub fn prefix_only(offered: &str) -> String {
    format!("the service offered `{offered}`, which is not this key; exact reuse only")
}

/// The detail of the `cache-mode` miss.
pub fn cache_mode_no_reads(mode: CacheMode) -> String {
    format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not read the cache, so nothing was looked up")
}

const FOUND: &str = "entry exists; `lookup-only` is set, so nothing was downloaded";
const FOUND_CELL: &str = "☑️ entry exists (`lookup-only`; nothing downloaded)";
const REUSED_CELL: &str = "✅ reused";

pub fn found() -> Said {
    Said::Info(FOUND.to_owned())
}

pub fn reused(restored: &Transfer) -> Said {
    Said::Info(format!(
        "reused {} ({}) in {}",
        units::count_of(restored.files, "file"),
        units::bytes(restored.content_bytes),
        units::duration(restored.elapsed)
    ))
}

/// `generation 1 base 120 MiB (300 files) + layer 1 2 MiB (4 files)`, when the stack is more
/// than generation 0's base alone.
fn stack(stack: &StackApplied) -> Option<String> {
    if stack.layers.is_empty() && stack.generation == 0 {
        return None;
    }
    let part = |name: String, t: &Transfer| {
        format!("{name} {} ({})", units::bytes(t.content_bytes), units::count_of(t.files, "file"))
    };
    let mut parts = vec![part(Slot::base(stack.generation).to_string(), &stack.base)];
    parts.extend(stack.layers.iter().enumerate().map(|(i, t)| part(format!("layer {}", i + 1), t)));
    Some(parts.join(" + "))
}

pub fn stack_line(applied: &StackApplied) -> Option<Said> {
    stack(applied).map(|parts| Said::Info(format!("stack: {parts}")))
}

fn stack_stop(stop: &StackStop) -> String {
    match stop {
        StackStop::NotApplied { layer, reason, detail } => format!("layer {layer} not applied ({reason}): {detail}"),
        StackStop::Missing { missing, later } => {
            format!("layer {missing} is missing, so layer {later} and later are not applied")
        }
        StackStop::Trouble { layer, cause } => format!("layer {layer} could not be looked up: {cause}"),
    }
}

pub fn stack_stops(stop: &StackStop, at: Slot) -> Said {
    Said::Warning(format!("{}; the stack stops at {at}", stack_stop(stop)))
}

/// Layers past a gap are not looked for or not found: a missing layer makes the next growing
/// save compact; the service's trouble is said as it is.
pub fn stack_gap(stop: &StackStop) -> Said {
    Said::Warning(match stop {
        StackStop::Trouble { .. } => stack_stop(stop),
        _ => compacts_later(stop),
    })
}

fn compacts_later(stop: &StackStop) -> String {
    format!("{}; a later save that adds files compacts the stack", stack_stop(stop))
}

fn stack_stopped_cell(stop: &StackStop) -> String {
    format!("⚠️ {}", compacts_later(stop))
}

fn not_reused_cell(md: &Markdown, reason: MissReason) -> Inline {
    Inline::ours(format!("❌ not reused: {}", md.code(reason.name())))
}

fn replacement_cell(slot: Slot) -> String {
    format!("the save of this job writes {slot}, which later restores find first")
}

fn extra_files(extra: &[String]) -> String {
    format!("{} under `path` not in the entry: {}", units::count_of(extra.len(), "file"), named(extra))
}

pub fn kept(extra: &[String]) -> Said {
    Said::Info(format!("kept {}", extra_files(extra)))
}

pub fn extra_unlisted(e: &dyn std::error::Error) -> Said {
    Said::Info(format!("cannot list `path` for files not in the entry: {}", error_line(e)))
}

/// What the save of this job writes instead (`None`: the generations are used up).
pub fn replacement(slot: Option<Slot>) -> Said {
    match slot {
        Some(slot) => Said::Info(format!(
            "the job regenerates; its save writes {slot} as this key's replacement, which later restores find first"
        )),
        None => Said::Warning(format!(
            "this key has used all {MAX_GENERATIONS} generations: no replacement can be saved until the fingerprint \
             changes"
        )),
    }
}

/// `removed 2 stale files (`a`, `b`) and 1 directory; kept 3 files the repository tracks`;
/// `stopped`: what went before a failure.
pub fn cleaned(cleaned: &Cleaned, stopped: bool) -> Said {
    let named = if cleaned.names.is_empty() { String::new() } else { format!(" ({})", named(&cleaned.names)) };
    Said::Info(format!(
        "clean-on-miss: removed {}{named} and {}{}{}",
        units::count_of(cleaned.files, "stale file"),
        units::count_of(cleaned.dirs, "directory"),
        kept_tracked(cleaned),
        if stopped { " before it stopped" } else { "" }
    ))
}

fn cleaned_cell(cleaned: &Cleaned) -> String {
    let (files, dirs) = (units::count_of(cleaned.files, "file"), units::count_of(cleaned.dirs, "directory"));
    format!("removed {files}, {dirs}{}", kept_tracked(cleaned))
}

fn kept_tracked(cleaned: &Cleaned) -> String {
    match cleaned.kept_tracked {
        0 => String::new(),
        n => format!("; kept {} the repository tracks", units::count_of(n, "file")),
    }
}

const CLEAN_FAILED_CELL: &str = "❌ did not finish (`strict`): what is there will not be saved under this key";

/// `clean-on-miss` could not finish (without `strict`).
pub fn clean_unfinished(e: &dyn std::error::Error) -> Said {
    Said::Warning(format!("clean-on-miss did not finish: {}", error_chain(e)))
}

/// A root in no git work tree: the repository says nothing of what is stale there.
pub fn untracked_root(root: &Path) -> Said {
    Said::Info(format!(
        "clean-on-miss: `{}` is not in a git work tree; only the places guarantee 8 allows limit what is removed",
        root.display()
    ))
}

pub fn no_git() -> Said {
    Said::Info(
        "clean-on-miss: git is not installed, so files the repository tracks cannot be told from stale ones; only \
         the places guarantee 8 allows limit what is removed"
            .to_owned(),
    )
}

pub fn when_saved(shown: &Shown) -> Said {
    Said::Info(format!("saved: {}", shown.when_saved()))
}

pub fn export_failed(dir: &str, name: &str, e: &std::io::Error) -> Said {
    Said::Warning(format!("cannot create `{dir}` for `{name}`: {e}"))
}

pub fn record_failed(e: &std::io::Error) -> Said {
    Said::Warning(format!("cannot tell the save step what this restore did: {e}"))
}

/// What the job's later Python processes are not asked to record: the generator's reads, or
/// what a compile cache's hit saved.
fn not_recorded(what: Record) -> &'static str {
    match what {
        Record::Reads => "uncovered-reads: the generating run's reads are not recorded",
        Record::Torch => "what this hit saves is not measured",
    }
}

/// `uncovered-reads: off` after a compile cache's hit (the generator's reads go unsaid).
pub fn hook_off(what: Record) -> Option<Said> {
    let off = format!("{}: `uncovered-reads: off` arms no hook in the job's Python", not_recorded(what));
    (what == Record::Torch).then_some(Said::Info(off))
}

pub fn hook_outside_actions(what: Record) -> Said {
    Said::Info(format!(
        "{}: without `GITHUB_ENV` and `RUNNER_TEMP` (outside Actions) later steps cannot be told",
        not_recorded(what)
    ))
}

pub fn hook_failed(what: Record, e: &dyn std::error::Error) -> Said {
    Said::Warning(format!("{}: {}", not_recorded(what), error_chain(e)))
}

pub fn hook_armed(what: Record) -> Said {
    Said::Info(
        match what {
            Record::Reads => {
                "uncovered-reads: the job's later Python processes record the files they read under the workspace \
                 (an audit hook loaded through `PYTHONPATH`; processes that are not Python are not seen)"
            }
            Record::Torch => {
                "time saved: as each of the job's later Python processes ends, it reports what torch's compile \
                 caches spared (a hook loaded through `PYTHONPATH` reads torch's own counters and compile records; \
                 it never imports torch)"
            }
        }
        .to_owned(),
    )
}

/// `2026-12-01`, from seconds since the epoch; `None` for a date no save can have.
fn date(seconds: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(seconds, 0)
        .filter(|t| (2020..=2200).contains(&chrono::Datelike::year(t)))
        .map(|t| t.format("%Y-%m-%d").to_string())
}

/// What a hit is worth: the most a job that skips its generator saves, or for a compile cache
/// that torch's figure comes at the save.
pub fn worth(worth: &Worth) -> Said {
    Said::Info(worth_sentence(worth))
}

fn worth_sentence(worth: &Worth) -> String {
    let restoring = units::duration(worth.restore);
    let when = match &worth.recorded {
        Some((at, r#ref)) => {
            let on = r#ref.as_deref().map(|r| format!(" on `{r}`")).unwrap_or_default();
            match date(*at) {
                Some(day) => format!(" (recorded {day}{on})"),
                None if !on.is_empty() => format!(" (recorded{on})"),
                None => String::new(),
            }
        }
        None => String::new(),
    };
    let generated = match worth.generation {
        Some(generation) => format!("the generating run took {}{when}", units::duration(generation)),
        None => "what the generating run took is not recorded (saved before exact-cache recorded it, or not a \
                 time one job takes)"
            .to_owned(),
    };
    if worth.compile_cache {
        return format!(
            "what this hit saves is torch's own figure, read at the save step (a compile cache: the job runs its \
             torch code either way); {generated}, restoring took {restoring}"
        );
    }
    match worth.up_to() {
        Some(up_to) => format!(
            "this hit saves up to {} if the job skips its generator: {generated}, restoring took {restoring}",
            units::duration(up_to)
        ),
        None => format!("what this hit saves is not known: {generated}; restoring took {restoring}"),
    }
}

/// The error of `strict` when a restore met the service's trouble.
pub fn strict(reason: MissReason, detail: Option<&str>) -> String {
    format!("{reason}: {}", detail.unwrap_or(""))
}

pub fn summary(shown: &Shown, outcome: &RestoreOutcome) -> String {
    let mut md = shown.summary("restore");
    let mut rows = vec![vec![Inline::ours("key"), md.code(&outcome.record.key)]];
    let mut row = |label: &str, cell: Inline| rows.push(vec![Inline::ours(label), cell]);
    match &outcome.attempt {
        Attempt::Reused { restored, extra_files: extra, stack: applied, .. } => {
            row("result", Inline::ours(REUSED_CELL));
            row("restored", super::transfer(restored));
            if let Some(worth) = &outcome.worth {
                row("time saved", md.prose(&worth_sentence(worth)));
            }
            if let Some(parts) = stack(applied) {
                row("stack", md.prose(&parts));
            }
            if let Some(why) = &applied.stopped {
                row("stack stopped", md.prose(&stack_stopped_cell(why)));
            }
            if !extra.is_empty() {
                row("kept", md.prose(&extra_files(extra)));
            }
        }
        Attempt::Found => row("result", Inline::ours(FOUND_CELL)),
        Attempt::Miss { reason, detail } => {
            row("result", not_reused_cell(&md, *reason));
            if let Some(d) = detail {
                row("why", md.prose(d));
            }
            row("saved", Inline::ours(shown.when_saved()));
            if let Some(slot) = outcome.replacement {
                row("replacement", md.prose(&replacement_cell(slot)));
            }
        }
    }
    if outcome.clean_failed {
        row("clean-on-miss", Inline::ours(CLEAN_FAILED_CELL));
    }
    if let Some(c) = &outcome.cleaned {
        row("clean-on-miss", Inline::ours(cleaned_cell(c)));
    }
    row("backend", md.prose(&outcome.backend));
    md.table(&["", ""], rows);
    if let Some(c) = outcome.cleaned.as_ref().filter(|c| !c.names.is_empty()) {
        let mut list = md.nested();
        let lines: Vec<Vec<Inline>> =
            c.names.iter().take(CLEANED_SHOWN).map(|n| vec![md.code(&shorten(n, 200))]).collect();
        list.table(&["removed by clean-on-miss"], lines);
        if c.names.len() > CLEANED_SHOWN {
            let more = format!("and {} more (the summary's size is limited)", c.names.len() - CLEANED_SHOWN);
            list.paragraph(&Inline::ours(more));
        }
        md.details(&format!("clean-on-miss removed {}", units::count_of(c.names.len(), "file")), &list);
    }
    if let Some(e) = &outcome.explanation {
        super::explain::summary(&mut md, e);
    }
    if let Some(why) = &outcome.unexplained {
        let line = super::explain::unexplained_cell(&md, why);
        md.paragraph(&line);
    }
    super::fingerprint::notes_table(&mut md, &outcome.notes);
    super::fingerprint::details(&mut md, shown, &outcome.record);
    md.as_str().to_owned()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{said, transfer};
    use super::*;
    use crate::choice::Named;
    use crate::runner::Redactor;
    use std::fmt::Write;
    use std::time::Duration;

    /// Every miss reason and what a restore put in place, as the log and the summary say it.
    #[test]
    fn words_of_a_restore() {
        let md = Markdown::new(Redactor::default());
        let mut out = String::new();
        // `none` is a reuse and `lookup-only` an entry found: neither is a miss.
        for reason in MissReason::ALL.iter().filter(|r| !matches!(r, MissReason::None | MissReason::LookupOnly)) {
            writeln!(out, "{}", said(&not_reused(*reason, None))).unwrap();
            writeln!(out, "{}", said(&not_reused(*reason, Some("the detail")))).unwrap();
            writeln!(out, "summary: {}", not_reused_cell(&md, *reason)).unwrap();
        }
        writeln!(out, "detail: {}", prefix_only("p-other")).unwrap();
        writeln!(out, "{}\nsummary: {FOUND_CELL}", said(&found())).unwrap();
        writeln!(out, "{}\nsummary: {REUSED_CELL}", said(&reused(&transfer(3)))).unwrap();
        let mut applied = StackApplied { generation: 0, base: transfer(3), layers: vec![], stopped: None };
        writeln!(out, "stack of generation 0's base alone: {:?}", stack(&applied)).unwrap();
        applied.generation = 1;
        applied.layers.push(transfer(1));
        writeln!(out, "{}", said(&stack_line(&applied).unwrap())).unwrap();
        let why = StackStop::NotApplied {
            layer: 2,
            reason: MissReason::Corrupt,
            detail: "its parent is not the slot below".into(),
        };
        writeln!(out, "{}\nsummary: {}", said(&stack_stops(&why, Slot::new(1, 1))), stack_stopped_cell(&why)).unwrap();
        for gap in
            [StackStop::Missing { missing: 3, later: 4 }, StackStop::Trouble { layer: 2, cause: "HTTP 503".into() }]
        {
            writeln!(out, "{}\nsummary: {}", said(&stack_gap(&gap)), stack_stopped_cell(&gap)).unwrap();
        }
        let extra: Vec<String> = (1..=7).map(|i| format!("out/x{i}.bin")).collect();
        writeln!(out, "{}\nsummary: {}", said(&kept(&extra[..1])), extra_files(&extra)).unwrap();
        writeln!(out, "{}\n{}", said(&replacement(Some(Slot::base(2)))), said(&replacement(None))).unwrap();
        writeln!(out, "summary: {}", replacement_cell(Slot::base(2))).unwrap();
        let removed = Cleaned { files: 6, dirs: 1, names: extra.clone(), kept_tracked: 2 };
        let none = Cleaned::default();
        writeln!(out, "{}\n{}", said(&cleaned(&removed, false)), said(&cleaned(&none, false))).unwrap();
        writeln!(out, "summary: {}\nsummary: {CLEAN_FAILED_CELL}", cleaned_cell(&removed)).unwrap();
        insta::assert_snapshot!(out);
    }

    fn worth(generation_ms: Option<u64>, r#ref: Option<&str>, compile_cache: bool) -> Worth {
        Worth {
            generation: generation_ms.map(Duration::from_millis),
            recorded: generation_ms.map(|_| (1_796_083_200, r#ref.map(str::to_owned))),
            restore: Duration::from_millis(9_800),
            compile_cache,
        }
    }

    #[test]
    fn what_a_hit_is_worth_in_words() {
        assert_eq!(
            worth_sentence(&worth(Some(260_000), Some("refs/heads/main"), false)),
            "this hit saves up to 4 min 10 s if the job skips its generator: the generating run took 4 min 20 s \
             (recorded 2026-12-01 on `refs/heads/main`), restoring took 9.8 s"
        );
        assert!(worth_sentence(&worth(None, None, false)).starts_with("what this hit saves is not known"));
        // A compile cache's job runs its torch code either way: the window is no saving.
        let compile = Worth { restore: Duration::from_millis(1_200), ..worth(Some(33_000), None, true) };
        assert_eq!(
            worth_sentence(&compile),
            "what this hit saves is torch's own figure, read at the save step (a compile cache: the job runs its \
             torch code either way); the generating run took 33.0 s (recorded 2026-12-01), restoring took 1.2 s"
        );
    }
}
