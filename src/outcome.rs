//! The vocabulary of what a step tells the runner, and the typed outcome of each command.
//!
//! Commands compute an outcome value and one publisher (`commands::publish`) turns it into step
//! outputs, state, exported variables and the summary; `commands::render` words it. Output and
//! state names are enums so the compiler checks every name a command writes. Plain data: no
//! sentences here.

use crate::fingerprint::FingerprintRecord;
use crate::keys::{Key, Version};
use crate::stack::Slot;
use std::path::PathBuf;
use std::time::Duration;

crate::choice::named_enum! {
    /// A step output, documented in `config::OUTPUTS`; those of `explain`, `list` and `prune`
    /// exist only on the command line.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Output {
        CacheHit => "cache-hit",
        Reused => "reused",
        EntryExists => "entry-exists",
        Key => "key",
        FingerprintFile => "fingerprint-file",
        MissReason => "miss-reason",
        RestoredFiles => "restored-files",
        RestoredBytes => "restored-bytes",
        ExtraFiles => "extra-files",
        Layers => "layers",
        CleanedFiles => "cleaned-files",
        Saved => "saved",
        SaveResult => "save-result",
        ChangedFiles => "changed-files",
        UncoveredFiles => "uncovered-files",
        /// On a reuse: what the entry and its layers took to generate, in seconds.
        GenerationSeconds => "generation-seconds",
        /// On a reuse: the generation time minus this restore's own time, in seconds.
        TimeSaved => "time-saved",
        /// `explain`: the key compared with.
        Against => "against",
        /// `explain`: what differs, one per line.
        Changes => "changes",
        /// `list`: the keys, one per line.
        Keys => "keys",
        /// `prune`: the entries deleted, one per line: the key, followed by its slot in
        /// parentheses unless it is a generation-0 base.
        Deleted => "deleted",
        /// `prune --dry-run`: the entries that would be deleted, as [`Output::Deleted`] names them.
        WouldDelete => "would-delete",
    }
}

crate::choice::named_enum! {
    /// What the main step leaves for its post step (`$GITHUB_STATE`, read back as `STATE_<name>`).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum State {
        /// The key the restore step computed.
        Key => "key",
        /// Its fingerprint file, which the post step saves under the key.
        FingerprintFile => "fingerprint-file",
        /// The manifest of the reused entry, for `verify-reuse`.
        ManifestFile => "manifest-file",
        /// `true` when the entry was reused or exists, `stale` when `clean-on-miss` could not
        /// finish: the post step does not save.
        SkipSave => "skip-save",
    }
}

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum MissReason {
        None => "none",
        NotFound => "not-found",
        PrefixOnly => "prefix-only",
        ManifestMismatch => "manifest-mismatch",
        Corrupt => "corrupt",
        Incomplete => "incomplete",
        Timeout => "timeout",
        ServiceError => "service-error",
        LookupOnly => "lookup-only",
        /// The entry was fine but could not be written here (disk full, permissions).
        IoError => "io-error",
        /// `ACTIONS_CACHE_MODE` (`none`, `write-only`) does not let this job read the cache:
        /// nothing was looked up.
        CacheMode => "cache-mode",
        /// The service refused this job the read (`cache read denied:`).
        ReadDenied => "read-denied",
        /// The entry's manifest was found but content it references is not in the store
        /// (evicted, deleted) or is corrupt: nothing was restored; its replacement heals it.
        ContentMissing => "content-missing",
    }
}

impl MissReason {
    /// Cache trouble (a warning, a failure under `strict`), not plain absence.
    pub fn is_trouble(self) -> bool {
        !matches!(self, MissReason::NotFound | MissReason::PrefixOnly | MissReason::LookupOnly | MissReason::CacheMode)
    }

    /// Whether the entry was found and downloaded, and only its verification or placement
    /// failed: `entry-exists` is then `true` while `cache-hit` and `reused` are `false`.
    pub fn entry_was_downloaded(self) -> bool {
        matches!(
            self,
            MissReason::Corrupt
                | MissReason::ManifestMismatch
                | MissReason::Incomplete
                | MissReason::IoError
                | MissReason::ContentMissing
        )
    }

