//! A save's words: why it saves nothing, `grow`'s plan, the slot it writes, the reads no input
//! covers, `verify-reuse`'s verdict, what a compile cache's hit saved, how it ended, its
//! summary and its `strict` error.

use super::super::handoff::RecordError;
use super::{Said, Shown, named};
use crate::backend::CacheMode;
use crate::keys::Key;
use crate::manifest::Generation;
use crate::outcome::{CompileWorth, HitRecord, SaveOutcome, SaveResult, Transfer, Uncovered, Verified};
use crate::reads::Generator;
use crate::reads::torch::CompileSaving;
use crate::runner::summary::Inline;
use crate::stack::{CompactWhy, MAX_GENERATIONS, SkipWhy, Slot};
use crate::text::{error_chain, shorten};
use crate::units;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub fn group(key: &Key) -> String {
    format!("Save {key}")
}

/// The post step after a failed or cancelled job without `save-on-failure`.
pub fn failed_job(status: &str) -> Said {
    Said::Notice(format!("the job's status is `{status}`: nothing was saved (`save-on-failure: true` to change)"))
}

/// A post step without the restore step's key (`error`): the log's line; [`NO_KEY`] the detail.
pub fn no_key() -> Said {
    Said::Info("the restore step computed no key; nothing to save".to_owned())
}
pub const NO_KEY: &str = "no key from the restore step";

/// `clean-on-miss` could not finish in the restore step (`incomplete`).
pub fn stale() -> Said {
    Said::Warning("`clean-on-miss` could not remove stale files in the restore step; not saving them".to_owned())
}

pub fn replacing() -> Said {
    Said::Info("the restore step could not use this key's entry: saving a replacement".to_owned())
}

pub fn record_unused(why: &RecordError) -> Said {
    Said::Info(format!("{why}; not using it"))
}

/// `save-if` is false (`disabled`): the log's line; [`DISABLED`] the detail.
pub fn disabled(key: &Key) -> Said {
    Said::Info(format!("{DISABLED}: not saving `{key}`"))
}
pub const DISABLED: &str = "`save-if` is false";

pub fn disabled_layer() -> Said {
    Said::Info("`save-if` is false: what the job added is not saved as a layer".to_owned())
}

/// `verify-reuse` or `grow` (`what`) after a hit whose restore kept no manifest.
pub fn no_manifest_kept(what: &str) -> Said {
    Said::Info(format!("{what}: the restore step kept no manifest; nothing to compare with"))
}

/// `verify-reuse` or `grow` (`what`) could not compare the tree with the restored manifest.
pub fn not_compared(what: &str, e: &dyn std::error::Error) -> Said {
    Said::Warning(format!("{what}: {}", error_chain(e)))
}

/// After a hit, without `grow` (or with nothing to add): nothing is saved (`skipped-hit`, with
/// [`RESTORED`] the detail). `post`: the restore step found it, else an earlier command.
pub fn hit_not_saved(key: &Key, post: bool) -> Said {
    let found_by = if post { "was found by the restore step" } else { "was reused in this job" };
    Said::Info(format!("entry `{key}` {found_by}; not saving"))
}
pub const RESTORED: &str = "restored";

pub fn grow_removed(files: usize) -> Said {
    Said::Info(format!(
        "grow: {} removed since the restore; layers never delete (a content-addressed cache needs no deletions)",
        units::count_of(files, "file")
    ))
}

pub fn grow_changed(files: usize) -> Said {
    Said::Info(format!(
        "grow: {} changed since the restore, not kept: layers only add files (a content-addressed cache never \
         changes one)",
        units::count_of(files, "file")
    ))
}

pub fn grow_nothing() -> Said {
    Said::Info("grow: no file was added under `path` since the restore".to_owned())
}

pub fn grow_skipped(why: SkipWhy) -> Said {
    let why = match why {
        SkipWhy::LayerUnread => "a layer could not be read in the restore step (service trouble)",
    };
    Said::Info(format!("grow: not this run: {why}"))
}

pub fn grow_layer(files: usize, bytes: u64, slot: Slot) -> Said {
    Said::Info(format!(
        "grow: saving {} added since the restore ({}) as {slot}",
        units::count_of(files, "file"),
        units::bytes(bytes)
    ))
}

/// `grow`'s plan, once the save has numbered the new base.
pub fn compacting(slot: Slot, why: CompactWhy) -> Said {
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
    Said::Info(format!("grow: compacting the stack into {slot}: {why}"))
}

