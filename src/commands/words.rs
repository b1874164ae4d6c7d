//! Where words render: the one place each typed value of a restore or a save becomes what users
//! read — its log line (and the level it is said at) and its cell of the step summary. A miss
//! reason, a save result and the details a save gives for it, an explanation, a stack put in
//! place, `grow`'s plan, a replacement, what `clean-on-miss` removed: commands decide the value
//! and say `words::…(&value)`; [`super::report`] lays the summary out and takes each value's
//! cell from here. Tests assert the values (outputs, the restore record, outcome structs) and
//! this module's snapshots assert the words of every value once. Causes from outside (an
//! error chain, a path) are put in as given.

use super::verify::TreeChanges;
use crate::backend::CacheMode;
use crate::fingerprint::{ImportTrouble, Note, SCAN_LIMIT, Unfollowed};
use crate::keys::Key;
use crate::manifest::Generation;
use crate::outcome::Uncovered;
use crate::outcome::{
    Cleaned, Explanation, MissReason, SameKey, SaveOutcome, SaveResult, StackApplied, StackStop, Transfer,
};
use crate::preset::Preset;
use crate::reads::Generator;
use crate::runner::Runner;
use crate::runner::summary::{Inline, Markdown};
use crate::stack::{CompactWhy, MAX_GENERATIONS, SkipWhy, Slot};
use crate::text::shorten;
use crate::units;

/// Files named in a line before "and N more" (files not in the entry, files cleaned).
const NAMED: usize = 5;

/// A log line and the level it is said at.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Said {
    Info(String),
    Warning(String),
}

impl Said {
    pub fn say(&self, runner: &Runner) {
        match self {
            Said::Info(line) => runner.info(line),
            Said::Warning(line) => runner.warning(line),
        }
    }
}

// A miss reason.

/// `not reused (corrupt): …`: a warning when the reason is trouble.
pub(super) fn not_reused(reason: MissReason, detail: Option<&str>) -> Said {
    let text = match detail {
        Some(d) => format!("not reused ({reason}): {d}"),
        None => format!("not reused ({reason})"),
    };
    if reason.is_trouble() { Said::Warning(text) } else { Said::Info(text) }
}

/// The detail of `prefix-only`: the service offered another key.
pub(super) fn prefix_only(offered: &str) -> String {
    format!("the service offered `{offered}`, which is not this key; exact reuse only")
}

/// The summary's `result` cell of a miss.
pub(super) fn not_reused_cell(md: &Markdown, reason: MissReason) -> Inline {
    Inline::ours(format!("❌ not reused: {}", md.code(reason.name())))
}

/// `lookup-only` found the entry (the `lookup-only` miss reason).
pub(super) const FOUND: &str = "entry exists; `lookup-only` is set, so nothing was downloaded";
/// The summary's `result` cell when `lookup-only` found the entry.
pub(super) const FOUND_CELL: &str = "☑️ entry exists (`lookup-only`; nothing downloaded)";

// A reuse: what it put in place, its stack, the files it kept.

/// `reused 3 files (1.2 MiB) in 40 ms`.
pub(super) fn reused(restored: &Transfer) -> String {
    format!(
        "reused {} ({}) in {}",
        units::count_of(restored.files, "file"),
        units::bytes(restored.content_bytes),
        units::duration(restored.elapsed)
    )
}

/// The summary's `result` cell of a reuse.
pub(super) const REUSED_CELL: &str = "✅ reused";

/// `generation 1 base 120 MiB (300 files) + layer 1 2 MiB (4 files)`, when the stack is more
/// than generation 0's base alone.
pub(super) fn stack(stack: &StackApplied) -> Option<String> {
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

/// Why a stack stopped, in words.
fn stack_stop(stop: &StackStop) -> String {
    match stop {
        StackStop::NotApplied { layer, reason, detail } => format!("layer {layer} not applied ({reason}): {detail}"),
        StackStop::Missing { missing, later } => {
            format!("layer {missing} is missing, so layer {later} and later are not applied")
        }
        StackStop::Trouble { layer, cause } => format!("layer {layer} could not be looked up: {cause}"),
    }
}

/// The log's warning when a layer was not applied: the stack stops at the slot below.
pub(super) fn stack_stops(stop: &StackStop, at: Slot) -> String {
    format!("{}; the stack stops at {at}", stack_stop(stop))
}

/// The log's warning when layers past a gap are not looked for or not found: a missing layer
/// makes the next growing save compact; the service's trouble is said as it is.
pub(super) fn stack_gap(stop: &StackStop) -> String {
    match stop {
        StackStop::Trouble { .. } => stack_stop(stop),
        _ => compacts_later(stop),
    }
}

/// A stack stopped: the next growing save compacts.
fn compacts_later(stop: &StackStop) -> String {
    format!("{}; a later save that adds files compacts the stack", stack_stop(stop))
}

/// The summary's `stack stopped` cell.
pub(super) fn stack_stopped_cell(stop: &StackStop) -> String {
    format!("⚠️ {}", compacts_later(stop))
}

/// `the generating run read 1 file that no input covers: …`: the reads no input of the key
/// covers, and the shared libraries it loaded that nothing says how to build (the detail of
/// [`SaveResult::UncoveredReads`] and the warning of `uncovered-reads: warn`).
pub(super) fn uncovered(uncovered: &Uncovered) -> String {
    let read: Vec<String> = uncovered.files.iter().filter(|f| !uncovered.libraries.contains(f)).cloned().collect();
    let mut sentences = Vec::new();
    if !read.is_empty() {
        let them = if read.len() == 1 { "it" } else { "them" };
        sentences.push(format!(
            "the generating run read {} that no input of the key covers: {}. A change to {them} would not change the \
             key: list {them} in `hash-files` (the `uncovered-files` output names all)",
            units::count_of(read.len(), "file"),
            named(&read),
        ));
    }
    let libraries = &uncovered.libraries;
    if !libraries.is_empty() {
        let (it, is) = if libraries.len() == 1 { ("it is", "library") } else { ("they are", "libraries") };
        sentences.push(format!(
            "{} {} shared {is} of the workspace, and no input of the key says how {it} built: {}. A change to {} \
             sources would not change the key: list the sources and build files in `hash-files` (such as \
             `source/CMakeLists.txt` and `source/op/**`), or the {is} if committed",
            if sentences.is_empty() { "the generating run loaded" } else { "It also loaded" },
            libraries.len(),
            named(libraries),
            if libraries.len() == 1 { "its" } else { "their" },
        ));
    }
    sentences.join(". ")
}

/// The most characters of a note a process wrote into the reads log, as a warning says it.
const NOTE_CHARS: usize = 300;
/// The most of those notes said, each once.
const NOTES: usize = 5;

/// The warnings of the notes the reads log holds (what a hook said of itself, written by any
/// Python process of the job: outside text), each cut to one short line, at most [`NOTES`] of
/// them and a last line counting the rest.
pub(super) fn reads_notes<'a>(notes: impl ExactSizeIterator<Item = &'a String>) -> Vec<String> {
    let total = notes.len();
    let mut said: Vec<String> =
        notes.take(NOTES).map(|n| format!("uncovered-reads: {}", shorten(n, NOTE_CHARS))).collect();
    if total > NOTES {
        let more = total - NOTES;
        said.push(format!("uncovered-reads: and {more} more {}", if more == 1 { "note" } else { "notes" }));
    }
    said
}