    /// Whether the entry itself cannot be used (what it holds, not the service or this disk):
    /// the save of the job that regenerated writes its replacement.
    pub fn calls_for_replacement(self) -> bool {
        matches!(
            self,
            MissReason::Corrupt | MissReason::ManifestMismatch | MissReason::Incomplete | MissReason::ContentMissing
        )
    }
}

crate::choice::named_enum! {
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum SaveResult {
        Saved => "saved",
        Exists => "exists",
        SkippedHit => "skipped-hit",
        /// `grow`: what the job added was saved as a layer of the restored stack.
        Layer => "layer",
        ReadOnly => "read-only",
        RateLimited => "rate-limited",
        Incomplete => "incomplete",
        /// The files held a token or a `secret-env` value.
        SecretFound => "secret-found",
        /// `save-if` was false: nothing was written.
        Disabled => "disabled",
        /// `uncovered-reads: fail` and the generating run read files no input covers.
        UncoveredReads => "uncovered-reads",
        Error => "error",
    }
}

/// What `exact-cache fingerprint` computed.
#[derive(Debug)]
pub struct FingerprintOutcome {
    pub record: FingerprintRecord,
    pub file: PathBuf,
    /// What collecting it had to say (imports not followed, editable installs left out).
    pub notes: Vec<crate::fingerprint::Note>,
}

/// How a restore ended, with everything the step reports.
#[derive(Debug)]
pub struct RestoreOutcome {
    pub record: FingerprintRecord,
    /// As [`FingerprintOutcome::notes`].
    pub notes: Vec<crate::fingerprint::Note>,
    pub fingerprint_file: PathBuf,
    /// The backend, as the log and summary name it.
    pub backend: String,
    pub attempt: Attempt,
    /// `clean-on-miss` ran and removed this much.
    pub cleaned: Option<Cleaned>,
    /// `clean-on-miss` could not finish under `strict`: what is under `path` is stale, and no
    /// later step may save it under this key.
    pub clean_failed: bool,
    /// The base the save of this job writes to replace the entry found and not usable.
    pub replacement: Option<Slot>,
    /// `explain-misses` found the entry this one was compared with.
    pub explanation: Option<Explanation>,
    /// `explain-misses` ran on this miss but explains nothing: why (skipped, or nothing to
    /// compare with).
    pub unexplained: Option<String>,
    /// Variables for later steps: a preset's directories, `reuse-env`, the save-on-failure list.
    pub exports: Vec<(String, String)>,
    /// On a reuse: what it was worth.
    pub worth: Option<Worth>,
}

/// What a hit was worth: what the entry (its base and layers) took to generate, as their saves
/// recorded it, against what this restore took.
#[derive(Clone, Debug, PartialEq)]
pub struct Worth {
    /// `None`: not recorded (saved before exact-cache recorded it, or a value no job could take).
    pub generation: Option<Duration>,
    /// When the base's figure was recorded (seconds since the epoch) and on which ref.
    pub recorded: Option<(i64, Option<String>)>,
    /// This restore, from its start to the files in place.
    pub restore: Duration,
    /// A compile cache: the job runs its torch code either way, so what the hit saved is torch's
    /// own figure, read at the save ([`CompileWorth`]).
    pub compile_cache: bool,
}

impl Worth {
    /// What a job that skips its generator saves at most: the generation time minus this
    /// restore's, never below zero; `None` when not recorded, and for a compile cache.
    pub fn up_to(&self) -> Option<Duration> {
        self.generation.filter(|_| !self.compile_cache).map(|g| g.saturating_sub(self.restore))
    }
}

/// What a hit of a compile cache saved, as the save reads it from the job's Python processes.
#[derive(Clone, Debug, PartialEq)]
pub enum CompileWorth {
    /// What torch's caches reported, and what the restored files spared.
    Reported(crate::reads::torch::CompileSaving),
    /// Nothing was recorded: the restore armed no hook (`uncovered-reads: off`, or outside
    /// Actions).
    NotRecorded,
    /// The log could not be read: why.
    Unreadable(String),
}

impl CompileWorth {
    /// The compile time the restored entry spared, when measured (`time-saved` at the save).
    pub fn saved(&self) -> Option<Duration> {
        match self {
            CompileWorth::Reported(saving) if saving.processes > 0 => saving.saved,
            _ => None,
        }
    }
}

