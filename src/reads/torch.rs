//! What torch's compile caches reported in the job's Python processes, and what a restored
//! compile cache spared. After a hit on a compile cache (`preset: torch-inductor`, or `path`
//! lines that hold TorchInductor's `fxgraph/` or `aotautograd/` directories) the hook
//! (`hook.py`, `EXACT_CACHE_RECORD=torch`) writes, as each Python process that compiled ends,
//! torch's own counters (FX graph cache and AOTAutograd cache hits, misses and bypasses) and, for
//! each compile whose graphs came from the FX graph cache, the compile time torch records as
//! spared (`CompilationMetrics.distributed_ephemeral_timeout_us`: what each graph took to compile
//! when it was made) with the cache files that compile read. Nothing of torch is imported: what
//! a process holds in memory is read as it ends.

use super::path_from;
use crate::manifest::Manifest;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// TorchInductor's directories in its cache directory: a `path` that holds one is a compile
/// cache.
pub const CACHE_DIRS: [&str; 2] = ["fxgraph", "aotautograd"];

/// Whether a restored entry holds a TorchInductor cache: some file lies under `fxgraph/` or
/// `aotautograd/`.
pub fn holds_compile_cache(manifest: &Manifest) -> bool {
    manifest.entries.iter().any(|e| {
        let rel = e.entry_path().map_or(e.path.as_str(), |p| p.rel);
        let mut dirs: Vec<&str> = rel.split('/').collect();
        dirs.pop();
        dirs.iter().any(|d| CACHE_DIRS.contains(d))
    })
}

/// Torch's counters in one process (or summed over several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// FX graphs taken from the FX graph cache (`fxgraph_cache_hit`).
    pub fx_hit: u64,
    /// FX graphs compiled after a lookup that found nothing usable (`fxgraph_cache_miss`).
    pub fx_miss: u64,
    /// FX graphs compiled without a lookup, not cacheable (`fxgraph_cache_bypass`).
    pub fx_bypass: u64,
    pub aot_hit: u64,
    pub aot_miss: u64,
    pub aot_bypass: u64,
}

impl Counts {
    fn add(&mut self, other: &Counts) {
        self.fx_hit += other.fx_hit;
        self.fx_miss += other.fx_miss;
        self.fx_bypass += other.fx_bypass;
        self.aot_hit += other.aot_hit;
        self.aot_miss += other.aot_miss;
        self.aot_bypass += other.aot_bypass;
    }

    /// Graphs compiled anyway: missed or not cacheable.
    pub fn compiled(&self) -> u64 {
        self.fx_miss + self.fx_bypass
    }
}

/// One compile of a process (a torch `CompilationMetrics` record) that took graphs from the FX
/// graph cache.
#[derive(Debug, Default)]
struct Compile {
    /// Microseconds torch records as spared; `None`: this torch does not record it.
    saved_us: Option<u64>,
    files: BTreeSet<PathBuf>,
}

/// A process that compiled, as the log reports it.
#[derive(Debug, Default)]
struct Reported {
    counts: Counts,
    /// Its record is incomplete: torch kept fewer compile records than it made, or the hook
    /// remembered fewer cache reads than it saw.
    cut: bool,
    /// By the number the hook gave it.
    compiles: Vec<(u64, Compile)>,
}

/// The torch records of the log, by process, in the order the log names them.
#[derive(Debug, Default)]
pub struct Compiles {
    processes: Vec<Reported>,
    by_name: HashMap<String, usize>,
}

/// What torch's caches reported in the job, and what the restored entry spared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileSaving {
    /// Python processes that compiled with torch.
    pub processes: usize,
    /// Torch's counters, summed over them.
    pub counts: Counts,
    /// Distinct FX graphs (cache keys) torch took from what the restore put in place.
    pub restored_graphs: usize,
    /// The compile time torch records for what it took from the restored entry, each set of
    /// graphs once; `None` where this torch does not record it (a compile of any process says
    /// `?`).
    pub saved: Option<Duration>,
    /// Some process could not report everything: the saving is at least `saved`.
    pub incomplete: bool,
}