/// A replacement of what the restore could not use, once the save has numbered it.
pub fn saving_replacement(slot: Slot) -> Said {
    Said::Info(format!("saving {slot} as the replacement"))
}

pub fn out_of_reach(slot: Slot, next: Slot) -> Said {
    Said::Info(format!("{slot} exists where this run's lookup does not reach it; saving {next} instead"))
}

/// `exists`: a base of the key exists already.
pub fn base_exists(slot: Slot) -> String {
    format!("{slot} of this key exists already")
}

/// `exists`: another job wrote the replacement this save would write.
pub fn replaced_by_another(slot: Slot) -> String {
    format!("{slot} replaced the entry this job's restore could not use (saved by another job)")
}

/// A key whose generations are used up (`skipped-hit`, its text the detail).
pub fn generations_used_up() -> Said {
    Said::Warning(format!(
        "this key has used all {MAX_GENERATIONS} generations; what this job made is not kept until the fingerprint \
         changes"
    ))
}

/// `ACTIONS_CACHE_MODE` forbids writes (`read-only`, with [`READ_ONLY`] the detail).
pub fn cache_mode(mode: CacheMode) -> Said {
    Said::Info(format!("`ACTIONS_CACHE_MODE` is `{mode}`: this job may not write to the cache"))
}
pub const READ_ONLY: &str = "cache mode is read-only";

/// A `required` path is missing (`incomplete`, its text the detail).
pub fn required_missing(path: &Path) -> Said {
    Said::Warning(format!("required path `{}` does not exist; not saving an incomplete entry", path.display()))
}

/// Nothing to save (`incomplete`): no `path` entry at all (`none`), or empty directories only.
pub fn nothing_to_save(none: bool) -> &'static str {
    match none {
        true => "nothing to save: no `path` entry exists",
        false => "nothing to save: `path` holds only empty directories, no files",
    }
}

pub fn not_saving_empty(none: bool) -> Said {
    Said::Warning(format!(
        "{}; not saving an empty entry (if an empty result is right, put a marker file in `path`)",
        nothing_to_save(none)
    ))
}

pub fn special_files(skipped: &[PathBuf]) -> Said {
    let list: Vec<String> = skipped.iter().take(5).map(|p| format!("`{}`", p.display())).collect();
    Said::Warning(format!("skipped {} special files (sockets, FIFOs, devices): {}", skipped.len(), list.join(", ")))
}

/// `secret-found`: in the fingerprint, in a `path` line, in a file.
pub const SECRET_IN_FINGERPRINT: &str = "the fingerprint (a `hash-env` or preset variable) holds the value of a token \
                                         or of a `secret-env` variable (not shown); nothing was uploaded";
pub const SECRET_IN_PATH: &str =
    "a `path` line holds the value of a token or of a `secret-env` variable (not shown); nothing was uploaded";
pub fn secret_in_file(shown: &str) -> String {
    format!(
        "`{shown}` holds the value of a token or of a `secret-env` variable (not shown); the entry was not committed"
    )
}

pub fn lookup_failed(e: &dyn std::error::Error) -> Said {
    Said::Warning(format!("the newest base of this key could not be looked up: {}", error_chain(e)))
}

pub fn fast_compression(ratio: f64) -> Said {
    Said::Info(format!(
        "compression: zstd's fast level (the files compress poorly: a sample kept {:.0}% of its size)",
        ratio * 100.0
    ))
}

/// `saved generation 1 base: 2 files (15 B, 40 B compressed with zstd) in 3 ms` (the slot
/// named unless it is generation 0's base).
pub fn saved(slot: Option<Slot>, archived: &Transfer, compression: &str) -> Said {
    Said::Info(format!(
        "saved {}{} ({}, {} compressed with {}) in {}",
        slot.map(|slot| format!("{slot}: ")).unwrap_or_default(),
        units::count_of(archived.files, "file"),
        units::bytes(archived.content_bytes),
        units::bytes(archived.archive_bytes),
        compression,
        units::duration(archived.elapsed)
    ))
}

/// `exists`: another job committed the entry first, or is committing it.
pub const SAVED_FIRST: &str = "another job saved this entry first";
pub const CREATING: &str = "another job is creating this entry";

/// `exists`: the slot could not be reserved.
pub fn reserved_by_another(slot: Slot) -> String {
    match slot {
        Slot::FIRST_BASE => {
            "an entry with this key and version exists already (saved earlier, or being saved by another job)"
                .to_owned()
        }
        slot => format!("{slot} of this key exists already (saved by another job)"),
    }
}

