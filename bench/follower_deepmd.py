#!/usr/bin/env python3
"""The import follower on deepmd-kit's tree (issue 40): `exact-cache fingerprint` of
`hash-files: '**/*.py'` and of the 17 generators `source/tests/infer/gen_*.py`, with
`follow-imports` on and off, for two binaries side by side in one run (interleaved, so that the
machine's state is the same for each): a base (main before the change) and the new one. Then the
modules each key holds, before and after, and whether the key stays the same across two commits
of deepmd-kit that change only an unrelated file (made in a scratch clone), and changes with a
backend module loaded by a computed name.

    bench/follower_deepmd.py --base /tmp/exact-cache-base --new target/release/exact-cache \\
        [--tree /work/ext/deepmd-kit] [--reps 5] [--base-slow-reps 1]

`--native=none` in every run: what is timed is `hash-files` and the follower (the native facets
are the same fixed cost in every row). No `python` input in the timed runs; the module counts are
given without and with `python: python3`."""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import tempfile
import time

GENS = "source/tests/infer/gen_*.py"
ALL = "**/*.py"
ZBL = "source/tests/infer/gen_dpa4_zbl.py"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--tree", default="/work/ext/deepmd-kit")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--base-slow-reps", type=int, default=1, help="runs of the base on **/*.py with imports on")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        env = {"PATH": os.environ["PATH"], "HOME": str(tmp), "EXACT_CACHE_DIR": str(tmp / "cache")}

        def fingerprint(binary: str, tree: pathlib.Path, files: str, follow: str, python: str | None = None):
            out = tmp / "fp.json"
            cmd = [
                binary, "fingerprint", f"--workspace={tree}", "--path=out", f"--hash-files={files}",
                "--native=none", f"--follow-imports={follow}", f"--fingerprint-file={out}",
            ] + ([f"--python={python}"] if python else [])
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            elapsed = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            return (elapsed, cpu), json.loads(out.read_text())

        tree = pathlib.Path(args.tree)
        binaries = {"base": args.base, "new": args.new}
        cases = [(b, f, i) for f in (ALL, GENS) for i in ("true", "false") for b in binaries]
        for case in cases:  # warm up: the page cache
            if case != ("base", ALL, "true"):
                fingerprint(binaries[case[0]], tree, case[1], case[2])
        times = {case: [] for case in cases}
        for rep in range(args.reps):
            for case in cases:
                if case == ("base", ALL, "true") and rep >= args.base_slow_reps:
                    continue
                times[case].append(fingerprint(binaries[case[0]], tree, case[1], case[2])[0])
        print(f"deepmd-kit at {git(tree, 'rev-parse', '--short', 'HEAD')}: "
              f"{sum(1 for _ in tree.rglob('*.py'))} Python files")
        print(f"{args.reps} warm runs each, interleaved ({args.base_slow_reps} of the base on `{ALL}` with imports on); "
              "wall time of `exact-cache fingerprint --native=none`\n")
        print("| hash-files | follow-imports | binary | median | min | max | CPU (median) | runs |")
        print("|---|---|---|---|---|---|---|---|")
        for (b, f, i), runs in times.items():
            t = [r[0] for r in runs]
            cpu = statistics.median(r[1] for r in runs)
            print(f"| `{f}` | {i} | {b} | {statistics.median(t):.3f} s | {min(t):.3f} s | {max(t):.3f} s | "
                  f"{cpu:.3f} s | {len(t)} |")
        med = {case: statistics.median(r[0] for r in runs) for case, runs in times.items()}
        cpu = {case: statistics.median(r[1] for r in runs) for case, runs in times.items()}
        print()
        for f in (ALL, GENS):
            print(f"`{f}`: new/base with imports on {med[('new', f, 'true')] / med[('base', f, 'true')]:.3f}; "
                  f"new, imports on/off {med[('new', f, 'true')] / med[('new', f, 'false')]:.2f} "
                  f"(+{med[('new', f, 'true')] - med[('new', f, 'false')]:.3f} s wall, "
                  f"+{cpu[('new', f, 'true')] - cpu[('new', f, 'false')]:.3f} s CPU); "
                  f"base, imports on/off {med[('base', f, 'true')] / med[('base', f, 'false')]:.2f}")

        print("\nmodules in the key (the generators' `imports` component; `files` counts every file):\n")
        print("| hash-files | python | binary | files | imports |")
        print("|---|---|---|---|---|")
        keys = {}
        for f, python in ((GENS, None), (GENS, "python3"), (ALL, None)):
            for b in binaries:
                if f == ALL and b == "base":
                    continue  # its count is the new one's: every module is in `hash-files`
                _, fp = fingerprint(binaries[b], tree, f, "true", python)
                c = fp["components"]
                keys[(b, f, python)] = fp
                print(f"| `{f}` | {python or '—'} | {b} | {len(c['files'])} | {len(c.get('imports', {}))} |")
        old = set(keys[("base", GENS, None)]["components"].get("imports", {}))
        new = set(keys[("new", GENS, None)]["components"].get("imports", {}))
        print(f"\nthe generators' imports, new but not base: {len(new - old)}; base but not new: {len(old - new)}")
        for m in sorted(new - old)[:40]:
            print(f"  + {m} (imported by {keys[('new', GENS, None)]['components']['imports'][m]})")
        if len(new - old) > 40:
            print(f"  … and {len(new - old) - 40} more")
        for m in sorted(old - new):
            print(f"  - {m}")

        # Two commits that change only an unrelated file, in a scratch clone.
        clone = tmp / "clone"
        subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(tree), str(clone)], check=True)
        for k, v in (("user.email", "bench@example.com"), ("user.name", "bench")):
            git(clone, "config", k, v)
        # The idiom: gen_dpa4_zbl.py's inserts written with `abspath(dirname(__file__) + "/..")`.
        zbl = clone / ZBL
        text = zbl.read_text()
        rewritten = text.replace(
            'os.path.join(os.path.dirname(__file__), "..", "..", "..")',
            'os.path.abspath(os.path.dirname(__file__) + "/../../..")',
        ).replace('os.path.join(os.path.dirname(__file__), "..")', 'os.path.abspath(os.path.dirname(__file__) + "/..")')
        assert rewritten != text
        print('\n`hash-files: source/tests/infer/gen_dpa4_zbl.py`, its inserts as committed and written '
              '`os.path.abspath(os.path.dirname(__file__) + "/..")`:\n')
        print("| binary | modules in the key, as committed | rewritten | lost |")
        print("|---|---|---|---|")
        for b in binaries:
            zbl.write_text(text)
            before = set(fingerprint(binaries[b], clone, ZBL, "true")[1]["components"].get("imports", {}))
            zbl.write_text(rewritten)
            after = set(fingerprint(binaries[b], clone, ZBL, "true")[1]["components"].get("imports", {}))
            lost = sorted(before - after)
            named = ", ".join(f"`{m}`" for m in lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
            print(f"| {b} | {len(before)} | {len(after)} | {named or 'none'} |")
        zbl.write_text(text)

        print("\nkeys across commits of a scratch clone (new binary):\n")
        print("| commit | `**/*.py` key | generators' key | against the row above |")
        print("|---|---|---|---|")

        def keys_now():
            return tuple(fingerprint(args.new, clone, f, "true")[1]["key"] for f in (ALL, GENS))

        def row(what, k, before=None):
            same = "—" if before is None else ", ".join("same" if a == b else "changed" for a, b in zip(k, before))
            print(f"| {what} | `…{k[0][-12:]}` | `…{k[1][-12:]}` | {same} |")

        first = keys_now()
        row(git(clone, "rev-parse", "--short", "HEAD"), first)
        (clone / "README.md").write_text((clone / "README.md").read_text() + "\nAn unrelated line.\n")
        git(clone, "commit", "-qam", "README: an unrelated line")
        row(git(clone, "rev-parse", "--short", "HEAD") + " (README.md)", keys_now(), first)
        (clone / "CITATIONS.bib").write_text((clone / "CITATIONS.bib").read_text() + "\n% unrelated\n")
        git(clone, "commit", "-qam", "CITATIONS: an unrelated line")
        second = keys_now()
        row(git(clone, "rev-parse", "--short", "HEAD") + " (CITATIONS.bib)", second, first)
        backend = clone / "deepmd/backend/pytorch.py"
        backend.write_text(backend.read_text() + "\n# a change to a backend module\n")
        git(clone, "commit", "-qam", "backend: a change")
        row(git(clone, "rev-parse", "--short", "HEAD") + " (deepmd/backend/pytorch.py)", keys_now(), second)
        base_gens = [fingerprint(args.base, clone, GENS, "true")[1]["key"]]
        git(clone, "checkout", "-q", "HEAD~1")
        base_gens.append(fingerprint(args.base, clone, GENS, "true")[1]["key"])
        print(f"\nthe base's generators' key across that backend change: "
              f"{'the same (the module is missing from its key)' if base_gens[0] == base_gens[1] else 'changed'}")


def git(repo: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