impl Compiles {
    /// A `t`, `s`, `g` or `G` record of the log (`second`: the process; `rest`: what follows).
    pub(super) fn parse(&mut self, kind: &[u8], second: &[u8], rest: Option<&[u8]>) {
        let (Ok(name), Some(rest)) = (std::str::from_utf8(second), rest) else { return };
        match kind {
            b"t" => {
                let id = self.process(name);
                let reported = &mut self.processes[id];
                for field in String::from_utf8_lossy(rest).split(' ') {
                    let Some((key, value)) = field.split_once('=') else { continue };
                    let Ok(n) = value.parse::<u64>() else { continue };
                    let c = &mut reported.counts;
                    match key {
                        "fx-hit" => c.fx_hit += n,
                        "fx-miss" => c.fx_miss += n,
                        "fx-bypass" => c.fx_bypass += n,
                        "aot-hit" => c.aot_hit += n,
                        "aot-miss" => c.aot_miss += n,
                        "aot-bypass" => c.aot_bypass += n,
                        "metrics-cut" | "files-cut" => reported.cut |= n > 0,
                        _ => {}
                    }
                }
            }
            b"s" => {
                let text = String::from_utf8_lossy(rest);
                let Some((n, saved)) = text.split_once(' ') else { return };
                let Ok(n) = n.parse::<u64>() else { return };
                let saved_us = match saved.trim() {
                    "?" => None,
                    us => match us.parse::<u64>() {
                        Ok(us) => Some(us),
                        Err(_) => return,
                    },
                };
                let id = self.process(name);
                self.processes[id].compiles.push((n, Compile { saved_us, files: BTreeSet::new() }));
            }
            b"g" | b"G" => {
                let mut parts = rest.splitn(2, |b| *b == b' ');
                let (Some(n), Some(path)) = (parts.next(), parts.next()) else { return };
                let Some(n) = std::str::from_utf8(n).ok().and_then(|n| n.parse::<u64>().ok()) else { return };
                let path = if kind == b"G" {
                    let Ok(bytes) = hex::decode(path) else { return };
                    path_from(&bytes)
                } else {
                    path_from(path)
                };
                let Some(&id) = self.by_name.get(name) else { return };
                // The compile it read for: the latest of that number.
                if let Some((_, compile)) = self.processes[id].compiles.iter_mut().rev().find(|(m, _)| *m == n) {
                    compile.files.insert(path);
                }
            }
            _ => {}
        }
    }

    fn process(&mut self, name: &str) -> usize {
        if let Some(id) = self.by_name.get(name) {
            return *id;
        }
        self.processes.push(Reported::default());
        self.by_name.insert(name.to_owned(), self.processes.len() - 1);
        self.processes.len() - 1
    }