/// The time to generate an entry just written, as the save measured it (or `generation-seconds`
/// gave it: `given`).
pub fn time_to_generate(generation: Option<&Generation>, given: bool) -> Said {
    Said::Info(match generation.and_then(Generation::plausible) {
        Some(d) if given => format!("time to generate: {} (`generation-seconds`)", units::duration(d)),
        Some(d) => format!(
            "time to generate: {} (from the end of this job's restore to the newest file under `path`)",
            units::duration(d)
        ),
        None if generation.is_some() => "time to generate: not recorded (not a time one job takes)".to_owned(),
        None => "time to generate: not recorded (no restore of this key earlier in the job, or nothing under \
                 `path` written after it; `generation-seconds` gives it)"
            .to_owned(),
    })
}

/// How a save ended, when the log says it at the end: an entry that exists, or trouble.
pub fn ended(outcome: &SaveOutcome) -> Option<Said> {
    let detail = outcome.detail.as_deref().unwrap_or("");
    match outcome.result {
        SaveResult::Exists => Some(Said::Info(format!("entry exists: {detail}"))),
        result if outcome.trouble => Some(Said::Warning(format!("not saved ({result}): {detail}"))),
        _ => None,
    }
}

/// The error of `strict` when a save met trouble.
pub fn strict(result: SaveResult, detail: Option<&str>) -> String {
    format!("{result}: {}", detail.unwrap_or(""))
}

/// What changed between the restore's fingerprint and the save's, in a save's refusal.
pub fn changed_since_restore(changes: &[String]) -> String {
    match changes {
        [] => "its fingerprint file could not be read to say what changed".to_owned(),
        _ => {
            let mut shown: Vec<&str> = changes.iter().take(super::NAMED).map(String::as_str).collect();
            let more = changes.len().saturating_sub(super::NAMED);
            let more = (more > 0).then(|| format!("and {more} more"));
            shown.extend(more.as_deref());
            format!("what changed: {}", shown.join("; "))
        }
    }
}

// What the generating run read.

/// The reads no input of the key covers, and the shared libraries it loaded that nothing says
/// how to build (the detail of [`SaveResult::UncoveredReads`]).
pub fn uncovered(uncovered: &Uncovered) -> String {
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

/// `uncovered-reads: warn` (`refused`: `fail`).
pub fn uncovered_said(read: &Uncovered, refused: bool) -> Said {
    match refused {
        true => Said::Error(format!("{}; nothing is saved (`uncovered-reads: fail`)", uncovered(read))),
        false => Said::Warning(uncovered(read)),
    }
}

pub fn reads_not_recorded() -> Said {
    Said::Info("uncovered-reads: this job's reads were not recorded (no restore step of the job arranged it)".into())
}

pub fn reads_unreadable(e: &dyn std::error::Error) -> Said {
    Said::Warning(format!("uncovered-reads: {}", error_chain(e)))
}

/// The most characters of a note a process wrote into the reads log, as a warning says it.
const NOTE_CHARS: usize = 300;
/// The most of those notes said, each once.
const NOTES: usize = 5;

/// The notes the reads log holds (what a hook said of itself, written by any Python process of
/// the job: outside text), each cut to one short line, at most [`NOTES`] of them.
pub fn reads_notes<'a>(notes: impl ExactSizeIterator<Item = &'a String>) -> Vec<Said> {
    let total = notes.len();
    let mut said: Vec<Said> =
        notes.take(NOTES).map(|n| Said::Warning(format!("uncovered-reads: {}", shorten(n, NOTE_CHARS)))).collect();
    if total > NOTES {
        let more = total - NOTES;
        let notes = if more == 1 { "note" } else { "notes" };
        said.push(Said::Warning(format!("uncovered-reads: and {more} more {notes}")));
    }
    said
}

/// Whose reads a save weighs: the generator's, or every process's when none was seen writing.
pub fn reads_weighed(generator: &Generator) -> Said {
    Said::Info(match *generator {
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
    })
}

pub fn reads_covered(read: usize) -> Said {
    Said::Info(format!(
        "uncovered-reads: the generator read {} under the workspace; an input covers each",
        units::count_of(read, "file")
    ))
}

pub fn reads_cut(processes: usize) -> Said {
    Said::Warning(format!(
        "uncovered-reads: the record of {} was cut at {} files: what {} read after is not seen",
        python_processes(processes),
        units::count(crate::reads::HOOK_CAP as u64),
        if processes == 1 { "it" } else { "they" },
    ))
}