/// How the attempt to reuse an entry ended.
#[derive(Debug)]
pub enum Attempt {
    Reused {
        /// Everything put in place: the base and every layer.
        restored: Transfer,
        stack: StackApplied,
        /// Files that were under `path` before the restore and are not in the entry: kept, in
        /// the order `path` lists them.
        extra_files: Vec<String>,
        /// Where the entry's manifest was kept for `verify-reuse` (when it could be).
        manifest_file: Option<PathBuf>,
    },
    /// `lookup-only` found the entry.
    Found,
    Miss {
        reason: MissReason,
        detail: Option<String>,
    },
}

impl Attempt {
    pub fn reused(&self) -> bool {
        matches!(self, Attempt::Reused { .. })
    }

    /// `cache-hit`: the files are in place (or, with `lookup-only`, an entry exists), so a step
    /// guarded by `cache-hit != 'true'` regenerates whenever they are not.
    pub fn hit(&self) -> bool {
        matches!(self, Attempt::Reused { .. } | Attempt::Found)
    }

    /// `entry-exists`: an entry with exactly this key exists, also one that was downloaded and
    /// could not be used.
    pub fn entry_exists(&self) -> bool {
        match self {
            Attempt::Reused { .. } | Attempt::Found => true,
            Attempt::Miss { reason, .. } => reason.entry_was_downloaded(),
        }
    }

    pub fn miss_reason(&self) -> MissReason {
        match self {
            Attempt::Reused { .. } => MissReason::None,
            Attempt::Found => MissReason::LookupOnly,
            Attempt::Miss { reason, .. } => *reason,
        }
    }

    /// Misses that are cache trouble (warnings, failures under `strict`), not plain absence.
    pub fn is_trouble(&self) -> bool {
        matches!(self, Attempt::Miss { reason, .. } if reason.is_trouble())
    }
}

/// What a restore put in place, or a save archived.
#[derive(Clone, Copy, Debug)]
pub struct Transfer {
    /// Files and symlinks.
    pub files: usize,
    /// Bytes of file content.
    pub content_bytes: u64,
    /// Bytes of the compressed archive, as downloaded or uploaded.
    pub archive_bytes: u64,
    pub elapsed: Duration,
}

/// The slots of a key's stack a restore put in place: a base, then its layers in order
/// (`grow`; without it, the base alone).
#[derive(Clone, Debug)]
pub struct StackApplied {
    pub generation: u32,
    pub base: Transfer,
    pub layers: Vec<Transfer>,
    /// Why the stack stopped before a layer that exists (corrupt, missing, foreign): the next
    /// growing save compacts.
    pub stopped: Option<StackStop>,
}

/// Why a restore's stack stopped before a layer that exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StackStop {
    /// Layer `layer` was found and not applied: why (`corrupt`, `foreign`, …), and the cause.
    NotApplied { layer: u32, reason: MissReason, detail: String },
    /// Layer `missing` is missing, though layer `later` exists.
    Missing { missing: u32, later: u32 },
    /// The lookup of layer `layer` failed: the service's answer, in words.
    Trouble { layer: u32, cause: String },
}

impl StackApplied {
    /// The base and every layer, summed.
    pub fn total(&self) -> Transfer {
        self.layers.iter().fold(self.base, |sum, l| Transfer {
            files: sum.files + l.files,
            content_bytes: sum.content_bytes + l.content_bytes,
            archive_bytes: sum.archive_bytes + l.archive_bytes,
            elapsed: sum.elapsed + l.elapsed,
        })
    }
}

/// What `clean-on-miss` removed.
#[derive(Clone, Debug, Default)]
pub struct Cleaned {
    pub files: usize,
    pub dirs: usize,
    /// Each file or link removed, as the log shows paths (workspace-relative, `~/…`).
    pub names: Vec<String>,
    /// Files left in place because the repository tracks them.
    pub kept_tracked: usize,
}

/// Why a miss is a miss: the entry compared with, and each difference as one line.
#[derive(Debug)]
pub struct Explanation {
    pub against_key: Key,
    /// The ref that saved it (`None`: not known).
    pub against_ref: Option<String>,
    pub changes: Vec<String>,
    /// `against_key` is this very key (`changes` is the one line saying so).
    pub same_key: Option<SameKey>,
}