    /// What the job's processes reported, and what the files `restored` says the restore put in
    /// place spared: a compile counts when every cache file it read is restored, and a set of
    /// files once per job (a graph another process compiled or took already would have been
    /// spared without this hit).
    pub fn saving(&self, restored: impl Fn(&Path) -> bool) -> CompileSaving {
        let mut saving =
            CompileSaving { processes: self.processes.len(), saved: Some(Duration::ZERO), ..Default::default() };
        let mut counted: HashSet<&BTreeSet<PathBuf>> = HashSet::new();
        let mut graphs: HashSet<&Path> = HashSet::new();
        for reported in &self.processes {
            saving.counts.add(&reported.counts);
            saving.incomplete |= reported.cut;
            for (_, compile) in &reported.compiles {
                if compile.saved_us.is_none() {
                    // This torch does not say what its hits spared: nothing is known of any.
                    saving.saved = None;
                }
                if compile.files.is_empty() || !compile.files.iter().all(|f| restored(f)) {
                    continue;
                }
                // The cache key is the directory of the file read (`fxgraph/<xx>/<key>/<entry>`).
                graphs.extend(compile.files.iter().map(|f| f.parent().unwrap_or(f)));
                if !counted.insert(&compile.files) {
                    continue;
                }
                saving.saved = match (saving.saved, compile.saved_us) {
                    (Some(sum), Some(us)) => Some(sum + Duration::from_micros(us)),
                    _ => None,
                };
            }
        }
        saving.restored_graphs = graphs.len();
        saving
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reads::Log;

    const KEY_A: &str = "/c/torchinductor/fxgraph/ab/fabc/entry1";
    const KEY_B: &str = "/c/torchinductor/fxgraph/cd/fcde/entry1";

    fn restored(path: &Path) -> bool {
        path == Path::new(KEY_A)
    }

    /// The two-worker shape: both workers take graph A from the restored entry; torch reports its
    /// compile time in each, and the hit spared it once.
    #[test]
    fn a_restored_graph_counts_once_however_many_processes_take_it() {
        let text = format!(
            "t 1-1 fx-hit=1 fx-miss=0 fx-bypass=0 aot-hit=1 aot-miss=0 aot-bypass=0\n\
             s 1-1 0 27624335\ng 1-1 0 {KEY_A}\n\
             p 9-9 1-1\nr 9-9 /ws/x\n\
             t 2-2 fx-hit=1 fx-miss=0 fx-bypass=0 aot-hit=1 aot-miss=0 aot-bypass=0\n\
             s 2-2 0 27624335\ng 2-2 0 {KEY_A}\n"
        );
        let saving = Log::parse(text.as_bytes()).torch.saving(restored);
        assert_eq!(
            saving,
            CompileSaving {
                processes: 2,
                counts: Counts { fx_hit: 2, aot_hit: 2, ..Default::default() },
                restored_graphs: 1,
                saved: Some(Duration::from_micros(27_624_335)),
                incomplete: false,
            }
        );
    }

    /// A changed model: the first worker compiles B, the second takes it from the cache — written
    /// in this job, not restored: nothing saved.
    #[test]
    fn a_graph_compiled_in_the_job_saves_nothing() {
        let text = format!(
            "t 1-1 fx-hit=0 fx-miss=1 aot-miss=1\n\
             t 2-2 fx-hit=1 aot-hit=1\ns 2-2 0 1896318\ng 2-2 0 {KEY_B}\n"
        );
        let saving = Log::parse(text.as_bytes()).torch.saving(restored);
        assert_eq!((saving.counts.fx_hit, saving.counts.compiled()), (1, 1));
        assert_eq!((saving.restored_graphs, saving.saved), (0, Some(Duration::ZERO)));
    }

    /// A compile that read a restored file and one written in the job is not the restore's; a
    /// torch that records no time makes the figure unknown; a cut record is incomplete; lines
    /// that are not records are skipped.
    #[test]
    fn mixed_unknown_and_cut_figures() {
        let text = format!(
            "t 1-1 fx-hit=2 metrics-cut=1\ns 1-1 0 5000000\ng 1-1 0 {KEY_A}\ng 1-1 0 {KEY_B}\n\
             s 1-1 x 5\ng 1-1 nope {KEY_A}\nt 3-3\ns\n"
        );
        let saving = Log::parse(text.as_bytes()).torch.saving(restored);
        assert_eq!((saving.restored_graphs, saving.saved, saving.incomplete), (0, Some(Duration::ZERO), true));
        let old = format!("t 1-1 fx-hit=1\ns 1-1 0 ?\ng 1-1 0 {KEY_A}\n");
        let saving = Log::parse(old.as_bytes()).torch.saving(restored);
        assert_eq!((saving.restored_graphs, saving.saved), (1, None));
        // An older torch's records say nothing of times nor of files: not measured, never 0.
        let older = "t 1-1 fx-hit=1\ns 1-1 0 ?\n";
        let saving = Log::parse(older.as_bytes()).torch.saving(restored);
        assert_eq!((saving.restored_graphs, saving.saved), (0, None));
        let broken = format!("G 1-1 0 {}\n", hex::encode(format!("{KEY_A}\nx")));
        let log = Log::parse(format!("t 1-1 fx-hit=1\ns 1-1 0 7\n{broken}").as_bytes());
        assert_eq!(
            log.torch.processes[0].compiles[0].1.files.iter().next().unwrap(),
            Path::new(&format!("{KEY_A}\nx"))
        );
    }

    #[test]
    fn an_entry_holding_fxgraph_or_aotautograd_is_a_compile_cache() {
        let manifest = |paths: &[&str]| -> Manifest {
            let entries = paths
                .iter()
                .map(|p| serde_json::json!({"path": p, "kind": "file", "mode": 420, "size": 1, "sha256": "00"}))
                .collect::<Vec<_>>();
            let json = serde_json::json!({"exact_cache_manifest": 1, "key": "k", "roots": [], "entries": entries});
            serde_json::from_value(json).unwrap()
        };
        assert!(holds_compile_cache(&manifest(&["0/fxgraph/ab/fabc/e1"])));
        assert!(holds_compile_cache(&manifest(&["0/torchinductor/aotautograd/akey/e"])));
        assert!(!holds_compile_cache(&manifest(&["0/fixtures/fxgraph"])), "a file named so is not the directory");
        assert!(!holds_compile_cache(&manifest(&["0/fixtures/model.pth"])));
    }
}