pub fn reads_truncated() -> Said {
    Said::Warning(format!(
        "uncovered-reads: the reads log is longer than {}: only its beginning is weighed",
        units::bytes(crate::reads::LOG_CAP)
    ))
}

fn python_processes(n: usize) -> String {
    format!("{} Python process{}", units::count(n as u64), if n == 1 { "" } else { "es" })
}

/// `none`, or `⚠️ 2 files read that no input covers: `data/cases.txt`, …`.
fn uncovered_cell(md: &crate::runner::summary::Markdown, uncovered: &[String]) -> Inline {
    if uncovered.is_empty() {
        return Inline::ours("none: every file the job's Python read under the workspace is covered");
    }
    let mut named: Vec<String> =
        uncovered.iter().take(super::SUMMARY_ROWS).map(|f| md.code(&shorten(f, 200)).to_string()).collect();
    if uncovered.len() > super::SUMMARY_ROWS {
        named.push(format!("and {} more", uncovered.len() - super::SUMMARY_ROWS));
    }
    Inline::ours(format!(
        "⚠️ {} read that no input covers: {}",
        units::count_of(uncovered.len(), "file"),
        named.join(", ")
    ))
}

// After a hit: `verify-reuse`, and what a compile cache's hit saved.

/// `verify-reuse`'s verdict in the log: a line, or with changes to warn about a warning (an
/// error under `verify-reuse: fail`) naming the first of them.
pub fn verified(verified: &Verified, compile: Option<&CompileWorth>) -> Said {
    let verdict = format!("verify-reuse: {}", verdict(verified, compile));
    if verified.fine {
        return Said::Info(verdict);
    }
    let shown: Vec<&str> = verified.changed_files.iter().take(10).map(String::as_str).collect();
    let message = format!("{verdict}\n{}", shown.join("\n"));
    if verified.failed { Said::Error(message) } else { Said::Warning(message) }
}