/// The error of `uncovered-reads: fail`.
pub(super) fn uncovered_refused(uncovered: &Uncovered) -> String {
    format!("{}; nothing is saved (`uncovered-reads: fail`)", self::uncovered(uncovered))
}

/// Whose reads a save weighs: the generator's, or every process's when none was seen writing.
pub(super) fn reads_weighed(generator: &Generator) -> String {
    match *generator {
        Generator::Wrote { processes, of } => format!(
            "uncovered-reads: weighing the reads of the generator: {} of the job's {} (those that wrote \
             under `path`, the processes that started them and those they started)",
            units::count(processes as u64),
            python_processes(of),
        ),
        Generator::NotSeen { processes: 0 } => {
            "uncovered-reads: no Python process of the job recorded a file it opened under the workspace".to_owned()
        }
        Generator::NotSeen { processes } => format!(
            "uncovered-reads: no Python process of the job was seen writing under `path` (the generator is not \
             Python, or writes through native code, as `torch.save` does): the reads of the job's {} are weighed",
            python_processes(processes),
        ),
    }
}

/// Nothing uncovered: how much the generator read.
pub(super) fn reads_covered(read: usize) -> String {
    format!(
        "uncovered-reads: the generator read {} under the workspace; an input covers each",
        units::count_of(read, "file")
    )
}

/// Processes whose record the hook cut at its cap.
pub(super) fn reads_cut(processes: usize) -> String {
    format!(
        "uncovered-reads: the record of {} was cut at {} files: what {} read after is not seen",
        python_processes(processes),
        units::count(crate::reads::HOOK_CAP as u64),
        if processes == 1 { "it" } else { "they" },
    )
}

/// `1 Python process`, `2 Python processes`.
fn python_processes(n: usize) -> String {
    format!("{} Python process{}", units::count(n as u64), if n == 1 { "" } else { "es" })
}

/// The log was longer than the save reads.
pub(super) fn reads_truncated() -> String {
    format!(
        "uncovered-reads: the reads log is longer than {}: only its beginning is weighed",
        units::bytes(crate::reads::LOG_CAP)
    )
}

/// `verify-reuse`'s one line about what changed under `path` since the restore; `preset` and
/// `growing` (`grow` is on) say why files were added, `additions_kept` whether `grow` kept them.
pub(super) fn reuse_verdict(
    changes: &TreeChanges,
    preset: Option<Preset>,
    growing: bool,
    additions_kept: bool,
) -> String {
    let extras = match changes.kept_extras {
        0 => String::new(),
        n => format!(" ({} not in the entry, there before the restore, kept)", units::count_of(n, "file")),
    };
    if changes.is_empty() {
        return format!("nothing under `path` changed since the restore{extras}");
    }
    let counts = format!(
        "{} added, {} changed, {} removed under `path` since the restore{extras}",
        changes.added.len(),
        changes.changed.len(),
        changes.removed.len()
    );
    let torch = preset == Some(Preset::TorchInductor);
    let why = match (changes.added.is_empty(), torch, additions_kept, growing) {
        (true, ..) => "",
        (false, true, true, _) => ": torch compiled graphs the restored cache did not hold; `grow` kept them",
        (false, true, false, true) => {
            ": torch compiled graphs the restored cache did not hold, and `grow` did not keep them this time"
        }
        (false, true, false, false) => {
            ": torch compiled graphs the restored cache did not hold, so it recompiled on this warm run"
        }
        (false, false, true, _) => ": `grow` kept the added files",
        (false, false, false, _) => "",
    };
    format!("{counts}{why}")
}

/// The error of `strict` when a restore met the service's trouble.
pub(super) fn strict_restore(reason: MissReason, detail: Option<&str>) -> String {
    format!("{reason}: {}", detail.unwrap_or(""))
}

/// The error of `strict` when a save met trouble.
pub(super) fn strict_save(result: SaveResult, detail: Option<&str>) -> String {
    format!("{result}: {}", detail.unwrap_or(""))
}

