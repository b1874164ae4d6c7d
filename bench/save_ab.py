#!/usr/bin/env python3
"""A/B benchmark of `exact-cache save`: two or more binaries on the same dataset and store.

Question it answers: is a save of bench dataset (a) (30,000 files, ~1 GB) or (b) (5 x 400 MB of
weights) slower with one build of exact-cache than with another, on the v2 service double with
the fast blob store (what `bench/run`'s "fast" cells measure) and, optionally, on the local store
(the client alone, without HTTP)? Used to bisect a save regression (issue 43).

    cargo build --release --example bench-service      # the v2 service double
    python3 bench/save_ab.py --bin old=OLD_EXE --bin new=NEW_EXE [--bin third=EXE ...]
        [--datasets a b] [--stores fast local] [--reps 5]
        [--work $EXACT_CACHE_BENCH_DIR] [--scratch /dev/shm/exact-cache-save-ab]
        [--service target/release/examples/bench-service] [--blobs-on-disk] [--json out.json]

The first `--bin` is the reference: every ratio is `other / first`.

What it does:
  1. Generates the datasets once with bench.py's own generator (`bench.dataset()`: fixed seeds,
     under WORK/datasets/<name>, reused while its `.complete` marker exists), in a child Python
     that has numpy (this one, else .venv-bench/bin/python, as restore_ab.py).
  2. For each store and dataset, `--reps` repetitions; each repetition saves once with every
     binary, the order rotated by one per repetition (so each binary goes first equally often).
     Every save gets a fresh store: for `fast` a new bench-service process (the v2 Twirp service
     with the in-repo fast blob store, addressed as 127.0.0.1, so no /etc/hosts entry is needed;
     its blob directory under SCRATCH, i.e. tmpfs, unless --blobs-on-disk), for `local` an empty
     `--local-dir` under SCRATCH. Each save has a fresh RUNNER_TEMP and HOME under SCRATCH and a
     unique `--variant` (so its key is new).
  3. The command line is bench.py's: `save --path data --native none --prefix save-ab
     --variant <unique> --workspace <dataset>` (CLI mode: no GITHUB_*, ACTIONS_* or INPUT_*
     variables but the service's), plus `--backend local --local-dir <dir>` for `local`, plus
     `--allow-machine-only-key` for the binaries whose `save --help` offers it (since issue 32 a
     key without a project input is otherwise refused; older binaries lack the flag).
  4. Outside the timed region: `sync` and a 0.5 s pause. Timed: the save process alone, spawn to
     exit; its user and system CPU (with any descendants it waited for) and peak RSS from
     wait4(); the service's own CPU seconds over the save from /proc/<pid>/stat.
  5. Checks that the save says `save-result=saved`, and records the bytes it stored (the
     service's entry size; for `local`, the size of the store directory).
  6. Prints a Markdown table per (store, dataset): median, min and max wall; median client CPU;
     median service CPU; peak RSS; stored MiB; ratios to the first binary of the wall medians,
     the wall minimums and the CPU medians. Writes every run to --json (default
     SCRATCH/save_ab.json). The 1-minute load average is recorded before every save: on a
     shared machine wall times vary by tens of percent, CPU seconds much less.

Everything it deletes is inside SCRATCH (checked before every removal); the datasets are kept.
"""
import argparse
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.dont_write_bytecode = True  # leave no bench/__pycache__ behind
sys.path.insert(0, str(BENCH_DIR))
import bench  # noqa: E402  (definitions only; its main() is guarded)

PREFIX = "save-ab"
PEER = "peer"
NODE_CLI = ROOT / "tests/node/actions-cache.mjs"
TICK = os.sysconf("SC_CLK_TCK")


def log(msg):
    print(f"[save-ab] {msg}", flush=True)


class Scratch:
    """SCRATCH and the only way this script removes anything: beneath it, never itself."""

    def __init__(self, path: str):
        self.root = pathlib.Path(path).resolve()
        assert len(self.root.parts) >= 3, f"--scratch {self.root} is too close to /"
        self.root.mkdir(parents=True, exist_ok=True)

    def rmtree(self, path: pathlib.Path):
        path = pathlib.Path(path)
        resolved = path.resolve()
        assert not path.is_symlink(), f"refusing to remove symlink {path}"
        assert self.root in resolved.parents, f"refusing to remove {resolved}: not inside {self.root}"
        if resolved.exists():
            shutil.rmtree(resolved)

    def fresh(self, name: str) -> pathlib.Path:
        path = self.root / name
        self.rmtree(path)
        path.mkdir(parents=True)
        return path


def numpy_python() -> str:
    try:
        import numpy  # noqa: F401

        return sys.executable
    except ImportError:
        venv = ROOT / ".venv-bench/bin/python"
        if venv.exists():
            return str(venv)
    sys.exit("generating a dataset needs numpy: python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy==2.3.5")


