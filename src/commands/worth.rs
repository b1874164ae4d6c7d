//! What each hit is worth. A save records how long its entry took to generate ([`measure`]):
//! from the end of this job's restore to the newest modification time under the saved paths, so
//! what the job did after the generator does not count. A hit reports its stack's figure against
//! its own time as what a job that skips its generator saves at most ([`of_stack`]); a compile
//! cache's job runs its torch code either way, so its hit reports torch's own figure
//! ([`crate::reads::torch`]). A figure no job could take (negative, longer than three days) is
//! "not recorded".
use crate::archive::Inventory;
use crate::env::Env;
use crate::manifest::{EntryKind, Generation};
use crate::outcome::Worth;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub(super) fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// What a save records: `given` (the `generation-seconds` input), else the window from
/// `since_ms` (the end of this job's restore) to the newest modification time of what is saved
/// (`inv`), plus `below_ms` (a compaction holds what the stack below took). `None` when there is
/// no window: no restore in this job, or nothing under `path` newer than its end.
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
        assert_eq!(worth.recorded, Some((1_796_083_200, Some("refs/heads/main".to_owned()))), "the base's");
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
        }
        // A forged ref is left out, whatever the figure.
        let forged = of_stack(&[slot(1_000, Some("refs/heads/x\n::error::pwned"))], restore, false);
        assert_eq!(forged.recorded, Some((1_796_083_200, None)));
        // A compile cache's job runs its torch code either way: the window is no saving.
        let compile = of_stack(&[slot(33_000, None)], Duration::from_millis(1_200), true);
        assert_eq!((compile.generation, compile.up_to()), (Some(Duration::from_secs(33)), None));
        assert_eq!(seconds(Duration::from_millis(20_740)), "20.7");
    }
}