/// What changed under `path` since the restore, and why files were added, then what the hit
/// was worth: torch's figure for a compile cache (`compile`), else the generating run's window.
fn verdict(v: &Verified, compile: Option<&CompileWorth>) -> String {
    let extras = match v.kept_extras {
        0 => String::new(),
        n => format!(" ({} not in the entry, there before the restore, kept)", units::count_of(n, "file")),
    };
    let mut verdict = if v.added + v.changed + v.removed == 0 {
        format!("nothing under `path` changed since the restore{extras}")
    } else {
        let why = match (v.added == 0, v.torch, v.additions_kept, v.growing) {
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
        format!(
            "{} added, {} changed, {} removed under `path` since the restore{extras}{why}",
            v.added, v.changed, v.removed
        )
    };
    match (compile, v.hit) {
        (Some(compile), _) => verdict.push_str(&format!("; {}", compile_sentence(compile))),
        (None, Some(hit)) => verdict.push_str(&beside_verdict(hit)),
        (None, None) => {}
    }
    verdict
}

/// `; this hit saves up to 19.5 s if the job skips its generator (…)`, or that the figure is
/// not recorded.
fn beside_verdict(hit: HitRecord) -> String {
    let generation = hit.generation_ms.filter(|ms| (0..=Generation::MAX_MILLIS).contains(ms));
    let restore = Duration::from_millis(hit.restore_ms.max(0) as u64);
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

pub fn time_saved(compile: &CompileWorth) -> Said {
    Said::Info(format!("time saved: {}", compile_sentence(compile)))
}

/// What a hit of a compile cache saved: `torch took 2 graphs from its FX graph cache and
/// compiled 0 in 2 Python processes; the restored entry spared 27.6 s of compiling: …`.
fn compile_sentence(worth: &CompileWorth) -> String {
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
        python_processes(saving.processes),
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

pub fn summary(shown: &Shown, outcome: &SaveOutcome) -> String {
    let mut md = shown.summary("save");
    let mut rows = Vec::new();
    let mut row = |label: &str, cell: Inline| rows.push(vec![Inline::ours(label), cell]);
    if let Some(key) = &outcome.key {
        row("key", md.code(key));
    }
    row("result", md.code(outcome.result.name()));
    if let Some(d) = &outcome.detail {
        row("detail", md.prose(d));
    }
    if let Some(archived) = outcome.archived.filter(|a| a.files > 0) {
        row(&saved_label(outcome.slot), super::transfer(&archived));
        if outcome.is_saved() {
            row("time to generate", Inline::ours(time_to_generate_cell(outcome.generation)));
        }
    }
    if let Some(uncovered) = &outcome.uncovered {
        row("uncovered reads", uncovered_cell(&md, &uncovered.files));
    }
    if let Some(compile) = &outcome.compile {
        row("time saved", md.prose(&compile_sentence(compile)));
    }
    md.table(&["", ""], rows);
    if let Some(verified) = &outcome.verified {
        let verdict = verdict(verified, outcome.compile.as_ref());
        md.paragraph(&Inline::ours(format!("**verify-reuse**: {}", md.prose(&verdict))));
        let files = &verified.changed_files;
        let mut list = md.nested();
        let lines: Vec<Vec<Inline>> = files.iter().take(super::SUMMARY_ROWS).map(|l| vec![md.code(l)]).collect();
        list.table(&["file"], lines);
        if !files.is_empty() {
            md.details(&units::count_of(files.len(), "file"), &list);
        }
    }
    if let Some(pruned) = &outcome.pruned {
        let line = super::prune::after_save_cell(pruned);
        md.paragraph(&Inline::ours(format!("**prune**: {}", md.prose(&line))));
    }
    md.as_str().to_owned()
}

/// What was written: `saved`, `saved as layer 1`.
fn saved_label(slot: Option<Slot>) -> String {
    slot.map_or_else(|| "saved".to_owned(), |slot| format!("saved as {slot}"))
}

fn time_to_generate_cell(generation: Option<Duration>) -> String {
    generation.map_or_else(|| "not recorded".to_owned(), units::duration)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{said, transfer};
    use super::*;
    use crate::choice::Named;
    use crate::runner::Redactor;
    use crate::runner::summary::Markdown;
    use std::fmt::Write;

    /// Every save result and what leads to it, as the log and the summary say it.
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
        writeln!(out, "{}\n{}", said(&uncovered_said(&one, false)), said(&uncovered_said(&both, true))).unwrap();
        writeln!(out, "{}", said(&uncovered_said(&built, false))).unwrap();
        let generators = [
            Generator::Wrote { processes: 3, of: 7 },
            Generator::NotSeen { processes: 1 },
            Generator::NotSeen { processes: 0 },
        ];
        for generator in generators {
            writeln!(out, "{}", said(&reads_weighed(&generator))).unwrap();
        }
        writeln!(out, "{}", said(&reads_covered(12))).unwrap();
        for line in [reads_cut(1), reads_cut(2), reads_truncated()] {
            writeln!(out, "{}", said(&line)).unwrap();
        }
        let notes: Vec<String> = (1..=7)
            .map(|i| format!("note {i} {}\n::error::x", if i == 1 { "long ".repeat(100) } else { String::new() }))
            .collect();
        for note in reads_notes(notes.iter()) {
            writeln!(out, "{}", said(&note)).unwrap();
        }
        let changed = Verified { changed: 1, removed: 2, ..Verified::default() };
        let added = |torch, growing, additions_kept| Verified {
            added: 7,
            kept_extras: 2,
            torch,
            growing,
            additions_kept,
            ..Verified::default()
        };
        let torch = |growing, additions_kept| added(true, growing, additions_kept);
        let all = [Verified::default(), changed, added(false, true, true), torch(true, true), torch(true, false)];
        for v in all.into_iter().chain([torch(false, false)]) {
            writeln!(out, "verify-reuse: {}", verdict(&v, None)).unwrap();
        }
        writeln!(
            out,
            "strict: {}",
            super::super::restore::strict(crate::outcome::MissReason::ServiceError, Some("HTTP 503"))
        )
        .unwrap();
        writeln!(out, "strict: {}", strict(SaveResult::Error, None)).unwrap();
        for result in SaveResult::ALL {
            for trouble in [false, true] {
                let outcome = SaveOutcome { trouble, ..SaveOutcome::skipped(None, *result, "the detail") };
                let line = ended(&outcome).map_or_else(|| "(nothing)".to_owned(), |s| said(&s));
                writeln!(out, "{result} (trouble: {trouble}): {line}").unwrap();
            }
            writeln!(out, "summary: {}", md.code(result.name())).unwrap();
        }
        writeln!(out, "{}", said(&saved(None, &transfer(2), "zstd"))).unwrap();
        writeln!(out, "{}", said(&saved(Some(Slot::new(0, 1)), &transfer(2), "gzip"))).unwrap();
        writeln!(out, "summary: {} | {}", saved_label(None), saved_label(Some(Slot::new(0, 1)))).unwrap();
        let generation = |millis| Generation { millis, recorded: 0, r#ref: None, given: false };
        writeln!(out, "{}", said(&time_to_generate(Some(&generation(20_700)), true))).unwrap();
        writeln!(out, "{}", said(&time_to_generate(Some(&generation(20_700)), false))).unwrap();
        writeln!(out, "{}", said(&time_to_generate(Some(&generation(-1)), false))).unwrap();
        writeln!(out, "{}", said(&time_to_generate(None, false))).unwrap();
        let cells = [Some(Duration::from_millis(20_700)), None].map(time_to_generate_cell);
        writeln!(out, "summary: {}", cells.join(" | ")).unwrap();
        writeln!(out, "{}\n{}", said(&disabled(&"p-abc".into())), said(&disabled_layer())).unwrap();
        writeln!(out, "{}\ndetail: {NO_KEY}\n{}\n{}", said(&no_key()), said(&stale()), said(&replacing())).unwrap();
        writeln!(out, "{}\ndetail: {RESTORED}", said(&no_manifest_kept("verify-reuse"))).unwrap();
        writeln!(out, "detail: {}", base_exists(Slot::base(1))).unwrap();
        writeln!(out, "detail: {}", replaced_by_another(Slot::base(2))).unwrap();
        writeln!(out, "{}", said(&generations_used_up())).unwrap();
        writeln!(out, "{}\ndetail: {READ_ONLY}", said(&cache_mode(CacheMode::Read))).unwrap();
        writeln!(out, "detail: {}", super::super::restore::cache_mode_no_reads(CacheMode::WriteOnly)).unwrap();
        writeln!(out, "{}", said(&super::super::unknown_cache_mode("readonly\n::error::x"))).unwrap();
        writeln!(out, "{}", said(&required_missing(Path::new("out/model.pth")))).unwrap();
        for none in [true, false] {
            writeln!(out, "{}\ndetail: {}", said(&not_saving_empty(none)), nothing_to_save(none)).unwrap();
        }
        writeln!(out, "detail: {SECRET_IN_FINGERPRINT}\ndetail: {SECRET_IN_PATH}").unwrap();
        writeln!(out, "detail: {}", secret_in_file("out/.env")).unwrap();
        writeln!(out, "detail: {SAVED_FIRST}\ndetail: {CREATING}").unwrap();
        writeln!(out, "detail: {}", reserved_by_another(Slot::FIRST_BASE)).unwrap();
        writeln!(out, "detail: {}", reserved_by_another(Slot::base(3))).unwrap();
        writeln!(out, "{}", said(&hit_not_saved(&"p-abc".into(), true))).unwrap();
        writeln!(out, "{}\n{}\n{}", said(&grow_removed(1)), said(&grow_changed(2)), said(&grow_nothing())).unwrap();
        writeln!(out, "{}", said(&grow_skipped(SkipWhy::LayerUnread))).unwrap();
        writeln!(out, "{}", said(&grow_layer(1, 7, Slot::new(0, 1)))).unwrap();
        for why in [
            CompactWhy::Stopped,
            CompactWhy::Full { layers: 4 },
            CompactWhy::Unprobed { probed: 1 },
            CompactWhy::Heavy { layer_bytes: 501, base_bytes: 1000, max_share: 0.5 },
        ] {
            writeln!(out, "{}", said(&compacting(Slot::base(1), why))).unwrap();
        }
        writeln!(out, "{}", said(&saving_replacement(Slot::base(1)))).unwrap();
        writeln!(out, "{}", said(&out_of_reach(Slot::base(2), Slot::base(3)))).unwrap();
        insta::assert_snapshot!(out);
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
    fn verify_reuse_says_what_the_hit_was_worth() {
        let hit = |generation_ms| Some(HitRecord { generation_ms, restore_ms: 1_200 });
        let nothing = Verified { hit: hit(Some(20_700)), ..Verified::default() };
        assert_eq!(
            verdict(&nothing, None),
            "nothing under `path` changed since the restore; this hit saves up to 19.5 s if the job skips its \
             generator (the generating run took 20.7 s, the restore 1.2 s)"
        );
        let forged = Verified { hit: hit(Some(-1)), ..Verified::default() };
        assert!(
            verdict(&forged, None).ends_with("; what the generating run took is not recorded (the restore took 1.2 s)")
        );
        let compile = CompileWorth::NotRecorded;
        assert!(verdict(&nothing, Some(&compile)).contains("restore; what this hit saved is not measured: "));
    }
}
