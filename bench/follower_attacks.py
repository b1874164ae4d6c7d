#!/usr/bin/env python3
"""Trust round 5's hostile sources against the import follower (issue 41), for two binaries side
by side: each workspace is fingerprinted by a base (main before the change) and the new binary,
interleaved; the wall time and the peak RSS of each run (GNU time's `%M`), with a limit
on both so that a base that spins or grows is stopped and reported as such.

    bench/follower_attacks.py --base /tmp/exact-cache-base --new target/release/exact-cache [--reps 3]

The shapes are the issue's, at its sizes: 20,000 nested parentheses, `parents[2**64 - 1]`, a link
to `/proc/self/pagemap`, a 50 MiB `.py` (and one 50 MiB line), 1,000 modules importing one
another as `hash-files: pkg/*.py`, 4,000 modules each inserting their directory in `sys.path`, a
def of 80,000 parameters, 937 KiB of `a = a / "x"`, and `from pkg import *` with a literal
`__all__` (whether editing `pkg/a.py` changes the key)."""
import argparse
import json
import os
import pathlib
import resource
import signal
import statistics
import subprocess
import tempfile
import time

LIMIT_S = 60
LIMIT_MIB = 4096


def build(root: pathlib.Path) -> list[tuple[str, pathlib.Path, str]]:
    """The attacks: (name, workspace, hash-files)."""
    out = []

    def ws(name: str) -> pathlib.Path:
        d = root / name
        d.mkdir(parents=True)
        return d

    d = ws("nested")
    (d / "gen.py").write_text(f"x = {'(' * 20_000}1{')' * 20_000}\n")
    out.append(("20,000 nested parentheses", d, "gen.py"))
    d = ws("index")
    (d / "gen.py").write_text("from pathlib import Path\nROOT = Path(__file__).parents[18446744073709551615]\n")
    out.append(("parents[2**64 - 1]", d, "gen.py"))
    d = ws("pagemap")
    (d / "gen.py").write_text("import helper\n")
    os.symlink("/proc/self/pagemap", d / "helper.py")
    out.append(("import of a link to /proc/self/pagemap", d, "gen.py"))
    d = ws("big")
    with open(d / "gen.py", "w") as f:
        f.write("import helper\n")
        f.write("x = 1\n" * ((50 << 20) // 6))
    (d / "helper.py").write_text("")
    out.append(("a 50 MiB .py", d, "gen.py"))
    d = ws("line")
    with open(d / "gen.py", "w") as f:
        f.write("import helper; x = [" + "1, " * ((50 << 20) // 3) + "]\n")
    (d / "helper.py").write_text("")
    out.append(("one 50 MiB line", d, "gen.py"))
    d = ws("mutual")
    (d / "pkg").mkdir()
    for i in range(1000):
        (d / f"pkg/m{i}.py").write_text("".join(f"import m{(i + j) % 1000}\n" for j in range(0, 1000, 7)))
    out.append(("1,000 modules importing each other", d, "pkg/*.py"))
    d = ws("syspath")
    (d / "many").mkdir()
    for i in range(4000):
        (d / f"many/n{i}.py").write_text(
            "import os, sys\nsys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
            f"import n{(i + 1) % 4000}\n"
        )
    out.append(("4,000 modules inserting their directory", d, "many/*.py"))
    d = ws("params")
    (d / "gen.py").write_text("def f(" + "".join(f"a{i}: int = {i}, " for i in range(80_000)) + "):\n    pass\n")
    out.append(("a def of 80,000 parameters", d, "gen.py"))
    d = ws("chain")
    (d / "gen.py").write_text("from pathlib import Path\na = Path(__file__)\n" + 'a = a / "x"\n' * (937 * 1024 // 12))
    out.append(('937 KiB of `a = a / "x"`', d, "gen.py"))
    return out


def run(binary: str, ws: pathlib.Path, files: str, tmp: pathlib.Path) -> tuple[str, float, float]:
    """Outcome (`ok`, `killed after …`, `failed rc=…`), seconds, peak MiB. The peak is GNU time's
    `%M` of the binary: a Python parent would pass on its own size (`ru_maxrss` survives exec)."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "EXACT_CACHE_DIR": str(tmp / "cache")}
    rss = tmp / "rss"
    cmd = ["/usr/bin/time", "-f", "%M", "-o", str(rss), binary, "fingerprint", f"--workspace={ws}", "--path=out",
           f"--hash-files={files}", "--native=none", f"--fingerprint-file={tmp}/fp.json"]

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (LIMIT_MIB << 20, LIMIT_MIB << 20))

    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            preexec_fn=limits, start_new_session=True)
    try:
        rc = proc.wait(timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return f"killed after {LIMIT_S} s", time.perf_counter() - start, float("nan")
    elapsed = time.perf_counter() - start
    lines = rss.read_text().splitlines()
    mib = int(lines[-1]) / 1024 if lines and lines[-1].isdigit() else float("nan")
    why = lines[0].replace("Command terminated by ", "") if len(lines) > 1 else f"rc={rc}"
    return ("ok" if rc == 0 else f"failed: {why}"), elapsed, mib


def star_reuse(binary: str, root: pathlib.Path, tmp: pathlib.Path) -> str:
    """Whether editing a module that a `*` import loads through `__all__` changes the key."""
    d = root / "star"
    (d / "pkg").mkdir(parents=True)
    (d / "gen.py").write_text("from pkg import *\n")
    (d / "pkg/__init__.py").write_text('__all__ = ["a", "b"]\n')
    (d / "pkg/a.py").write_text("X = 1\n")
    (d / "pkg/b.py").write_text("")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "EXACT_CACHE_DIR": str(tmp / "cache")}

    def key() -> str:
        subprocess.run([binary, "fingerprint", f"--workspace={d}", "--path=out", "--hash-files=gen.py", "--native=none",
                        f"--fingerprint-file={tmp}/star.json"], env=env, cwd=d, check=True, capture_output=True)
        return json.loads((tmp / "star.json").read_text())["key"]

    before = key()
    (d / "pkg/a.py").write_text("X = 2\n")
    after = key()
    (d / "pkg/a.py").write_text("X = 1\n")
    return "changes (no stale reuse)" if before != after else "unchanged (a stale reuse)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        attacks = build(tmp / "attacks")
        binaries = {"base": args.base, "new": args.new}
        results = {(a[0], b): [] for a in attacks for b in binaries}
        for rep in range(args.reps):
            for name, ws, files in attacks:
                for b, binary in binaries.items():
                    prior = results[(name, b)]
                    if prior and prior[-1][0] != "ok":
                        continue  # a base that was killed is not run again
                    results[(name, b)].append(run(binary, ws, files, tmp))
        print(f"limits: {LIMIT_S} s, {LIMIT_MIB} MiB of address space; median of up to {args.reps} runs; "
              "`exact-cache fingerprint --native=none`\n")
        print("| attack | base | new | new: time | new: peak RSS |")
        print("|---|---|---|---|---|")
        for name, _, _ in attacks:
            cells = []
            for b in binaries:
                runs = results[(name, b)]
                outcome = runs[-1][0]
                t = statistics.median(r[1] for r in runs)
                m = max(r[2] for r in runs)
                cells.append((outcome, t, m))
            (bo, bt, bm), (no, nt, nm) = cells
            base = f"{bo}, {bt:.2f} s, {bm:.0f} MiB" if bo == "ok" else f"{bo} ({bt:.1f} s, {bm:.0f} MiB)"
            print(f"| {name} | {base} | {no} | {nt:.3f} s | {nm:.1f} MiB |")
        print(f"\n`from pkg import *` with a literal `__all__`, editing `pkg/a.py`: the base's key "
              f"{star_reuse(args.base, tmp / 'base', tmp)}, the new key {star_reuse(args.new, tmp / 'new', tmp)}")


if __name__ == "__main__":
    main()