def ensure_dataset(work: pathlib.Path, name: str) -> pathlib.Path:
    ws = work / "datasets" / name
    if not (ws / ".complete").exists():
        code = ("import pathlib, sys; sys.path.insert(0, sys.argv[1]); import bench; "
                "bench.dataset(pathlib.Path(sys.argv[2]), sys.argv[3])")
        subprocess.run([numpy_python(), "-c", code, str(BENCH_DIR), str(work), name], check=True)
    assert (ws / ".complete").exists(), ws
    return ws


def dir_bytes(path: pathlib.Path) -> int:
    return sum(os.lstat(os.path.join(d, n)).st_size for d, _, names in os.walk(path) for n in names)


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


class Service:
    """bench/service.rs (the v2 service double, fast blob store at 127.0.0.1): a fresh store."""

    def __init__(self, binary: str, blobs_tmp: pathlib.Path | None):
        env = dict(os.environ)
        if blobs_tmp is not None:
            env["TMPDIR"] = str(blobs_tmp)
        self.proc = subprocess.Popen([binary, "fast", ""], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        info = json.loads(self.proc.stdout.readline())
        self.env, self.url = info["env"], info["url"]

    def entry_size(self, key: str) -> int:
        with urllib.request.urlopen(self.url + "bench/entries") as r:
            entries = json.load(r)
        return max((e["size"] for e in entries if e["key"] == key and e["finalized"]), default=0)

    def cpu(self) -> float:
        return proc_cpu(self.proc.pid)

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()


def run_save(exe: str, args: list, env: dict, cwd: pathlib.Path, logs: pathlib.Path) -> dict:
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([exe, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    stdout = (logs / "stdout").read_text(errors="replace")
    stderr = (logs / "stderr").read_text(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} exited {code}:\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "stdout": stdout, "stderr": stderr}


def outputs(stdout: str) -> dict:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line and not line.startswith(("::", " ")))


def one_save(args, scratch: Scratch, store: str, name: str, ws: pathlib.Path, label: str, exe: str, rep: int) -> dict:
    temp = scratch.fresh("runner-temp")
    home = scratch.fresh("home")
    logs = scratch.fresh("logs")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_", "INPUT_", "STATE_"))}
    env.update(HOME=str(home), RUNNER_TEMP=str(temp), NO_PROXY="*", EXACT_CACHE_DIR=str(scratch.root / "unused-local"))
    variant = f"{label}-{store}-{name}-{rep}-{time.time_ns()}"
    if label == PEER:
        # The official client: `node actions-cache.mjs save <key> data` in the dataset's workspace.
        exe, cli = "node", [str(NODE_CLI), "save", variant, "data"]
        env["GITHUB_WORKSPACE"] = str(ws)
    else:
        cli = ["save", "--path", "data", "--native", "none", "--prefix", PREFIX, "--variant", variant,
               "--workspace", str(ws), *bench.key_flags(exe)]
    service = None
    if store == "fast":
        blobs = None if args.blobs_on_disk else scratch.fresh("blobs")
        service = Service(args.service, blobs)
        env.update(service.env)
    else:
        local = scratch.fresh("local-store")
        cli += ["--backend", "local", "--local-dir", str(local)]
    try:
        os.sync()
        time.sleep(0.5)
        load = os.getloadavg()[0]
        service_cpu = service.cpu() if service else 0.0
        m = run_save(exe, cli, env, ws, logs)
        service_cpu = service.cpu() - service_cpu if service else 0.0
        if label == PEER:
            said = json.loads(m["stdout"].strip().splitlines()[-1])
            if said.get("op") != "save" or said.get("cacheId") is None:
                raise RuntimeError(f"{label}: save did not save:\n{m['stdout'][-3000:]}\n{m['stderr'][-3000:]}")
            key = variant
        else:
            out = outputs(m["stdout"])
            if out.get("save-result") != "saved":
                raise RuntimeError(f"{label}: save did not save:\n{m['stdout'][-3000:]}\n{m['stderr'][-3000:]}")
            key = out.get("key", "")
        stored = service.entry_size(key) if service else dir_bytes(scratch.root / "local-store")
    finally:
        if service:
            service.stop()
    for path in ("blobs", "local-store", "runner-temp"):
        scratch.rmtree(scratch.root / path)
    return {"store": store, "dataset": name, "binary": label, "rep": rep, "wall": m["wall"],
            "cpu": m["user"] + m["sys"], "user": m["user"], "sys": m["sys"], "rss_mib": m["rss_mib"],
            "service_cpu": service_cpu, "stored_mib": stored / 2**20, "loadavg_1m_before": load, "key": key}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", action="append", required=True, metavar="LABEL=EXE",
                   help="a binary to compare (two or more; the first is the reference of the ratios)")
    p.add_argument("--datasets", nargs="+", default=["a", "b"], choices=["a", "b"])
    p.add_argument("--stores", nargs="+", default=["fast"], choices=["fast", "local"])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--work", default=os.environ.get("EXACT_CACHE_BENCH_DIR", "/tmp/exact-cache-bench"),
                   help="where the datasets are (generated once, as bench.py does)")
    p.add_argument("--scratch", default="/dev/shm/exact-cache-save-ab",
                   help="stores, RUNNER_TEMP, HOME and logs (tmpfs by default)")
    p.add_argument("--service", default=str(ROOT / "target/release/examples/bench-service"))
    p.add_argument("--blobs-on-disk", action="store_true",
                   help="the service's blobs in $TMPDIR (as bench.py), not under SCRATCH")
    p.add_argument("--peer", action="store_true",
                   help="also save with the official @actions/cache (tests/node; `fast` store only) as binary `peer`")
    p.add_argument("--json", help="where to write every run (default SCRATCH/save_ab.json)")
    args = p.parse_args()
    bins = {}
    for spec in args.bin:
        label, _, exe = spec.partition("=")
        assert label and exe and label not in bins, f"--bin {spec}: want a new LABEL=EXE"
        exe = str(pathlib.Path(exe).resolve())
        assert os.access(exe, os.X_OK), f"--bin {spec}: not an executable"
        bins[label] = exe
    if args.peer:
        assert PEER not in bins, f"--bin {PEER}=… is the name --peer uses"
        assert (ROOT / "tests/node/node_modules/@actions/cache").is_dir(), "cd tests/node && npm ci (as bench/run does)"
        bins[PEER] = "node"
    assert len(bins) >= 2 and args.reps >= 1
    if "fast" in args.stores:
        assert os.access(args.service, os.X_OK), f"{args.service}: cargo build --release --example bench-service"
    scratch = Scratch(args.scratch)
    work = pathlib.Path(args.work)
    datasets = {name: ensure_dataset(work, name) for name in args.datasets}
    labels = list(bins)
    runs = []
    started = time.perf_counter()
    for store in args.stores:
        for name, ws in datasets.items():
            for rep in range(args.reps):
                order = labels[rep % len(labels):] + labels[:rep % len(labels)]
                for label in order:
                    if label == PEER and store != "fast":
                        continue
                    r = one_save(args, scratch, store, name, ws, label, bins[label], rep)
                    runs.append(r)
                    log(f"{store} {name} rep {rep} {label}: {r['wall']:.2f} s wall, {r['cpu']:.2f} s CPU "
                        f"(service {r['service_cpu']:.2f} s), {r['rss_mib']:.0f} MiB RSS, {r['stored_mib']:.0f} MiB stored "
                        f"(load before {r['loadavg_1m_before']:.1f})")

    lines = [f"Save A/B, {args.reps} reps per binary, order rotated; {os.cpu_count()} cores; "
             f"loads before the saves {min(r['loadavg_1m_before'] for r in runs):.1f}–"
             f"{max(r['loadavg_1m_before'] for r in runs):.1f}", ""]
    summary = {}
    for store in args.stores:
        for name in datasets:
            ref = labels[0]
            cell = {}
            for label in labels:
                rs = [r for r in runs if (r["store"], r["dataset"], r["binary"]) == (store, name, label)]
                if not rs:
                    continue
                walls = [r["wall"] for r in rs]
                cell[label] = {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
                               "cpu": statistics.median(r["cpu"] for r in rs),
                               "cpu_min": min(r["cpu"] for r in rs),
                               "service_cpu": statistics.median(r["service_cpu"] for r in rs),
                               "rss": max(r["rss_mib"] for r in rs),
                               "stored": statistics.median(r["stored_mib"] for r in rs), "walls": walls}
            summary[f"{store}/{name}"] = cell
            peer = cell.get(PEER)
            lines += [f"**{store} store, dataset ({name})**", "",
                      "| binary | median s | min s | max s | CPU s (median) | CPU s (min) | service CPU s | peak RSS MiB "
                      f"| stored MiB | wall/{ref} (medians) | wall/{ref} (mins) | CPU/{ref} |"
                      + (" wall/peer (medians) |" if peer else ""),
                      "|---|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if peer else "")]
            for label in cell:
                s, r0 = cell[label], cell[ref]
                lines.append(f"| {label} | {s['median']:.2f} | {s['min']:.2f} | {s['max']:.2f} | {s['cpu']:.2f} | "
                             f"{s['cpu_min']:.2f} | {s['service_cpu']:.2f} | {s['rss']:.0f} | {s['stored']:.0f} | "
                             f"{s['median'] / r0['median']:.3f} | {s['min'] / r0['min']:.3f} | {s['cpu'] / r0['cpu']:.3f} |"
                             + (f" {s['median'] / peer['median']:.3f} |" if peer else ""))
            lines.append("")
    print("\n".join(lines), flush=True)
    out = pathlib.Path(args.json) if args.json else scratch.root / "save_ab.json"
    out.write_text(json.dumps({
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps, "cores": os.cpu_count(),
                 "host": platform.node(), "kernel": platform.release(), "stores": args.stores,
                 "blobs_on_disk": args.blobs_on_disk, "seconds": time.perf_counter() - started},
        "binaries": bins, "summary": summary, "runs": runs}, indent=1))
    log(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
