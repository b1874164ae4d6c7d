#!/usr/bin/env python3
"""What `preset: torch-inductor` costs each restore: the fingerprint's `torch` component, old and new.

Question it answers: how long does the preset's own fingerprinting take now that it reads torch's
facts from files (src/fingerprint/torch_facts.py) instead of importing torch and triton, and is
the recorded `torch` component still exactly what importing torch says? (Target: the whole
`exact-cache fingerprint --preset torch-inductor` under 0.3 s.)

    bench/run --preset-cost [--reps 9] [--cold-reps 3]      # builds the release binary first
    python3 bench/preset_cost.py --binary BIN [--old-binary OLD] [--python PY] [--reps 9] [--cold-reps 3] [--write]

Side by side in one run, each repetition in a rotated order:
  - old script: `PY -c <the import script the preset ran before>` (imports torch and triton,
    asks torch.cuda for devices);
  - old fingerprint (with --old-binary): `OLD fingerprint --preset torch-inductor`, the whole
    command as a restore runs it, with a binary that still imports torch;
  - new script: `PY -c <src/fingerprint/torch_facts.py>`, the torch part alone;
  - new fingerprint: `BIN fingerprint --preset torch-inductor --python PY`.
Commands run in a scratch workspace under --work with HOME and RUNNER_TEMP inside it, no GITHUB_*
or ACTIONS_* variables, output to pipes. Timed: wall clock from spawn to exit. Warm runs follow
one untimed run of each; cold runs (--cold-reps, root only) call `sync` and drop the page cache
(/proc/sys/vm/drop_caches) before each one, which slows everything else on the machine for a
moment. The 1-minute load average is recorded: on a busy machine the absolute figures move, the
ratios less.

Equality, checked once (warm): the old script's JSON against the `torch` component of the new
fingerprint file, and the old fingerprint's key against the new one (the same key means every
component, `torch` included, is unchanged on this machine).

Prints a Markdown section; --write puts it in bench/preset-cost.md and in bench/RESULTS.md
(replacing an earlier one; bench.py's report appends bench/preset-cost.md when it rewrites
RESULTS.md). Standard library only.
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

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
BEGIN, END = "<!-- preset-cost -->", "<!-- /preset-cost -->"

OLD_SCRIPT = (BENCH_DIR / "torch_import_reference.py").read_text()


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def drop_caches():
    subprocess.run(["sync"], check=True)
    pathlib.Path("/proc/sys/vm/drop_caches").write_text("3\n")


def run(cmd, env, cwd):
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} failed ({proc.returncode}):\n{proc.stderr.decode(errors='replace')}")
    return elapsed, proc.stdout.decode()


def fingerprint_cmd(binary, python, ws, name):
    return [str(binary), "fingerprint", "--preset", "torch-inductor", "--path", "x", "--prefix", "preset-cost",
            "--python", str(python), "--workspace", str(ws), "--fingerprint-file", str(ws / f"{name}.json"), "-q"]


def fingerprint_file(ws, name):
    return json.loads((ws / f"{name}.json").read_text())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", required=True, help="the exact-cache binary to measure (new)")
    p.add_argument("--old-binary", default="",
                   help="also time an exact-cache binary that still imports torch (e.g. dist/ before its rebuild)")
    p.add_argument("--python", default=str(ROOT / ".venv-torch/bin/python"))
    p.add_argument("--reps", type=int, default=9)
    p.add_argument("--cold-reps", type=int, default=3, help="0 to skip; needs root")
    p.add_argument("--work", default="/tmp/exact-cache-preset-cost")
    p.add_argument("--write", action="store_true", help="write bench/preset-cost.md and its RESULTS.md section")
    args = p.parse_args()

    python = pathlib.Path(args.python).absolute()
    args.binary = str(pathlib.Path(args.binary).absolute())
    if not python.exists():
        raise SystemExit(f"{python} is missing: scripts/test installs torch in .venv-torch")
    work = pathlib.Path(args.work)
    if work.exists():
        shutil.rmtree(work)
    ws = work / "ws"
    for d in (ws, work / "home", work / "tmp"):
        d.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "ACTIONS_", "RUNNER_", "INPUT_"))}
    env.update(HOME=str(work / "home"), RUNNER_TEMP=str(work / "tmp"), PYTHONDONTWRITEBYTECODE="1")
    new_script = (ROOT / "src/fingerprint/torch_facts.py").read_text()

    modes = {
        "old script": [str(python), "-c", OLD_SCRIPT],
        "new script": [str(python), "-c", new_script],
        "new fingerprint": fingerprint_cmd(args.binary, python, ws, "new"),
    }
    if args.old_binary and pathlib.Path(args.old_binary).exists():
        modes["old fingerprint"] = fingerprint_cmd(pathlib.Path(args.old_binary).absolute(), python, ws, "old")

    outputs = {name: run(cmd, env, ws)[1] for name, cmd in modes.items()}
    old_torch = json.loads(outputs["old script"].strip().splitlines()[-1])
    new_record = fingerprint_file(ws, "new")
    new_torch = new_record["components"]["torch"]
    torch_equal = old_torch == new_torch
    script_equal = json.loads(outputs["new script"].strip().splitlines()[-1]) == {
        k: v for k, v in new_torch.items() if not k.startswith("device")}
    keys_equal = None
    if "old fingerprint" in modes:
        keys_equal = fingerprint_file(ws, "old")["key"] == new_record["key"]

    names = list(modes)
    warm = {n: [] for n in names}
    cold = {n: [] for n in names}
    loads = []
    can_drop = args.cold_reps > 0 and os.geteuid() == 0
    if args.cold_reps > 0 and not can_drop:
        log("not root: no cold runs")
    for rep in range(args.reps + (args.cold_reps if can_drop else 0)):
        is_cold = rep >= args.reps
        order = names[rep % len(names):] + names[:rep % len(names)]
        for name in order:
            loads.append(os.getloadavg()[0])
            if is_cold:
                drop_caches()
            elapsed, _ = run(modes[name], env, ws)
            (cold if is_cold else warm)[name].append(elapsed)
        log(f"{'cold' if is_cold else 'warm'} rep {rep}: " + ", ".join(
            f"{n} {(cold if is_cold else warm)[n][-1]:.3f}s" for n in names))

    def med(xs):
        return statistics.median(xs) if xs else float("nan")

    def cell(xs):
        return f"{med(xs):.3f}" if xs else "–"

    def ratio(a, b):
        text = f"{med(warm[a]) / med(warm[b]):.3f} warm"
        return text + (f", {med(cold[a]) / med(cold[b]):.3f} cold" if cold[a] else "")

    def shown(path):
        path = pathlib.Path(path).absolute()
        return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)

    labels = {
        "old script": "old: the import script (`python -c`, imports torch and triton)",
        "old fingerprint": f"old: `exact-cache fingerprint --preset torch-inductor` (`{shown(args.old_binary)}`)",
        "new script": "new: `torch_facts.py` alone (`python -c`, reads files)",
        "new fingerprint": f"new: `exact-cache fingerprint --preset torch-inductor` (`{shown(args.binary)}`)",
    }
    torch_version = new_torch.get("torch")
    lines = [
        BEGIN,
        "## The preset's own cost (`preset: torch-inductor`)",
        "",
        f"`bench/preset_cost.py` ({time.strftime('%Y-%m-%d')}, {platform.node() or 'this machine'}, "
        f"{os.cpu_count()} cores, load average {min(loads):.1f}–{max(loads):.1f} during the run; "
        f"torch {torch_version}, triton {new_torch.get('triton')}, CPU only, `python` = .venv-torch): "
        f"{args.reps} warm repetitions" + (f" and {args.cold_reps} cold ones (page cache dropped before each run)" if can_drop else "")
        + ", the commands in a rotated order."
        + (" The new binary is a debug build (the release build can only be faster)." if "/debug/" in args.binary else ""),
        "",
        "| command | warm median s | warm min–max s | cold median s |",
        "|---|---|---|---|",
    ]
    for name in ["old script", "old fingerprint", "new script", "new fingerprint"]:
        if name in warm:
            lines.append(f"| {labels[name]} | {med(warm[name]):.3f} | {min(warm[name]):.3f}–{max(warm[name]):.3f} | "
                         f"{cell(cold[name])} |")
    ratios = f"**new fingerprint / old import script (medians): {ratio('new fingerprint', 'old script')}**"
    if "old fingerprint" in warm:
        ratios += f"; the whole command, new / old: {ratio('new fingerprint', 'old fingerprint')}"
    lines += ["", ratios + "."]
    target = "met" if med(warm["new fingerprint"]) < 0.3 else "**missed**"
    lines += ["", f"Target (whole new fingerprint under 0.3 s warm): {target}.", "",
              "Equality on this machine: the `torch` component of the new fingerprint "
              + ("**equals**" if torch_equal else "**differs from**") + " the old import script's report "
              + f"(`{json.dumps(new_torch, sort_keys=True)}`)"
              + ("" if script_equal else "; the new script's own report differs from the component (**check**)")
              + ("" if keys_equal is None else
                 "; the old and new fingerprint keys are " + ("identical." if keys_equal else "**different**.")),
              END]
    section = "\n".join(lines)
    print(section)
    (work / "preset-cost.json").write_text(json.dumps(
        {"warm": warm, "cold": cold, "loads": loads, "old_torch": old_torch, "new_torch": new_torch,
         "keys_equal": keys_equal}, indent=1))
    if args.write:
        (BENCH_DIR / "preset-cost.md").write_text(section + "\n")
        results = BENCH_DIR / "RESULTS.md"
        text = results.read_text()
        if BEGIN in text and END in text:
            text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
        else:
            text = text.rstrip("\n") + "\n\n" + section + "\n"
        results.write_text(text)
        log(f"wrote {BENCH_DIR / 'preset-cost.md'} and its section of {results}")
    return 0 if torch_equal and keys_equal is not False else 1


if __name__ == "__main__":
    sys.exit(main())
