//! Every step output: its documentation and which entry points set it (`action.yml` and
//! docs/inputs.md are made from [`OUTPUTS`]).

use crate::inputs::EntryPoint;
use crate::outcome::Output;

#[derive(Clone, Copy, Debug)]
pub struct OutputSpec {
    pub output: Output,
    pub entries: &'static [EntryPoint],
    pub description: &'static str,
}

impl OutputSpec {
    pub const fn name(&self) -> &'static str {
        self.output.name()
    }
}

const RESTORING: &[EntryPoint] = &[EntryPoint::Root, EntryPoint::Restore];

pub const OUTPUTS: &[OutputSpec] = &[
    OutputSpec {
        output: Output::CacheHit,
        entries: RESTORING,
        description: "`true` when the files are in place: the entry was restored, its manifest verified (the same \
             as `reused`); with `lookup-only`, when an entry with exactly this key exists. A step guarded by \
             `if: steps.<id>.outputs.cache-hit != 'true'` regenerates whenever the files are not in place.",
    },
    OutputSpec {
        output: Output::Reused,
        entries: RESTORING,
        description: "`true` when the entry was restored, its manifest verified, and every file is in place.",
    },
    OutputSpec {
        output: Output::EntryExists,
        entries: RESTORING,
        description: "`true` when an entry with exactly this key exists, also one that was found and could not be \
             used (`miss-reason` says why; the save after the regeneration writes its replacement).",
    },
    OutputSpec {
        output: Output::Key,
        entries: &[EntryPoint::Root, EntryPoint::Restore, EntryPoint::Save, EntryPoint::Fingerprint],
        description: "The full key, `<prefix>-<64 lowercase hex>`.",
    },
    OutputSpec {
        output: Output::FingerprintFile,
        entries: &[EntryPoint::Root, EntryPoint::Restore, EntryPoint::Fingerprint],
        description: "Path of a JSON file with every fingerprint component and its value.",
    },
    OutputSpec {
        output: Output::MissReason,
        entries: RESTORING,
        description: "`none`, `not-found`, `prefix-only`, `manifest-mismatch`, `corrupt`, `incomplete`, `timeout`, \
             `service-error`, `lookup-only`, `io-error` (the entry was fine but could not be written here: disk \
             full, permissions), `cache-mode` (the runner's `ACTIONS_CACHE_MODE` is `none` or `write-only`: this \
             job may not read the cache, and nothing was looked up), `read-denied` (the cache service refused this \
             job the read: `cache read denied`; a warning), `content-missing` (the entry's manifest was found but \
             content it references is evicted, deleted or corrupt: nothing was restored, and the save after the \
             regeneration replaces it), or `unsupported-platform` (the runner has no exact-cache binary: the \
             action warns and goes on).",
    },
    OutputSpec {
        output: Output::RestoredFiles,
        entries: RESTORING,
        description: "Number of files and symlinks put in place.",
    },
    OutputSpec {
        output: Output::RestoredBytes,
        entries: RESTORING,
        description: "Bytes of file content put in place.",
    },
    OutputSpec {
        output: Output::ExtraFiles,
        entries: RESTORING,
        description: "On a reuse: number of files that were already under `path`, are not in the entry, and were \
                      kept (the log and the summary name the first few); `0` otherwise.",
    },
    OutputSpec {
        output: Output::Layers,
        entries: RESTORING,
        description: "With `grow`: how many layers were applied on top of the base (the log and the summary show \
                      each with its size); `0` otherwise.",
    },
    OutputSpec {
        output: Output::CleanedFiles,
        entries: RESTORING,
        description: "With `clean-on-miss`, on a miss: number of stale files and links removed under `path` (the log \
                      names the first few, the summary all of them); `0` otherwise.",
    },
    OutputSpec {
        output: Output::GenerationSeconds,
        entries: RESTORING,
        description: "On a reuse: how long the generating run of the entry and its layers took, in seconds, as \
                      their saves recorded it (the `generation-seconds` input, or measured); empty on a miss and \
                      for entries whose figure is not recorded.",
    },
    OutputSpec {
        output: Output::TimeSaved,
        entries: &[EntryPoint::Root, EntryPoint::Restore, EntryPoint::Save],
        description: "On a reuse, in seconds. Restore: what a job that skips its generator saves at most, \
                      `generation-seconds` minus this restore's own time, never below 0; empty when \
                      `generation-seconds` is, and for a compile cache (`preset: torch-inductor`, or `path` \
                      holding TorchInductor's `fxgraph/` or `aotautograd/`), whose job runs its torch code either \
                      way. Save (and the post step), after a hit of a compile cache: the compile time torch reports \
                      its caches spared in the job's Python processes, for the graphs taken from the restored \
                      entry, each counted once; `0.0` when none came from it; empty when not measured and \
                      otherwise.",
    },
    OutputSpec {
        output: Output::Saved,
        entries: &[EntryPoint::Save],
        description: "`true` when this step created an entry (a base, or with `grow` a layer).",
    },
    OutputSpec {
        output: Output::SaveResult,
        entries: &[EntryPoint::Save],
        description: "`saved`, `layer` (`grow` saved what the job added as a layer of the restored stack), \
                      `exists`, `skipped-hit`, `disabled` (`save-if` is false), `read-only` (this job may not write: \
                      the runner's `ACTIONS_CACHE_MODE` is `read` or `none`; or, with a warning, the cache service \
                      refused the write: a read-only token, a cache over its storage quota), `rate-limited`, \
                      `incomplete`, \
                      `secret-found`, `uncovered-reads` (`uncovered-reads: fail` and the generating run read \
                      files no input covers), \
                      `error`, or `unsupported-platform` (the runner has no exact-cache binary: nothing saved).",
    },
    OutputSpec {
        output: Output::ChangedFiles,
        entries: &[EntryPoint::Save],
        description: "With `verify-reuse`: the files under `path` added, changed or removed since a warm \
                      restore, one per line.",
    },
    OutputSpec {
        output: Output::UncoveredFiles,
        entries: &[EntryPoint::Save],
        description: "With `uncovered-reads`, after a miss: the files under the workspace that the cache's \
                      generator read (or loaded as shared libraries) and no input covers (not under `path`, not in \
                      `hash-files`, not an import, not written by the job), one per line.",
    },
];