/// An entry with exactly this key but another version: the same fingerprint, saved for other
/// `path` lines or another compression (the version hashes both).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SameKey {
    /// The compression it was saved with, when its version is our `path` lines with another
    /// compression; `None` when its `path` lines differ (or the archive format does).
    pub compression: Option<String>,
    /// Its slot when it is part of this very stack: a layer whose base is gone, or a later
    /// generation's base that this run's lookup did not find.
    pub slot: Option<Slot>,
}

/// How a save ended, with everything the step reports.
#[derive(Debug)]
pub struct SaveOutcome {
    /// `None` when the restore step computed no key.
    pub key: Option<Key>,
    pub result: SaveResult,
    pub detail: Option<String>,
    /// Cache trouble: a warning, or a failure under `strict`.
    pub trouble: bool,
    /// What went into the entry, when one was written.
    pub archived: Option<Transfer>,
    /// `verify-reuse` compared the tree with the restored manifest.
    pub verified: Option<Verified>,
    pub pruned: Option<Pruned>,
    /// The slot written, when `grow` wrote a layer or a base above generation 0.
    pub slot: Option<Slot>,
    /// After a miss, with `uncovered-reads`: the files the job's Python read that no input
    /// covers (`None`: nothing was recorded).
    pub uncovered: Option<Box<Uncovered>>,
    /// The generation time recorded in what was written (when it can be one job's).
    pub generation: Option<Duration>,
    /// After a hit of a compile cache: what it saved, as torch reported it.
    pub compile: Option<CompileWorth>,
}

/// The files the generating run's Python read that no input covers, as the log shows paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Uncovered {
    /// Every one (the `uncovered-files` output).
    pub files: Vec<String>,
    /// Those of `files` it loaded as shared libraries: built, so their sources are what to list.
    pub libraries: Vec<String>,
}

impl SaveOutcome {
    /// Not saved, for a reason that is no trouble.
    pub fn skipped(key: Option<&Key>, result: SaveResult, detail: &str) -> Self {
        Self {
            key: key.cloned(),
            result,
            detail: Some(detail.to_owned()),
            trouble: false,
            archived: None,
            verified: None,
            pruned: None,
            slot: None,
            uncovered: None,
            generation: None,
            compile: None,
        }
    }

    /// Not saved, for a reason the user is warned about (an error with `strict`).
    pub fn trouble(key: Option<&Key>, result: SaveResult, detail: &str) -> Self {
        Self { trouble: true, ..Self::skipped(key, result, detail) }
    }

    /// Saved: `archived` went into the entry.
    pub fn saved(key: Option<&Key>, archived: Transfer) -> Self {
        Self { detail: None, archived: Some(archived), ..Self::skipped(key, SaveResult::Saved, "") }
    }

    /// Saved as a layer of the stack restored in this job.
    pub fn layer(key: Option<&Key>, archived: Transfer, slot: Slot) -> Self {
        Self { slot: Some(slot), ..Self { result: SaveResult::Layer, ..Self::saved(key, archived) } }
    }

    /// An entry (a base or a layer) was written.
    pub fn is_saved(&self) -> bool {
        matches!(self.result, SaveResult::Saved | SaveResult::Layer)
    }
}

/// `verify-reuse`'s verdict: what changed under `path` since the restore.
#[derive(Debug, Default)]
pub struct Verified {
    pub added: usize,
    pub changed: usize,
    pub removed: usize,
    /// Files there before the restore and not in the entry: kept, not changes.
    pub kept_extras: usize,
    /// Why files were added: torch compiled graphs the cache did not hold (a compile cache);
    /// `grow` is on, and kept them.
    pub torch: bool,
    pub growing: bool,
    pub additions_kept: bool,
    /// What the hit was worth, as the restore measured it.
    pub hit: Option<HitRecord>,
    /// Every path added, changed or removed (the `changed-files` output).
    pub changed_files: Vec<String>,
    /// Nothing to warn about: nothing changed, or `grow` kept every addition.
    pub fine: bool,
    /// `verify-reuse: fail` and something changed.
    pub failed: bool,
}

