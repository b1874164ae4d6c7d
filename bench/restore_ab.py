#!/usr/bin/env python3
"""A/B benchmark of `exact-cache restore`: one binary against another on the same entry.

Question it answers: is restore of bench dataset (a) (bench.py's `make_inductor_tree`: 30,000
files, ~1 GB) slower with a NEW binary than with an OLD one? (Target: new/old of medians ≤ 1.05.)

    python3 bench/restore_ab.py --old OLD_EXE --new NEW_EXE [--reps 5] [--work /tmp/exact-cache-ab]

What it does:
  1. Generates dataset (a) once under WORK/datasets/a (reused by later runs; the `.complete`
     marker says it is whole). Generation calls bench.py's own `dataset()` (so the data is exactly
     bench.py's) in a child Python that has numpy: this interpreter if it has numpy, else
     .venv-bench/bin/python (create it with `python3 -m venv .venv-bench &&
     .venv-bench/bin/pip install numpy==2.3.5`, as bench/run does). This script itself uses the
     standard library only.
  2. Saves the dataset ONCE with the NEW binary, local backend, into a fresh store WORK/store
     (CLI mode: `save --path=data --native=none --prefix=restore-ab --backend=local
     --local-dir=WORK/store --workspace DATASET`, plus `--allow-machine-only-key` for binaries that
     offer it (bench.key_flags: since issue 32 this key is refused without it), with HOME,
     RUNNER_TEMP and EXACT_CACHE_DIR pointed inside WORK and no GITHUB_* / ACTIONS_* variables,
     so nothing outside WORK is used).
  3. For each repetition, restores with OLD and NEW alternately (OLD first in even reps, NEW first
     in odd ones) into the same empty workspace WORK/restore-ws, with a fresh RUNNER_TEMP. Outside
     the timed region: the previous tree is removed (shutil.rmtree), `sync` runs (page cache is
     NOT dropped: both binaries read the store's archive from a warm cache). Timed: the wall clock
     of the restore process alone (spawn to exit; its stdout/stderr go to files), plus its own
     user/system CPU and peak RSS from wait4().
  4. After each restore, outside the timed region: `reused=true` must be in its output; every
     file's relative path and size must match the dataset, and every 100th file (sorted order)
     must match the dataset's sha256 and permission bits.
  5. Records the 1-minute load average before each run (warns when it exceeds half the cores:
     with other work on the machine the comparison means little). Prints a Markdown table
     (median, min, max wall; median CPU; peak RSS per binary; ratio new/old of medians) and
     writes WORK/ab.json with every run.

Everything it deletes is inside WORK (checked before every removal). Run it under `nice` if
other work shares the machine; both binaries then run at the same priority. WORK on tmpfs
(e.g. /dev/shm/exact-cache-ab, ~3 GB) takes the disk out of the measurement; the default on
disk measures what a runner's disk sees.
"""
import argparse
import hashlib
import json
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
# bench.py has no side effects on import (definitions only; its main() is guarded).
sys.dont_write_bytecode = True  # leave no bench/__pycache__ behind
sys.path.insert(0, str(BENCH_DIR))
import bench  # noqa: E402

DATASET = "a"
PREFIX = "restore-ab"
SAMPLE_EVERY = 100


def log(msg):
    print(f"[restore-ab] {msg}", flush=True)


class Work:
    """WORK and the only way this script removes anything: beneath WORK, never WORK itself."""

    def __init__(self, path: str):
        self.root = pathlib.Path(path).resolve()
        assert self.root != pathlib.Path("/") and len(self.root.parts) >= 3, f"--work {self.root} is too close to /"
        self.root.mkdir(parents=True, exist_ok=True)

    def rmtree(self, path: pathlib.Path):
        path = pathlib.Path(path)
        resolved = path.resolve()
        assert not path.is_symlink(), f"refusing to remove symlink {path}"
        assert resolved != self.root and self.root in resolved.parents, f"refusing to remove {resolved}: not inside {self.root}"
        if resolved.exists():
            shutil.rmtree(resolved)

    def fresh(self, name: str) -> pathlib.Path:
        path = self.root / name
        self.rmtree(path)
        path.mkdir()
        return path


# ---- dataset -------------------------------------------------------------------------------------


def numpy_python() -> str:
    try:
        import numpy  # noqa: F401

        return sys.executable
    except ImportError:
        venv = ROOT / ".venv-bench/bin/python"
        if venv.exists():
            return str(venv)
    sys.exit("generating the dataset needs numpy: python3 -m venv .venv-bench && .venv-bench/bin/pip install numpy==2.3.5")


def ensure_dataset(work: Work) -> pathlib.Path:
    ws = work.root / "datasets" / DATASET
    if not (ws / ".complete").exists():
        # bench.dataset() removes and regenerates WORK/datasets/a (inside WORK).
        code = ("import pathlib, sys; sys.path.insert(0, sys.argv[1]); import bench; "
                "bench.dataset(pathlib.Path(sys.argv[2]), sys.argv[3])")
        subprocess.run([numpy_python(), "-c", code, str(BENCH_DIR), str(work.root), DATASET], check=True)
    assert (ws / ".complete").exists(), ws
    return ws


