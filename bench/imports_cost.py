#!/usr/bin/env python3
"""What following imports costs a warm fingerprint: a generator that imports torch beside one
that does not, both with a workspace helper, with `follow-imports` on and off, side by side in one
run (interleaved, so that the machine's state is the same for each).

    bench/imports_cost.py [--binary target/debug/exact-cache] [--venv .venv-torch] [--reps 15]

The workspace is a temporary directory holding a link to the torch venv, so that torch's
site-packages lie inside the workspace, as a `.venv` in a checkout does: only the interpreter's
own places keep exact-cache from following torch's thousands of modules."""
import argparse
import os
import pathlib
import statistics
import subprocess
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=str(ROOT / "target/debug/exact-cache"))
    ap.add_argument("--venv", default=str(ROOT / ".venv-torch"))
    ap.add_argument("--reps", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ws = pathlib.Path(tmp) / "ws"
        (ws / "tools/helpers").mkdir(parents=True)
        os.symlink(os.path.realpath(args.venv), ws / ".venv-torch")
        (ws / "tools/helpers/weights.py").write_text("SCALE = 1\n")
        (ws / "tools/gen_plain.py").write_text("import json, pathlib\nfrom helpers.weights import SCALE\n")
        (ws / "tools/gen_torch.py").write_text(
            "import json, pathlib\nimport torch\nimport torch.nn.functional as F\nfrom helpers.weights import SCALE\n"
        )
        env = {"PATH": os.environ["PATH"], "HOME": tmp, "EXACT_CACHE_DIR": str(pathlib.Path(tmp) / "cache")}

        def fingerprint(script: str, follow: str) -> float:
            cmd = [
                args.binary, "fingerprint", f"--workspace={ws}", "--path=out", f"--hash-files=tools/{script}",
                "--python=.venv-torch/bin/python", "--native=none", f"--follow-imports={follow}",
                f"--fingerprint-file={tmp}/fp.json",
            ]
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=env, cwd=ws, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            return time.perf_counter() - start

        cases = [(s, f) for s in ("gen_plain.py", "gen_torch.py") for f in ("true", "false")]
        for case in cases:  # warm up: the page cache, the interpreter's .pyc files
            fingerprint(*case)
        times = {case: [] for case in cases}
        for _ in range(args.reps):
            for case in cases:
                times[case].append(fingerprint(*case))
        import json

        fingerprint("gen_torch.py", "true")
        fp = json.loads(pathlib.Path(tmp, "fp.json").read_text())
        print(f"{args.reps} warm runs each, interleaved; median (min–max) wall time of `exact-cache fingerprint`")
        print("(python facet on the torch venv included in every row)\n")
        print("| generator | follow-imports | median | min | max |")
        print("|---|---|---|---|---|")
        for (script, follow), t in times.items():
            print(f"| {script} | {follow} | {statistics.median(t):.3f} s | {min(t):.3f} s | {max(t):.3f} s |")
        for name, pick in (("median", statistics.median), ("min", min)):
            m = {case: pick(t) for case, t in times.items()}
            print()
            print(f"by {name}: a torch import costs {m[('gen_torch.py', 'true')] - m[('gen_plain.py', 'true')]:+.3f} s "
                  f"with follow-imports on; following costs {m[('gen_torch.py', 'true')] - m[('gen_torch.py', 'false')]:+.3f} s "
                  f"for the torch generator")
        print(f"\nthe torch generator's key: files {sorted(fp['components']['files'])}, imports {fp['components'].get('imports')}")


if __name__ == "__main__":
    main()