/// `3 files under `path` not in the entry: `a`, `b`, `c``, naming at most [`NAMED`].
pub(super) fn extra_files(extra: &[String]) -> String {
    format!("{} under `path` not in the entry: {}", units::count_of(extra.len(), "file"), named(extra))
}

/// The log's line of the files a reuse kept.
pub(super) fn kept(extra: &[String]) -> String {
    format!("kept {}", extra_files(extra))
}

/// At most [`NAMED`] names in code spans, then `and N more`.
fn named(names: &[String]) -> String {
    let mut shown: Vec<String> = names.iter().take(NAMED).map(|f| format!("`{}`", shorten(f, 120))).collect();
    if names.len() > NAMED {
        shown.push(format!("and {} more", names.len() - NAMED));
    }
    shown.join(", ")
}

// A replacement of an entry that could not be used.

/// The restore's line on what the save of this job writes instead (`None`: the generations are
/// used up).
pub(super) fn replacement(slot: Option<Slot>) -> Said {
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

/// The summary's `replacement` cell.
pub(super) fn replacement_cell(slot: Slot) -> String {
    format!("the save of this job writes {slot}, which later restores find first")
}

// What `clean-on-miss` removed.

/// `removed 2 stale files (`a`, `b`) and 1 directory; kept 3 files the repository tracks`,
/// naming at most [`NAMED`] files.
pub(super) fn cleaned(cleaned: &Cleaned) -> String {
    let named = if cleaned.names.is_empty() { String::new() } else { format!(" ({})", named(&cleaned.names)) };
    let mut line = format!(
        "removed {}{named} and {}",
        units::count_of(cleaned.files, "stale file"),
        units::count_of(cleaned.dirs, "directory")
    );
    line.push_str(&kept_tracked(cleaned));
    line
}

/// The summary's `clean-on-miss` cell: counts only (the files follow in a list of their own).
pub(super) fn cleaned_cell(cleaned: &Cleaned) -> String {
    let mut text =
        format!("removed {}, {}", units::count_of(cleaned.files, "file"), units::count_of(cleaned.dirs, "directory"));
    text.push_str(&kept_tracked(cleaned));
    text
}

fn kept_tracked(cleaned: &Cleaned) -> String {
    match cleaned.kept_tracked {
        0 => String::new(),
        n => format!("; kept {} the repository tracks", units::count_of(n, "file")),
    }
}

/// The summary's `clean-on-miss` cell when it could not finish under `strict`.
pub(super) const CLEAN_FAILED_CELL: &str =
    "❌ did not finish (`strict`): what is there will not be saved under this key";

// An explanation of a miss.

/// An entry with this very key (and fingerprint) but another version: one line for the log,
/// the summary, the `miss-reason` detail and `explain`'s `changes`.
pub(super) fn same_key(same: &SameKey) -> String {
    if let Some(slot) = same.slot {
        return match slot.is_base() {
            true => format!(
                "this key's stack has a {slot} that this run's lookup did not find (saved on a ref this run \
                 cannot read, or since this run looked)"
            ),
            false => format!(
                "only {slot} of this key's stack exists: its base is gone (evicted or deleted), and a layer is \
                 never applied without it"
            ),
        };
    }
    match &same.compression {
        Some(c) => format!(
            "an entry with this key exists for other `path` lines or compression: it was saved with `compression: {c}`"
        ),
        None => "an entry with this key exists for other `path` lines or compression: it was saved with other \
                 `path` lines (or by an exact-cache of another archive format)"
            .to_owned(),
    }
}

/// When nothing differs between the fingerprints compared.
const NOTHING_DIFFERS: &str = "no fingerprint component differs";

/// Why a miss is a miss, as log lines: the entry compared with (and its ref, when it has one)
/// and at most `limit` changes.
pub(super) fn explanation(explanation: &Explanation, limit: usize) -> Vec<String> {
    let against_ref = match explanation.against_ref.as_deref() {
        Some("") => " (saved outside Actions)".to_owned(),
        Some(r) => format!(" ({r})"),
        None => String::new(),
    };
    let mut lines = vec![format!("compared with `{}`{against_ref}:", explanation.against_key)];
    lines.extend(explanation.changes.iter().take(limit).map(|line| format!("  {line}")));
    if explanation.changes.len() > limit {
        lines.push(format!("  … and {} more", explanation.changes.len() - limit));
    }
    if explanation.changes.is_empty() {
        lines.push(format!("  {NOTHING_DIFFERS}"));
    }
    lines
}

/// The summary's paragraph before the changes: what the miss was compared with.
pub(super) fn explanation_intro(md: &Markdown, explanation: &Explanation) -> Inline {
    let when = match explanation.against_ref.as_deref() {
        Some("") => " (saved outside Actions)".to_owned(),
        Some(r) => format!(" on {}", md.code(r)),
        None => String::new(),
    };
    let against = md.code(&explanation.against_key);
    Inline::ours(match explanation.same_key {
        Some(_) => format!("**Why this is a miss** — {against}{when} has this very key and fingerprint:"),
        None => format!("**Why this is a miss** — compared with the newest entry {against}{when}:"),
    })
}

/// The summary's paragraph when no change is listed.
pub(super) fn nothing_differs_cell() -> Inline {
    Inline::ours(NOTHING_DIFFERS)
}

/// The summary's paragraph when `explain-misses` explains nothing: why.
pub(super) fn unexplained_cell(md: &Markdown, why: &str) -> Inline {
    Inline::ours(format!("**Why this is a miss** — `explain-misses`: {}", md.prose(why)))
}

// A save result.

/// How a save ended, when the log says it at the end: an entry that exists, or trouble.
pub(super) fn save_ended(outcome: &SaveOutcome) -> Option<Said> {
    let detail = outcome.detail.as_deref().unwrap_or("");
    match outcome.result {
        SaveResult::Exists => Some(Said::Info(format!("entry exists: {detail}"))),
        result if outcome.trouble => Some(Said::Warning(format!("not saved ({result}): {detail}"))),
        _ => None,
    }
}

/// A post step without the restore step's key (`error`): the log's line, and the detail.
pub(super) const NO_KEY_LOG: &str = "the restore step computed no key; nothing to save";
pub(super) const NO_KEY: &str = "no key from the restore step";

/// `clean-on-miss` could not finish in the restore step (`incomplete`).
pub(super) const STALE: &str = "`clean-on-miss` could not remove stale files in the restore step; not saving them";

/// The restore step found the key's entries and could use none: this save replaces them.
pub(super) const REPLACING: &str = "the restore step could not use this key's entry: saving a replacement";

/// `verify-reuse` or `grow` (`what`) after a hit whose restore kept no manifest.
pub(super) fn no_manifest_kept(what: &str) -> String {
    format!("{what}: the restore step kept no manifest; nothing to compare with")
}

/// The detail of `skipped-hit` after a hit.
pub(super) const RESTORED: &str = "restored";

/// `exists`: a base of the key exists already.
pub(super) fn base_exists(slot: Slot) -> String {
    format!("{slot} of this key exists already")
}

/// `exists`: another job wrote the replacement this save would write.
pub(super) fn replaced_by_another(slot: Slot) -> String {
    format!("{slot} replaced the entry this job's restore could not use (saved by another job)")
}

/// A key whose generations are used up (`skipped-hit`, and a warning).
pub(super) fn generations_used_up() -> String {
    format!(
        "this key has used all {MAX_GENERATIONS} generations; what this job made is not kept until the fingerprint \
         changes"
    )
}

/// What changed between the restore's fingerprint and the save's, in a save's refusal: at most
/// [`NAMED`] of the changes, then how many more.
pub(super) fn changed_since_restore(changes: &[String]) -> String {
    match changes {
        [] => "its fingerprint file could not be read to say what changed".to_owned(),
        _ => {
            let mut shown: Vec<&str> = changes.iter().take(NAMED).map(String::as_str).collect();
            let more = changes.len().saturating_sub(NAMED);
            let more = (more > 0).then(|| format!("and {more} more"));
            shown.extend(more.as_deref());
            format!("what changed: {}", shown.join("; "))
        }
    }
}

/// `ACTIONS_CACHE_MODE` forbids writes (`read-only`): the log's line, and the detail.
pub(super) fn cache_mode(mode: CacheMode) -> String {
    format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not write to the cache")
}
pub(super) const READ_ONLY: &str = "cache mode is read-only";

/// `ACTIONS_CACHE_MODE` forbids reads: the detail of the `cache-mode` miss.
pub(super) fn cache_mode_no_reads(mode: CacheMode) -> String {
    format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not read the cache, so nothing was looked up")
}

/// `ACTIONS_CACHE_MODE` holds none of its values (a warning): the job goes on as `write`.
pub(super) fn unknown_cache_mode(value: &str) -> String {
    format!(
        "`ACTIONS_CACHE_MODE` is `{}`, none of {}: read as `write`",
        shorten(value, 40),
        crate::choice::names::<CacheMode>()
    )
}

/// A `required` path is missing (`incomplete`).
pub(super) fn required_missing(path: &std::path::Path) -> String {
    format!("required path `{}` does not exist; not saving an incomplete entry", path.display())
}

/// Nothing to save (`incomplete`): no `path` entry at all (`none`), or empty directories only.
pub(super) fn nothing_to_save(none: bool) -> &'static str {
    match none {
        true => "nothing to save: no `path` entry exists",
        false => "nothing to save: `path` holds only empty directories, no files",
    }
}