def sha256(path: pathlib.Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def listing(root: pathlib.Path) -> dict:
    """Relative path -> size of every non-directory under `root`."""
    out = {}
    for dirpath, dirs, names in os.walk(root):
        for n in names:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, root)] = os.lstat(p).st_size
    return out


class Reference:
    def __init__(self, data: pathlib.Path):
        self.files = listing(data)
        self.sample = {}
        for rel in sorted(self.files)[::SAMPLE_EVERY]:
            p = data / rel
            self.sample[rel] = (sha256(p), p.lstat().st_mode & 0o7777)
        self.bytes = sum(self.files.values())

    def check(self, data: pathlib.Path) -> str | None:
        """None when `data` matches; else what differs."""
        got = listing(data)
        if got != self.files:
            missing = sorted(set(self.files) - set(got))[:5]
            extra = sorted(set(got) - set(self.files))[:5]
            sized = sorted(k for k in set(got) & set(self.files) if got[k] != self.files[k])[:5]
            return f"tree differs: {len(got)} files vs {len(self.files)}; missing {missing}, extra {extra}, size differs {sized}"
        for rel, (digest, mode) in self.sample.items():
            p = data / rel
            if sha256(p) != digest:
                return f"content differs: {rel}"
            if p.lstat().st_mode & 0o7777 != mode:
                return f"mode differs: {rel} {oct(p.lstat().st_mode & 0o7777)} vs {oct(mode)}"
        return None


# ---- running the binary -------------------------------------------------------------------------


def base_env(work: Work, temp: pathlib.Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_", "INPUT_", "STATE_"))}
    home = work.root / "home"
    home.mkdir(exist_ok=True)
    env.update(HOME=str(home), RUNNER_TEMP=str(temp), EXACT_CACHE_DIR=str(work.root / "store"), NO_PROXY="*")
    return env


def args_for(work: Work, exe: str, command: str, workspace: pathlib.Path) -> list:
    return [command, "--path=data", "--native=none", f"--prefix={PREFIX}", "--backend=local",
            f"--local-dir={work.root / 'store'}", "--workspace", str(workspace), *bench.key_flags(exe)]


def run_binary(exe: str, args: list, env: dict, cwd: pathlib.Path, logs: pathlib.Path) -> dict:
    """Run one process; wall time from spawn to exit, its own rusage from wait4()."""
    with open(logs / "stdout", "wb") as out, open(logs / "stderr", "wb") as err:
        started = time.perf_counter()
        proc = subprocess.Popen([exe, *args], env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = (logs / "stdout").read_text(errors="replace")
    stderr = (logs / "stderr").read_text(errors="replace")
    if proc.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} exited {proc.returncode}:\n{stdout[-2000:]}\n{stderr[-4000:]}")
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024,
            "stdout": stdout, "stderr": stderr}


def outputs(stdout: str) -> dict:
    return dict(line.split("=", 1) for line in stdout.splitlines() if "=" in line and not line.startswith(("::", " ")))


def binary_info(exe: str) -> dict:
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    return {"path": exe, "sha256": sha256(pathlib.Path(exe)), "version": version}


