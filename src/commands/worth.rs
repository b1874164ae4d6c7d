//! What each hit is worth. A save records how long its entry took to generate ([`measure`]):
//! from the end of the restore that did not reuse it (a miss, or an entry it could not use) — or,
//! for a layer, of the restore that reused what is below — to the newest modification time under
//! the saved paths (never later than the save), so what the job did after the generator does
//! not count; or what `generation-seconds` says. Where exact-cache cannot see whether the job
//! skipped its generator, a hit reports that figure for its base and layers against its own time
//! as what a job that skips its generator saves at most ([`of_stack`], [`sentence`]). A compile
//! cache's job runs its torch code either way: what its hit saved is what torch reports as
//! spared, read at the save ([`compile_sentence`], [`crate::reads::torch`]). `list` shows each
//! entry's generation time and their total. A figure no job could take (negative, longer than
//! three days) is "not recorded".
use crate::archive::Inventory;
use crate::env::Env;
use crate::manifest::{EntryKind, Generation};
use crate::outcome::{CompileWorth, Worth};
use crate::reads::torch::CompileSaving;
use crate::units;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch, now.
pub(super) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// What a save records: `given` (the `generation-seconds` input), else the window from `since_ms` (the end
/// of this job's restore) to the newest modification time of what is saved (`inv`), plus `below_ms`
/// (a compaction holds what the stack below took). `None` when there is no window: no restore
/// in this job, or nothing under `path` newer than its end.
pub(super) fn measure(
    given: Option<f64>,
    env: &Env,
    inv: &Inventory,
    since_ms: Option<i64>,
    below_ms: Option<i64>,
    now_ms: i64,
) -> Option<Generation> {
    let millis = match given {
        Some(seconds) => (seconds * 1000.0).round().min(i64::MAX as f64) as i64,
        None => {
            let since = since_ms?;
            let newest = inv.entries.iter().filter(|e| e.kind != EntryKind::Dir).map(|e| e.modified_ms).max()?;
            let window = newest.min(now_ms).checked_sub(since).filter(|w| *w >= 0)?;
            window.checked_add(below_ms.unwrap_or(0))?
        }
    };
    let r#ref = env.non_empty("GITHUB_REF").map(str::to_owned);
    let generation = Generation { millis, recorded: now_ms.div_euclid(1000), r#ref, given: given.is_some() };
    let r#ref = generation.plausible_ref().map(str::to_owned);
    Some(Generation { r#ref, ..generation })
}

/// What a stack put in place was worth: the sum of its slots' figures, `None` unless every slot
/// has one that can be a job's (never a guess for part of it); the base's date and ref.
/// `compile_cache`: what the hit saves is torch's figure, read at the save.
pub(super) fn of_stack(slots: &[Option<Generation>], restore: Duration, compile_cache: bool) -> Worth {
    let mut total = Some(Duration::ZERO);
    for slot in slots {
        total = match (total, slot.as_ref().and_then(Generation::plausible)) {
            (Some(sum), Some(d)) => Some(sum + d),
            _ => None,
        };
    }
    let generation = total.filter(|_| !slots.is_empty());
    let recorded = slots
        .first()
        .and_then(Option::as_ref)
        .filter(|_| generation.is_some())
        .map(|g| (g.recorded, g.plausible_ref().map(str::to_owned)));
    Worth { generation, recorded, restore, compile_cache }
}

/// Seconds as an output: `20.7`.
pub(super) fn seconds(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64())
}

/// `2026-12-01`, from seconds since the epoch; `None` for a date no save can have.
fn date(seconds: i64) -> Option<String> {
    chrono::DateTime::from_timestamp(seconds, 0)
        .filter(|t| (2020..=2200).contains(&chrono::Datelike::year(t)))
        .map(|t| t.format("%Y-%m-%d").to_string())
}

/// The summary's and the log's line: `this hit saves up to 4 min 10 s if the job skips its
/// generator: the generating run took 4 min 20 s (recorded 2026-12-01 on `refs/heads/main`),
/// restoring took 9.8 s`; for a compile cache, that its figure comes at the save.
pub(super) fn sentence(worth: &Worth) -> String {
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

/// What a hit of a compile cache saved, as the save says it: `torch took 2 graphs from its FX
/// graph cache and compiled 0 in 2 Python processes; the restored entry spared 27.6 s of
/// compiling: 1 graph of it, counted once, at the compile time torch recorded for it`.
pub(super) fn compile_sentence(worth: &CompileWorth) -> String {
    const NOT_MEASURED: &str = "what this hit saved is not measured";
    match worth {
        CompileWorth::Reported(saving) => reported(saving),
        CompileWorth::NotRecorded => {
            format!("{NOT_MEASURED}: no hook recorded this job's Python (`uncovered-reads: off`, or outside Actions)")
        }
        CompileWorth::Unreadable(why) => format!("{NOT_MEASURED}: {why}"),
    }
}

fn reported(saving: &CompileSaving) -> String {
    if saving.processes == 0 {
        return "no Python process of this job reported a torch compile (none compiled, or each ended without \
                Python's exit): what this hit saved is not measured"
            .to_owned();
    }
    let c = &saving.counts;
    let mut said = format!(
        "torch took {} from its FX graph cache and compiled {} in {}",
        units::count_of(c.fx_hit, "graph"),
        units::count(c.compiled()),
        match saving.processes {
            1 => "1 Python process".to_owned(),
            n => format!("{} Python processes", units::count(n as u64)),
        }
    );
    if c.aot_hit + c.aot_miss + c.aot_bypass > 0 {
        let (hits, misses) = (c.aot_hit, c.aot_miss + c.aot_bypass);
        let noun = |n: u64, one: &str, many: &str| format!("{} {}", units::count(n), if n == 1 { one } else { many });
        said.push_str(&format!(
            " (AOTAutograd cache: {}, {})",
            noun(hits, "hit", "hits"),
            noun(misses, "miss", "misses")
        ));
    }
    let graphs = units::count_of(saving.restored_graphs, "graph");
    match saving.saved {
        None => said.push_str(
            "; this torch does not record what compiling the graphs it takes from its cache took: what this hit \
             saved is not measured",
        ),
        Some(_) if saving.restored_graphs == 0 => {
            said.push_str("; none came from the restored entry: this hit saved no compile time")
        }
        Some(d) => said.push_str(&format!(
            "; the restored entry spared {}{} of compiling: {graphs} of it, each counted once, at the compile time \
             torch recorded for it",
            if saving.incomplete { "at least " } else { "" },
            units::duration(d)
        )),
    }
    said
}

/// `verify-reuse`'s addition where the generating run's window is the figure: `; this hit saves
/// up to 19.5 s if the job skips its generator (…)`, or that the figure is not recorded. (A
/// compile cache's verdict is followed by [`compile_sentence`].)
pub(super) fn beside_verdict(generation_ms: Option<i64>, restore_ms: i64) -> String {
    let generation = generation_ms.filter(|ms| (0..=Generation::MAX_MILLIS).contains(ms));
    let restore = Duration::from_millis(restore_ms.max(0) as u64);
    match generation {
        Some(ms) => {
            let generation = Duration::from_millis(ms as u64);
            format!(
                "; this hit saves up to {} if the job skips its generator (the generating run took {}, the restore {})",
                units::duration(generation.saturating_sub(restore)),
                units::duration(generation),
                units::duration(restore)
            )
        }
        None => {
            format!("; what the generating run took is not recorded (the restore took {})", units::duration(restore))
        }
    }
}

/// `list`'s totals line of a prefix: the recorded generation time of the entries that have one.
pub(super) fn totals_line(prefix: &str, figures: &[Option<f64>], uses_recorded: bool) -> String {
    let recorded: Vec<f64> = figures.iter().flatten().copied().collect();
    let total = Duration::from_secs_f64(recorded.iter().sum::<f64>());
    let missing = figures.len() - recorded.len();
    let not = if missing > 0 {
        format!(" ({} not recorded or not read)", units::count_of(missing, "entry"))
    } else {
        String::new()
    };
    let uses = if uses_recorded {
        "; the store records each entry's last use (`used`): a hit whose job skips its generator saves up to its \
         entry's figure (a compile cache's hit: what torch reports at the save)"
    } else {
        "; the store does not record uses"
    };
    format!(
        "`{prefix}`: {} to generate the {} with a recorded figure{not}{uses}",
        units::duration(total),
        units::count_of(recorded.len(), "entry")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::inventory;
    use crate::inputs::RawInputs;

    use crate::config::{CommandName, Config};

    fn config(ws: &std::path::Path, extra: &[(&str, &str)]) -> Config {
        let mut raw = RawInputs::default();
        raw.set("path", "out");
        for (name, value) in extra {
            raw.set(name, *value);
        }
        Config::from_raw(&raw, &Env::from_pairs([("HOME", "/home/u")]), ws, CommandName::Save).unwrap()
    }

    fn planted(ws: &std::path::Path, files: &[(&str, i64)]) {
        for (name, ms) in files {
            let path = ws.join("out").join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, name).unwrap();
            let t = filetime::FileTime::from_unix_time(ms.div_euclid(1000), (ms.rem_euclid(1000) * 1_000_000) as u32);
            filetime::set_file_mtime(&path, t).unwrap();
        }
    }

    const T0: i64 = 1_796_000_000_000;

    #[test]
    fn the_window_runs_from_the_restore_to_the_newest_file_and_never_past_the_save() {
        let ws = tempfile::tempdir().unwrap();
        planted(ws.path(), &[("a", T0 + 4_000), ("sub/b", T0 + 20_700), ("old", T0 - 3_600_000)]);
        let c = config(ws.path(), &[]);
        let inv = inventory(&c.locate.paths).unwrap();
        let env = Env::from_pairs([("GITHUB_REF", "refs/heads/main")]);
        // The post step runs long after the generator: its own time does not count.
        let g = measure(c.save.generation_seconds, &env, &inv, Some(T0), None, T0 + 600_000).unwrap();
        assert_eq!((g.millis, g.r#ref.as_deref(), g.given), (20_700, Some("refs/heads/main"), false));
        assert_eq!(g.recorded, (T0 + 600_000) / 1000);
        // A file from the future counts up to the save only.
        assert_eq!(measure(c.save.generation_seconds, &env, &inv, Some(T0), None, T0 + 10_000).unwrap().millis, 10_000);
        // A compaction adds what the stack below took.
        assert_eq!(
            measure(c.save.generation_seconds, &env, &inv, Some(T0), Some(5_000), T0 + 60_000).unwrap().millis,
            25_700
        );
        // No restore in this job, or nothing written after it: no figure.
        assert_eq!(measure(c.save.generation_seconds, &env, &inv, None, None, T0 + 60_000), None);
        assert_eq!(measure(c.save.generation_seconds, &env, &inv, Some(T0 + 30_000), None, T0 + 60_000), None);
        // The input wins, whatever the files say.
        let given = config(ws.path(), &[("generation-seconds", "260.5")]);
        let g = measure(given.save.generation_seconds, &Env::default(), &inv, None, None, T0).unwrap();
        assert_eq!((g.millis, g.r#ref, g.given), (260_500, None, true));
        // A ref that is no ref is not recorded.
        let odd = Env::from_pairs([("GITHUB_REF", "refs/heads/a\n::warning::x")]);
        assert_eq!(measure(c.save.generation_seconds, &odd, &inv, Some(T0), None, T0 + 60_000).unwrap().r#ref, None);
    }

    #[test]
    fn the_input_is_seconds_zero_or_more() {
        let ws = tempfile::tempdir().unwrap();
        let mut raw = RawInputs::default();
        raw.set("path", "out");
        for bad in ["-1", "soon", "NaN", "inf"] {
            raw.set("generation-seconds", bad);
            let e = Config::from_raw(&raw, &Env::default(), ws.path(), CommandName::Save).unwrap_err();
            assert!(e.to_string().contains("generation-seconds"), "{bad}: {e}");
        }
    }

    fn slot(millis: i64, r#ref: Option<&str>) -> Option<Generation> {
        Some(Generation { millis, recorded: 1_796_083_200, r#ref: r#ref.map(str::to_owned), given: false })
    }

    #[test]
    fn a_hit_is_worth_its_slots_and_a_forged_figure_is_not_recorded() {
        let restore = Duration::from_millis(9_800);
        let worth = of_stack(&[slot(250_000, Some("refs/heads/main")), slot(10_000, None)], restore, false);
        assert_eq!(worth.generation, Some(Duration::from_secs(260)));
        assert_eq!(worth.up_to(), Some(Duration::from_millis(250_200)));
        assert_eq!(
            sentence(&worth),
            "this hit saves up to 4 min 10 s if the job skips its generator: the generating run took 4 min 20 s \
             (recorded 2026-12-01 on `refs/heads/main`), restoring took 9.8 s"
        );
        // Never below zero.
        assert_eq!(of_stack(&[slot(1_000, None)], restore, false).up_to(), Some(Duration::ZERO));
        // Not recorded: an old entry, or any slot without a figure, or one no job takes.
        for slots in [
            vec![None],
            vec![slot(250_000, None), None],
            vec![slot(-5_000, None)],
            vec![slot(Generation::MAX_MILLIS + 1, None)],
            vec![],
        ] {
            let worth = of_stack(&slots, restore, false);
            assert_eq!((worth.generation, worth.up_to(), &worth.recorded), (None, None, &None), "{slots:?}");
            assert!(sentence(&worth).starts_with("what this hit saves is not known"), "{}", sentence(&worth));
        }
        // A forged ref is left out, whatever the figure.
        let forged = of_stack(&[slot(1_000, Some("refs/heads/x\n::error::pwned"))], restore, false);
        assert_eq!(forged.recorded, Some((1_796_083_200, None)));
        assert!(!sentence(&forged).contains("::error::"));
    }

    /// A compile cache's job runs its torch code either way: the window is no saving, and the
    /// restore says the figure comes at the save.
    #[test]
    fn a_compile_caches_hit_claims_no_window_as_its_saving() {
        let worth = of_stack(&[slot(33_000, None)], Duration::from_millis(1_200), true);
        assert_eq!((worth.generation, worth.up_to()), (Some(Duration::from_secs(33)), None));
        assert_eq!(
            sentence(&worth),
            "what this hit saves is torch's own figure, read at the save step (a compile cache: the job runs its \
             torch code either way); the generating run took 33.0 s (recorded 2026-12-01), restoring took 1.2 s"
        );
    }

    #[test]
    fn what_torch_reported_in_words() {
        use crate::reads::torch::Counts;
        let two = Counts { fx_hit: 2, aot_hit: 2, ..Default::default() };
        let saving = CompileSaving {
            processes: 2,
            counts: two,
            restored_graphs: 1,
            saved: Some(Duration::from_micros(27_624_335)),
            incomplete: false,
        };
        let reported = CompileWorth::Reported(saving.clone());
        assert_eq!(reported.saved(), Some(Duration::from_micros(27_624_335)));
        assert_eq!(
            compile_sentence(&reported),
            "torch took 2 graphs from its FX graph cache and compiled 0 in 2 Python processes (AOTAutograd cache: 2 \
             hits, 0 misses); the restored entry spared 27.6 s of compiling: 1 graph of it, each counted once, at \
             the compile time torch recorded for it"
        );
        let cut = CompileWorth::Reported(CompileSaving { incomplete: true, ..saving.clone() });
        assert!(compile_sentence(&cut).contains("spared at least 27.6 s"));
        // A changed model: compiled by the first worker, taken from the cache by the second.
        let anew = CompileSaving {
            counts: Counts { fx_hit: 1, fx_miss: 1, ..Default::default() },
            restored_graphs: 0,
            saved: Some(Duration::ZERO),
            ..saving.clone()
        };
        let anew = CompileWorth::Reported(anew);
        assert_eq!(anew.saved(), Some(Duration::ZERO));
        assert!(compile_sentence(&anew).ends_with("none came from the restored entry: this hit saved no compile time"));
        let old = CompileWorth::Reported(CompileSaving { saved: None, ..saving.clone() });
        assert_eq!(old.saved(), None);
        assert!(compile_sentence(&old).contains("this torch does not record what compiling the graphs"));
        let idle = CompileWorth::Reported(CompileSaving::default());
        assert_eq!(idle.saved(), None);
        assert!(compile_sentence(&idle).starts_with("no Python process of this job reported a torch compile"));
        for other in [CompileWorth::NotRecorded, CompileWorth::Unreadable("why".into())] {
            assert_eq!(other.saved(), None);
            assert!(compile_sentence(&other).starts_with("what this hit saved is not measured: "));
        }
    }

    #[test]
    fn verify_reuse_and_list_lines() {
        assert_eq!(
            beside_verdict(Some(20_700), 1_200),
            "; this hit saves up to 19.5 s if the job skips its generator (the generating run took 20.7 s, the \
             restore 1.2 s)"
        );
        assert!(beside_verdict(Some(-1), 1_200).contains("not recorded"));
        assert_eq!(
            totals_line("models", &[Some(60.0), None, Some(30.5)], true),
            "`models`: 1 min 30 s to generate the 2 entries with a recorded figure (1 entry not recorded or not \
             read); the store records each entry's last use (`used`): a hit whose job skips its generator saves up \
             to its entry's figure (a compile cache's hit: what torch reports at the save)"
        );
        assert_eq!(seconds(Duration::from_millis(20_740)), "20.7");
    }
}