/// The warning of [`nothing_to_save`].
pub(super) fn not_saving_empty(nothing: &str) -> String {
    format!("{nothing}; not saving an empty entry (if an empty result is right, put a marker file in `path`)")
}

/// `secret-found`: in the fingerprint, in a `path` line, in a file.
pub(super) const SECRET_IN_FINGERPRINT: &str = "the fingerprint (a `hash-env` or preset variable) holds the value of \
                                                 a token or of a `secret-env` variable (not shown); nothing was uploaded";
pub(super) const SECRET_IN_PATH: &str =
    "a `path` line holds the value of a token or of a `secret-env` variable (not shown); nothing was uploaded";
pub(super) fn secret_in_file(shown: &str) -> String {
    format!(
        "`{shown}` holds the value of a token or of a `secret-env` variable (not shown); the entry was not committed"
    )
}

/// `exists`: another job committed the entry first, or is committing it.
pub(super) const SAVED_FIRST: &str = "another job saved this entry first";
pub(super) const CREATING: &str = "another job is creating this entry";

/// `exists`: the slot could not be reserved.
pub(super) fn reserved_by_another(slot: Slot) -> String {
    match slot {
        Slot::FIRST_BASE => {
            "an entry with this key and version exists already (saved earlier, or being saved by another job)"
                .to_owned()
        }
        slot => format!("{slot} of this key exists already (saved by another job)"),
    }
}

/// `save-if` is false (`disabled`): the detail.
pub(super) const DISABLED: &str = "`save-if` is false";

/// `save-if` is false (`disabled`): the log's line.
pub(super) fn disabled(key: &Key) -> String {
    format!("{DISABLED}: not saving `{key}`")
}

/// `save-if` is false after a hit, with `grow`.
pub(super) const DISABLED_LAYER: &str = "`save-if` is false: what the job added is not saved as a layer";