/// What a reuse was worth, as the restore measured it: what its stack took to generate (`None`:
/// not recorded) and what the restore took.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HitRecord {
    pub generation_ms: Option<i64>,
    pub restore_ms: i64,
}

/// What `prune` did after a save.
#[derive(Debug)]
pub enum Pruned {
    /// The default prefix is never pruned by count.
    Refused,
    /// No catalog to prune with: why.
    NoCatalog(String),
    /// The listing failed: why.
    Failed(String),
    Done {
        prefix: String,
        on_ref: Option<String>,
        kept_keys: usize,
        deleted: Vec<(Key, Slot)>,
        /// Entries that could not be deleted, and why.
        failed: Vec<(Key, String)>,
    },
}

/// What `exact-cache explain`, `list` and `prune` found.
#[derive(Debug)]
pub enum CatalogOutcome {
    Explain {
        key: Key,
        explanation: Option<Explanation>,
    },
    List {
        entries: Vec<ListedEntry>,
        json: bool,
    },
    /// `deleted`: what was deleted (each entry's key and slot), or with `dry_run` what would be.
    Prune {
        deleted: Vec<(Key, Slot)>,
        dry_run: bool,
    },
}

/// One entry as `list` shows it.
#[derive(Debug, serde::Serialize)]
pub struct ListedEntry {
    pub key: Key,
    pub size: u64,
    /// ISO 8601, UTC.
    pub created: String,
    /// When a restore last used it (ISO 8601, UTC), where the store records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_used: Option<String>,
    /// The ref that saved it (empty: outside Actions; `None`: not known).
    pub r#ref: Option<String>,
    pub version: Version,
    /// Its place in the key's stack, when its version is a slot of this `path` and
    /// `compression`; `None` otherwise. Its name (`base`, `layer 2`, `generation 1 base`, …) in
    /// JSON.
    #[serde(serialize_with = "slot_name")]
    pub slot: Option<Slot>,
    /// What it took to generate, in seconds, as its save recorded it: absent when not recorded
    /// or not read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation_seconds: Option<f64>,
    /// Whether `list` read its generation time (it reads the newest entries' only).
    #[serde(skip)]
    pub generation_read: bool,
    /// Its files' content in packs (docs/content.md): `None` where its files are members of
    /// its archive or its references were not read.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub packs: Option<PackShare>,
}

/// The bytes of the packs an entry references, by whole packs as prune frees them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PackShare {
    /// Of the packs no other entry references: what deleting it frees.
    pub own_bytes: u64,
    /// Of the packs other entries reference too.
    pub shared_bytes: u64,
}

fn slot_name<S: serde::Serializer>(slot: &Option<Slot>, serializer: S) -> Result<S::Ok, S::Error> {
    match slot {
        Some(slot) => serializer.collect_str(slot),
        None => serializer.serialize_none(),
    }
}

/// The outcome of any command, as the publisher takes it.
#[derive(Debug)]
pub enum Outcome {
    Fingerprint(FingerprintOutcome),
    Restore(Box<RestoreOutcome>),
    Save(Box<SaveOutcome>),
    Catalog(CatalogOutcome),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_json_names_a_slot_as_before_and_null_without_one() {
        let entry = |slot| ListedEntry {
            key: "k".into(),
            size: 1,
            created: "2026-01-01T00:00:00Z".into(),
            last_used: None,
            r#ref: None,
            version: "v".into(),
            slot,
            generation_seconds: None,
            generation_read: true,
            packs: None,
        };
        let json = |slot| serde_json::to_string(&entry(slot)).unwrap();
        assert_eq!(
            json(Some(Slot::new(1, 2))),
            r#"{"key":"k","size":1,"created":"2026-01-01T00:00:00Z","ref":null,"version":"v","slot":"generation 1 layer 2"}"#
        );
        assert!(json(None).ends_with(r#""slot":null}"#));
        let shared = ListedEntry { packs: Some(PackShare { own_bytes: 10, shared_bytes: 20 }), ..entry(None) };
        let shared = serde_json::to_string(&shared).unwrap();
        assert!(shared.ends_with(r#""slot":null,"own_bytes":10,"shared_bytes":20}"#), "{shared}");
    }
}