# ---- the benchmark --------------------------------------------------------------------------------


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--old", required=True, help="exact-cache binary before the change")
    p.add_argument("--new", required=True, help="exact-cache binary after the change (also does the one save)")
    p.add_argument("--reps", type=int, default=5, help="repetitions; each restores once with each binary")
    p.add_argument("--work", default="/tmp/exact-cache-ab", help="dataset, store, restore target, ab.json")
    args = p.parse_args()
    assert args.reps >= 1
    work = Work(args.work)
    exes = {"old": str(pathlib.Path(args.old).resolve()), "new": str(pathlib.Path(args.new).resolve())}
    for name, exe in exes.items():
        assert os.access(exe, os.X_OK), f"--{name} {exe} is not an executable"
    info = {name: binary_info(exe) for name, exe in exes.items()}
    if info["old"]["sha256"] == info["new"]["sha256"]:
        log("note: --old and --new are the same binary (a dry run: the ratio shows the noise)")

    load = os.getloadavg()[0]
    if load > 0.5 * os.cpu_count():
        log(f"warning: load average {load:.1f} on {os.cpu_count()} cores: other work will blur the comparison")
    ds = ensure_dataset(work)
    log("indexing the dataset …")
    ref = Reference(ds / "data")
    log(f"dataset {DATASET}: {len(ref.files)} files, {ref.bytes / 2**20:.0f} MiB; {len(ref.sample)} sampled for sha256")

    # One save, with the new binary, into a fresh store.
    work.rmtree(work.root / "store")
    temp = work.fresh("runner-temp")
    logs = work.fresh("logs")
    os.sync()
    save = run_binary(exes["new"], args_for(work, exes["new"], "save", ds), base_env(work, temp), ds, logs)
    save_out = outputs(save["stdout"])
    assert save_out.get("save-result") == "saved", save["stdout"] + save["stderr"]
    entries = list((work.root / "store" / "entries").iterdir())
    store_mib = sum(e.stat().st_size for e in entries) / 2**20
    log(f"saved with new in {save['wall']:.2f} s: {save_out.get('key')}, store {store_mib:.0f} MiB")

    runs = []
    target = work.root / "restore-ws"
    bench_started = time.perf_counter()
    for rep in range(args.reps):
        rep_started = time.perf_counter()
        order = ["old", "new"] if rep % 2 == 0 else ["new", "old"]
        for name in order:
            # Untimed: a fresh empty workspace and RUNNER_TEMP, the previous tree's removal and
            # every dirty page written back before the clock starts.
            target = work.fresh("restore-ws")
            temp = work.fresh("runner-temp")
            os.sync()
            load = os.getloadavg()[0]
            m = run_binary(exes[name], args_for(work, exes[name], "restore", target), base_env(work, temp), target, logs)
            out = outputs(m["stdout"])
            if out.get("reused") != "true":
                raise RuntimeError(f"{name}: restore did not reuse:\n{m['stdout'][-3000:]}\n{m['stderr'][-3000:]}")
            problem = ref.check(target / "data")
            if problem:
                raise RuntimeError(f"{name}: restored tree is wrong: {problem}")
            runs.append({"rep": rep, "binary": name, "wall": m["wall"], "user": m["user"], "sys": m["sys"],
                         "rss_mib": m["rss_mib"], "restored_files": out.get("restored-files"),
                         "restored_bytes": out.get("restored-bytes"), "verified": True, "loadavg_1m_before": load})
            log(f"rep {rep} {name}: {m['wall']:.3f} s wall, {m['user'] + m['sys']:.2f} s CPU, "
                f"{m['rss_mib']:.0f} MiB RSS, {out.get('restored-files')} files — verified (load before {load:.1f})")
        log(f"rep {rep} took {time.perf_counter() - rep_started:.1f} s (both restores, removal, sync, checks)")
    work.rmtree(work.root / "restore-ws")
    work.rmtree(work.root / "runner-temp")

    summary = {}
    for name in ("old", "new"):
        walls = [r["wall"] for r in runs if r["binary"] == name]
        summary[name] = {"median": statistics.median(walls), "min": min(walls), "max": max(walls),
                         "cpu_median": statistics.median(r["user"] + r["sys"] for r in runs if r["binary"] == name),
                         "rss_max_mib": max(r["rss_mib"] for r in runs if r["binary"] == name), "walls": walls}
    ratio = summary["new"]["median"] / summary["old"]["median"]
    ratio_min = summary["new"]["min"] / summary["old"]["min"]
    verdict = "within 5 %" if ratio <= 1.05 else "MORE THAN 5 % SLOWER"

    lines = [
        f"Restore of dataset ({DATASET}): {len(ref.files)} files, {ref.bytes / 2**20:.0f} MiB; "
        f"{args.reps} reps, alternating order; {os.cpu_count()} cores, work {work.root}",
        "",
        "| binary | median s | min s | max s | CPU s (median) | peak RSS MiB |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("old", "new"):
        s = summary[name]
        lines.append(f"| {name} | {s['median']:.3f} | {s['min']:.3f} | {s['max']:.3f} | {s['cpu_median']:.2f} | {s['rss_max_mib']:.0f} |")
    lines += ["", f"**new/old (medians): {ratio:.3f}** — {verdict}; new/old (mins): {ratio_min:.3f}"]
    loads = [r["loadavg_1m_before"] for r in runs]
    if max(loads) > 0.5 * os.cpu_count():
        lines += ["", f"Load average before the runs reached {max(loads):.1f} on {os.cpu_count()} cores: "
                      "the machine was busy, so the timings are not trustworthy; rerun on a quiet machine."]
    print("\n".join(lines), flush=True)

    result = {
        "meta": {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "reps": args.reps, "cores": os.cpu_count(),
                 "host": platform.node(), "kernel": platform.release(), "work": str(work.root),
                 "niceness": os.nice(0), "dataset": DATASET, "files": len(ref.files), "bytes": ref.bytes,
                 "sampled": len(ref.sample), "store_mib": store_mib, "save_wall": save["wall"],
                 "key": save_out.get("key"), "bench_seconds": time.perf_counter() - bench_started},
        "binaries": info,
        "summary": summary,
        "ratio_median": ratio,
        "ratio_min": ratio_min,
        "within_5_percent": ratio <= 1.05,
        "runs": runs,
    }
    (work.root / "ab.json").write_text(json.dumps(result, indent=1))
    log(f"wrote {work.root / 'ab.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