/// After a hit, without `grow` (or with nothing to add): `entry `…` was found by the restore
/// step; not saving` (`skipped-hit`).
pub(super) fn hit_not_saved(key: &Key, found_by: &str) -> String {
    format!("entry `{key}` {found_by}; not saving")
}

/// `grow` found files removed since the restore.
pub(super) fn grow_removed(files: usize) -> String {
    format!(
        "grow: {} removed since the restore; layers never delete (a content-addressed cache needs no deletions)",
        units::count_of(files, "file")
    )
}

/// `grow` found files changed since the restore.
pub(super) fn grow_changed(files: usize) -> String {
    format!(
        "grow: {} changed since the restore, not kept: layers only add files (a content-addressed cache never \
         changes one)",
        units::count_of(files, "file")
    )
}

/// `grow`'s plan ([`crate::stack::Growth::Nothing`]): nothing to save.
pub(super) const GROW_NOTHING: &str = "grow: no file was added under `path` since the restore";

/// `grow`'s plan ([`crate::stack::Growth::Skip`]): not this run, and why.
pub(super) fn grow_skipped(why: SkipWhy) -> String {
    let why = match why {
        SkipWhy::LayerUnread => "a layer could not be read in the restore step (service trouble)",
    };
    format!("grow: not this run: {why}")
}

/// `grow`'s plan ([`crate::stack::Growth::Layer`]): what the layer holds, and its slot.
pub(super) fn grow_layer(files: usize, bytes: u64, slot: Slot) -> String {
    format!(
        "grow: saving {} added since the restore ({}) as {slot}",
        units::count_of(files, "file"),
        units::bytes(bytes)
    )
}

/// `grow`'s plan ([`crate::stack::Growth::Compact`]), once the save has numbered the new base.
pub(super) fn compacting(slot: Slot, why: CompactWhy) -> String {
    let layers = |n: u32| units::count_of(n as usize, "layer");
    let why = match why {
        CompactWhy::Stopped => "a layer of the stack could not be applied".to_owned(),
        CompactWhy::Full { layers: n } => format!("the stack has {} (`grow-max-layers`)", layers(n)),
        CompactWhy::Unprobed { probed } => {
            format!("the restore looked for {} only, so the next one may exist", layers(probed))
        }
        CompactWhy::Heavy { layer_bytes, base_bytes, max_share } => format!(
            "its layers would hold {} against a base of {} (`grow-max-share` {:.0}%)",
            units::bytes(layer_bytes),
            units::bytes(base_bytes),
            max_share * 100.0
        ),
    };
    format!("grow: compacting the stack into {slot}: {why}")
}

/// The save of a job whose restore could not use the entry, once it has numbered the new base.
pub(super) fn saving_replacement(slot: Slot) -> String {
    format!("saving {slot} as the replacement")
}

/// A new base that exists where this run's lookups do not reach it: the save goes one up.
pub(super) fn out_of_reach(slot: Slot, next: Slot) -> String {
    format!("{slot} exists where this run's lookup does not reach it; saving {next} instead")
}

/// The summary's `result` cell of a save.
pub(super) fn save_result_cell(md: &Markdown, result: SaveResult) -> Inline {
    md.code(result.name())
}

/// `saved generation 1 base: 2 files (15 B, 40 B compressed with zstd) in 3 ms` (the slot
/// named unless it is generation 0's base).
pub(super) fn saved(slot: Option<Slot>, archived: &Transfer, compression: &str) -> String {
    format!(
        "saved {}{} ({}, {} compressed with {}) in {}",
        slot.map(|slot| format!("{slot}: ")).unwrap_or_default(),
        units::count_of(archived.files, "file"),
        units::bytes(archived.content_bytes),
        units::bytes(archived.archive_bytes),
        compression,
        units::duration(archived.elapsed)
    )
}

/// The summary's label of what was written: `saved`, `saved as layer 1`.
pub(super) fn saved_label(slot: Option<Slot>) -> String {
    slot.map_or_else(|| "saved".to_owned(), |slot| format!("saved as {slot}"))
}

/// The log's line on the time to generate an entry just written: `generation` as the save
/// measured it (or the input gave it, `given`).
pub(super) fn time_to_generate(generation: Option<&Generation>, given: bool) -> String {
    match generation.and_then(Generation::plausible) {
        Some(d) if given => format!("time to generate: {} (`generation-seconds`)", units::duration(d)),
        Some(d) => format!(
            "time to generate: {} (from the end of this job's restore to the newest file under `path`)",
            units::duration(d)
        ),
        None if generation.is_some() => "time to generate: not recorded (not a time one job takes)".to_owned(),
        None => "time to generate: not recorded (no restore of this key earlier in the job, or nothing under \
                 `path` written after it; `generation-seconds` gives it)"
            .to_owned(),
    }
}

/// The summary's `time to generate` cell.
pub(super) fn time_to_generate_cell(generation: Option<std::time::Duration>) -> String {
    generation.map_or_else(|| "not recorded".to_owned(), units::duration)
}

// What collecting the fingerprint says.

/// Warnings of files whose imports are not all followed, logged one by one up to this many.
pub(super) const NOTES_LOGGED: usize = 10;
/// Lines of one file a warning names.
const LINES_NAMED: usize = 8;

/// A note of the fingerprint: a warning for what the import follower could not follow (the key
/// may miss what it loads), a line for an editable install left out.
pub(super) fn fingerprint_note(note: &Note) -> Said {
    match note {
        Note::Imports { file, trouble } => Said::Warning(import_trouble(file, trouble)),
        Note::EditableLeftOut { name, version, location } => Said::Info(format!(
            "python.dists: `{name}` {version} left out: installed in editable mode from the workspace (`{location}`), \
             its files enter the key through `hash-files` and imports; `python-keep-editable: true` keeps it"
        )),
    }
}

