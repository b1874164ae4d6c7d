#!/usr/bin/env python3
"""What the reads hook (`uncovered-reads`, src/reads/hook.py) costs the user's Python: the same
program run with and without it, side by side in one run (interleaved, so that the machine's state
is the same for each), the ratio of the medians reported.

    bench/reads_hook.py [--python python3] [--reps 9] [--old OLD_HOOK.py] [--torch .venv-torch/bin/python]

Programs (each in a workspace of its own under a temporary directory):
- `repeat`: 100,000 opens (open, read, close) of 1,000 workspace files, 100 rounds;
- `distinct`: 100,000 opens of 100,000 distinct workspace files, once each;
- `torch.compile` (with `--torch`): a small function compiled cold (a fresh Inductor cache
  directory each run), called once.

The hook is installed as the restore installs it: a `sitecustomize.py` first on `PYTHONPATH`, its
workspace root filled in, `EXACT_CACHE_READS_LOG` naming an empty log. `--old` adds a third column
for another version of the hook (e.g. `git show main:src/reads/hook.py > /tmp/old.py`)."""
import argparse
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent

REPEAT = """
names = ['d/%d/f%d.txt' % (i % 100, i) for i in range(1000)]
for _ in range(100):
    for n in names:
        with open(n) as f:
            f.read()
"""

DISTINCT = """
for i in range(100000):
    with open('d/%d/f%d.txt' % (i % 100, i)) as f:
        f.read()
"""

TORCH = """
import torch
def f(x, y):
    return torch.nn.functional.gelu(x @ y).sum(dim=-1).softmax(-1)
g = torch.compile(f)
g(torch.randn(64, 64), torch.randn(64, 64))
"""


def install(hook_text: str, ws: pathlib.Path, where: pathlib.Path) -> dict:
    where.mkdir(parents=True)
    # The new hook takes the workspace's bytes in hex, the old one a JSON string.
    if "bytes.fromhex(ROOT)" in hook_text:
        root = '"%s"' % os.fsencode(str(ws)).hex()
    else:
        root = '"%s"' % str(ws)
    (where / "sitecustomize.py").write_text(hook_text.replace('"__EXACT_CACHE_ROOT__"', root))
    (where / "reads.log").write_bytes(b"")
    return {"PYTHONPATH": str(where), "EXACT_CACHE_READS_LOG": str(where / "reads.log")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default="python3")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--old", help="another hook.py to measure beside")
    ap.add_argument("--torch", help="a Python with torch: adds a cold torch.compile")
    args = ap.parse_args()
    # The programs run in the workspace: a relative interpreter is taken from here.
    args.python = shutil.which(args.python) or args.python
    if args.torch:
        args.torch = os.path.abspath(args.torch)
    hooks = {"with hook": (ROOT / "src/reads/hook.py").read_text()}
    if args.old:
        hooks["with old hook"] = pathlib.Path(args.old).read_text()
    with tempfile.TemporaryDirectory(dir=os.environ.get("EXACT_CACHE_BENCH_DIR")) as tmp:
        tmp = pathlib.Path(tmp)
        ws = tmp / "ws"
        for i in range(100000):
            d = ws / "d" / str(i % 100)
            if i < 100:
                d.mkdir(parents=True)
            (d / ("f%d.txt" % i)).write_text("x\n")
        programs = {"repeat": (args.python, REPEAT), "distinct": (args.python, DISTINCT)}
        if args.torch:
            programs["torch.compile"] = (args.torch, TORCH)
        base = {"PATH": os.environ["PATH"], "HOME": str(tmp / "home")}
        runs = 0

        def run(python: str, program: str, extra: dict) -> tuple:
            nonlocal runs
            runs += 1
            # A cold Inductor cache each run.
            env = dict(base, TORCHINDUCTOR_CACHE_DIR=str(tmp / ("inductor-%d" % runs)), **extra)
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run([python, "-c", program], check=True, env=env, cwd=ws)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            return wall, after.ru_utime + after.ru_stime - cpu.ru_utime - cpu.ru_stime

        configs = {"without": {}}
        for name, text in hooks.items():
            configs[name] = install(text, ws, tmp / name.replace(" ", "-"))
        print(
            f"{args.reps} runs each, interleaved; median wall seconds (min-max), ratio to without; median CPU "
            f"seconds, ratio; {args.python}: {subprocess.check_output([args.python, '-V'], text=True).strip()}"
        )
        for name, (python, program) in programs.items():
            for extra in configs.values():  # warm up: the page cache, the interpreter's .pyc files
                run(python, program, extra)
            times = {c: [] for c in configs}
            for _ in range(args.reps):
                for c, extra in configs.items():
                    times[c].append(run(python, program, extra))
            without = statistics.median(w for w, _ in times["without"])
            without_cpu = statistics.median(c for _, c in times["without"])
            cells = []
            for c, t in times.items():
                walls = [w for w, _ in t]
                m, cpu = statistics.median(walls), statistics.median(c for _, c in t)
                cells.append(
                    f"{c} {m:.3f} ({min(walls):.3f}-{max(walls):.3f}) {m / without:.2f}x, cpu {cpu:.3f} {cpu / without_cpu:.2f}x"
                )
            print(f"{name:14} " + " | ".join(cells))
        for name, extra in configs.items():
            if "EXACT_CACHE_READS_LOG" in extra:
                size = os.path.getsize(extra["EXACT_CACHE_READS_LOG"])
                print(f"{name}: log {size / 1e6:.1f} MB after every run")


if __name__ == "__main__":
    main()