fn import_trouble(file: &str, trouble: &ImportTrouble) -> String {
    match trouble {
        ImportTrouble::Lines(lines) => {
            let mut parts = Vec::new();
            for (what, says) in [
                (Unfollowed::SysPath, "changes `sys.path` to a value that cannot be worked out without running it"),
                (Unfollowed::ComputedName, "imports a module by a name computed at run time"),
                (Unfollowed::TooLong, "is longer than the import follower reads"),
            ] {
                let at: Vec<String> =
                    lines.iter().filter(|(l, w)| *w == what && *l > 0).map(|(l, _)| l.to_string()).collect();
                let cut = lines.iter().any(|(l, w)| *w == what && *l == 0);
                if cut {
                    parts.push("its `sys.path` changes are more than the import follower keeps".to_owned());
                }
                let mut named = at.iter().take(LINES_NAMED).cloned().collect::<Vec<_>>().join(", ");
                if at.len() > LINES_NAMED {
                    named.push_str(&format!(" and {} more", at.len() - LINES_NAMED));
                }
                match at.len() {
                    0 => {}
                    1 => parts.push(format!("line {named} {says}")),
                    _ => parts.push(format!("lines {named} {}", plural_verb(says))),
                }
            }
            format!(
                "imports of `{file}` not all followed: {}. What that loads is not in the key: list those modules in \
                 `hash-files` (such as `lib/**/*.py`)",
                parts.join("; ")
            )
        }
        ImportTrouble::TooLarge(bytes) => format!(
            "imports of `{file}` not followed: it is {}, over the {} the import follower reads (the file is in the \
             key, what it imports is not): list the modules it imports in `hash-files`",
            units::bytes(*bytes),
            units::bytes(SCAN_LIMIT)
        ),
        ImportTrouble::NotRead(target) => format!(
            "`{file}` is not read for imports: it resolves to `{}`, outside the workspace or not a regular file \
             (an import of it does not enter the key)",
            target.display()
        ),
    }
}

/// `changes …` → `change …`, `imports …` → `import …`, `is …` → `are …`.
fn plural_verb(says: &str) -> String {
    let (verb, rest) = says.split_once(' ').unwrap_or((says, ""));
    let verb = match verb {
        "is" => "are",
        v => v.strip_suffix('s').unwrap_or(v),
    };
    format!("{verb} {rest}")
}

/// What a step logs of the fingerprint's notes: each editable install left out, and a warning per
/// file whose imports are not all followed, the first [`NOTES_LOGGED`] of them and then how many
/// more (the step summary lists them).
pub(super) fn fingerprint_notes(notes: &[Note]) -> Vec<Said> {
    let warnings = notes.iter().filter(|n| matches!(n, Note::Imports { .. })).count();
    let mut said: Vec<Said> =
        notes.iter().filter(|n| !matches!(n, Note::Imports { .. })).map(fingerprint_note).collect();
    said.extend(notes.iter().filter(|n| matches!(n, Note::Imports { .. })).take(NOTES_LOGGED).map(fingerprint_note));
    if warnings > NOTES_LOGGED {
        said.push(Said::Warning(format!(
            "imports of {} not all followed either: the step summary lists them",
            units::count_of(warnings - NOTES_LOGGED, "more file")
        )));
    }
    said
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::choice::Named;
    use crate::runner::Redactor;
    use std::fmt::Write;
    use std::time::Duration;

    fn said(s: &Said) -> String {
        match s {
            Said::Info(line) => format!("info: {line}"),
            Said::Warning(line) => format!("warning: {line}"),
        }
    }

    fn transfer(files: usize) -> Transfer {
        Transfer { files, content_bytes: 15 << 20, archive_bytes: 4 << 20, elapsed: Duration::from_millis(1250) }
    }

    /// Every miss reason, as the log and the summary say it.
    #[test]
    fn words_of_a_restore() {
        let md = Markdown::new(Redactor::default());
        let mut out = String::new();
        // `none` is a reuse and `lookup-only` an entry found ([`FOUND`]): neither is a miss.
        for reason in MissReason::ALL.iter().filter(|r| !matches!(r, MissReason::None | MissReason::LookupOnly)) {
            writeln!(out, "{}", said(&not_reused(*reason, None))).unwrap();
            writeln!(out, "{}", said(&not_reused(*reason, Some("the detail")))).unwrap();
            writeln!(out, "summary: {}", not_reused_cell(&md, *reason)).unwrap();
        }
        writeln!(out, "detail: {}", prefix_only("p-other")).unwrap();
        writeln!(out, "info: {FOUND}\nsummary: {FOUND_CELL}").unwrap();
        writeln!(out, "info: {}\nsummary: {REUSED_CELL}", reused(&transfer(3))).unwrap();
        let mut applied = StackApplied { generation: 0, base: transfer(3), layers: vec![], stopped: None };
        writeln!(out, "stack of generation 0's base alone: {:?}", stack(&applied)).unwrap();
        applied.generation = 1;
        applied.layers.push(transfer(1));
        writeln!(out, "info: stack: {}", stack(&applied).unwrap()).unwrap();
        let why = StackStop::NotApplied {
            layer: 2,
            reason: MissReason::Corrupt,
            detail: "its parent is not the slot below".into(),
        };
        writeln!(out, "warning: {}\nsummary: {}", stack_stops(&why, Slot::new(1, 1)), stack_stopped_cell(&why))
            .unwrap();
        for gap in
            [StackStop::Missing { missing: 3, later: 4 }, StackStop::Trouble { layer: 2, cause: "HTTP 503".into() }]
        {
            writeln!(out, "warning: {}\nsummary: {}", stack_gap(&gap), stack_stopped_cell(&gap)).unwrap();
        }
        let extra: Vec<String> = (1..=7).map(|i| format!("out/x{i}.bin")).collect();
        writeln!(out, "info: {}\nsummary: {}", kept(&extra[..1]), extra_files(&extra)).unwrap();
        writeln!(out, "{}\n{}", said(&replacement(Some(Slot::base(2)))), said(&replacement(None))).unwrap();
        writeln!(out, "summary: {}", replacement_cell(Slot::base(2))).unwrap();
        let removed = Cleaned { files: 6, dirs: 1, names: extra.clone(), kept_tracked: 2 };
        let none = Cleaned::default();
        writeln!(out, "info: clean-on-miss: {}\ninfo: clean-on-miss: {}", cleaned(&removed), cleaned(&none)).unwrap();
        writeln!(out, "summary: {}\nsummary: {CLEAN_FAILED_CELL}", cleaned_cell(&removed)).unwrap();
        insta::assert_snapshot!(out);
    }

    /// Every kind of explanation, as the log and the summary say it.
    #[test]
    fn words_of_an_explanation() {
        let md = Markdown::new(Redactor::default());
        let mut out = String::new();
        for same in [
            SameKey { compression: Some("gzip".into()), slot: None },
            SameKey { compression: None, slot: None },
            SameKey { compression: None, slot: Some(Slot::base(1)) },
            SameKey { compression: None, slot: Some(Slot::new(0, 2)) },
        ] {
            writeln!(out, "{}", same_key(&same)).unwrap();
        }
        let changes = |n: usize| (1..=n).map(|i| format!("env: V{i} a → b")).collect();
        for (against_ref, changes, same_key) in [
            (Some("refs/heads/main"), changes(3), None),
            (Some(""), changes(0), None),
            (None, changes(1), Some(SameKey { compression: None, slot: None })),
        ] {
            let e = Explanation {
                against_key: "p-abc".into(),
                against_ref: against_ref.map(str::to_owned),
                changes,
                same_key,
            };
            writeln!(out, "{}\nsummary: {}", explanation(&e, 2).join("\n"), explanation_intro(&md, &e)).unwrap();
        }
        writeln!(out, "summary: {}", nothing_differs_cell()).unwrap();
        writeln!(out, "summary: {}", unexplained_cell(&md, "skipped: no catalog")).unwrap();
        insta::assert_snapshot!(out);
    }

    /// Every note of the fingerprint, as the log says it (the summary's cell is the same words).
    #[test]
    fn words_of_a_fingerprint() {
        use crate::fingerprint::{ImportTrouble, Note, Unfollowed};
        let mut out = String::new();
        let imports = |trouble| Note::Imports { file: "tools/gen.py".into(), trouble };
        let many: Vec<(u32, Unfollowed)> = (1..=10).map(|l| (l * 10, Unfollowed::ComputedName)).collect();
        let notes = [
            imports(ImportTrouble::Lines(vec![(3, Unfollowed::SysPath)])),
            imports(ImportTrouble::Lines(vec![
                (3, Unfollowed::SysPath),
                (5, Unfollowed::SysPath),
                (9, Unfollowed::ComputedName),
            ])),
            imports(ImportTrouble::Lines(many)),
            imports(ImportTrouble::Lines(vec![(2, Unfollowed::TooLong), (0, Unfollowed::TooLong)])),
            imports(ImportTrouble::TooLarge(50 << 20)),
            imports(ImportTrouble::NotRead("/proc/1/pagemap".into())),
            Note::EditableLeftOut {
                name: "deepmd-kit".into(),
                version: "3.1.3.dev12+gbc902da".into(),
                location: ".".into(),
            },
        ];
        for note in &notes {
            writeln!(out, "{}", said(&fingerprint_note(note))).unwrap();
        }
        let crowd: Vec<Note> = (0..12)
            .map(|i| Note::Imports {
                file: format!("m{i}.py"),
                trouble: ImportTrouble::Lines(vec![(1, Unfollowed::ComputedName)]),
            })
            .collect();
        let logged = fingerprint_notes(&crowd);
        writeln!(out, "12 files: {} lines, the last: {}", logged.len(), said(logged.last().unwrap())).unwrap();
        insta::assert_snapshot!(out);
    }

    /// Every save result, as the log and the summary say it.
    #[test]
    fn words_of_a_save() {
        let md = Markdown::new(Redactor::default());
        let mut out = String::new();
        let read: Vec<String> = (1..=7).map(|i| format!("data/case{i}.txt")).collect();
        let one = Uncovered { files: read[..1].to_vec(), libraries: Vec::new() };
        let libraries = vec!["build/libop.so".to_owned(), "build/libop_cuda.so".to_owned()];
        let mut both = Uncovered { files: read.clone(), libraries: libraries[..1].to_vec() };
        both.files.push(libraries[0].clone());
        let built = Uncovered { files: libraries.clone(), libraries };
        writeln!(out, "warning: {}\nerror: {}", uncovered(&one), uncovered_refused(&both)).unwrap();
        writeln!(out, "warning: {}", uncovered(&built)).unwrap();
        let generators = [
            Generator::Wrote { processes: 3, of: 7 },
            Generator::NotSeen { processes: 1 },
            Generator::NotSeen { processes: 0 },
        ];
        for generator in generators {
            writeln!(out, "info: {}", reads_weighed(&generator)).unwrap();
        }
        writeln!(out, "info: {}", reads_covered(12)).unwrap();
        writeln!(out, "warning: {}\nwarning: {}\nwarning: {}", reads_cut(1), reads_cut(2), reads_truncated()).unwrap();
        let notes: Vec<String> = (1..=7)
            .map(|i| format!("note {i} {}\n::error::x", if i == 1 { "long ".repeat(100) } else { String::new() }))
            .collect();
        for note in reads_notes(notes.iter()) {
            writeln!(out, "warning: {note}").unwrap();
        }
        let none = TreeChanges::default();
        let added = TreeChanges { added: read.clone(), kept_extras: 2, ..TreeChanges::default() };
        let changed =
            TreeChanges { changed: read[..1].to_vec(), removed: read[1..3].to_vec(), ..TreeChanges::default() };
        for (changes, preset, growing, kept) in [
            (&none, None, false, false),
            (&changed, None, false, false),
            (&added, None, true, true),
            (&added, Some(Preset::TorchInductor), true, true),
            (&added, Some(Preset::TorchInductor), true, false),
            (&added, Some(Preset::TorchInductor), false, false),
        ] {
            writeln!(out, "verify-reuse: {}", reuse_verdict(changes, preset, growing, kept)).unwrap();
        }
        writeln!(out, "strict: {}", strict_restore(MissReason::ServiceError, Some("HTTP 503"))).unwrap();
        writeln!(out, "strict: {}", strict_save(SaveResult::Error, None)).unwrap();
        for result in SaveResult::ALL {
            for trouble in [false, true] {
                let outcome = SaveOutcome { trouble, ..SaveOutcome::skipped(None, *result, "the detail") };
                let line = save_ended(&outcome).map_or_else(|| "(nothing)".to_owned(), |s| said(&s));
                writeln!(out, "{result} (trouble: {trouble}): {line}").unwrap();
            }
            writeln!(out, "summary: {}", save_result_cell(&md, *result)).unwrap();
        }
        writeln!(out, "info: {}", saved(None, &transfer(2), "zstd")).unwrap();
        writeln!(out, "info: {}", saved(Some(Slot::new(0, 1)), &transfer(2), "gzip")).unwrap();
        writeln!(out, "summary: {} | {}", saved_label(None), saved_label(Some(Slot::new(0, 1)))).unwrap();
        let generation = |millis| Generation { millis, recorded: 0, r#ref: None, given: false };
        writeln!(out, "info: {}", time_to_generate(Some(&generation(20_700)), true)).unwrap();
        writeln!(out, "info: {}", time_to_generate(Some(&generation(20_700)), false)).unwrap();
        writeln!(out, "info: {}", time_to_generate(Some(&generation(-1)), false)).unwrap();
        writeln!(out, "info: {}", time_to_generate(None, false)).unwrap();
        let cells = [Some(Duration::from_millis(20_700)), None].map(time_to_generate_cell);
        writeln!(out, "summary: {}", cells.join(" | ")).unwrap();
        writeln!(out, "info: {}\ninfo: {DISABLED_LAYER}", disabled(&"p-abc".into())).unwrap();
        writeln!(out, "info: {NO_KEY_LOG}\ndetail: {NO_KEY}\nwarning: {STALE}\ninfo: {REPLACING}").unwrap();
        writeln!(out, "info: {}\ndetail: {RESTORED}", no_manifest_kept("verify-reuse")).unwrap();
        writeln!(out, "detail: {}", base_exists(Slot::base(1))).unwrap();
        writeln!(out, "detail: {}", replaced_by_another(Slot::base(2))).unwrap();
        writeln!(out, "warning: {}", generations_used_up()).unwrap();
        writeln!(out, "info: {}\ndetail: {READ_ONLY}", cache_mode(CacheMode::Read)).unwrap();
        writeln!(out, "detail: {}", cache_mode_no_reads(CacheMode::WriteOnly)).unwrap();
        writeln!(out, "warning: {}", unknown_cache_mode("readonly\n::error::x")).unwrap();
        writeln!(out, "warning: {}", required_missing(std::path::Path::new("out/model.pth"))).unwrap();
        for none in [true, false] {
            writeln!(out, "warning: {}\ndetail: {}", not_saving_empty(nothing_to_save(none)), nothing_to_save(none))
                .unwrap();
        }
        writeln!(out, "detail: {SECRET_IN_FINGERPRINT}\ndetail: {SECRET_IN_PATH}").unwrap();
        writeln!(out, "detail: {}", secret_in_file("out/.env")).unwrap();
        writeln!(out, "detail: {SAVED_FIRST}\ndetail: {CREATING}").unwrap();
        writeln!(out, "detail: {}", reserved_by_another(Slot::FIRST_BASE)).unwrap();
        writeln!(out, "detail: {}", reserved_by_another(Slot::base(3))).unwrap();
        writeln!(out, "info: {}", hit_not_saved(&"p-abc".into(), "was found by the restore step")).unwrap();
        writeln!(out, "info: {}\ninfo: {}\ninfo: {GROW_NOTHING}", grow_removed(1), grow_changed(2)).unwrap();
        writeln!(out, "info: {}", grow_skipped(SkipWhy::LayerUnread)).unwrap();
        writeln!(out, "info: {}", grow_layer(1, 7, Slot::new(0, 1))).unwrap();
        for why in [
            CompactWhy::Stopped,
            CompactWhy::Full { layers: 4 },
            CompactWhy::Unprobed { probed: 1 },
            CompactWhy::Heavy { layer_bytes: 501, base_bytes: 1000, max_share: 0.5 },
        ] {
            writeln!(out, "info: {}", compacting(Slot::base(1), why)).unwrap();
        }
        writeln!(out, "info: {}", saving_replacement(Slot::base(1))).unwrap();
        writeln!(out, "info: {}", out_of_reach(Slot::base(2), Slot::base(3))).unwrap();
        insta::assert_snapshot!(out);
    }
}
