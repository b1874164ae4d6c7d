#!/usr/bin/env python3
"""Content stored once, end to end (issue 43): the same exact-cache binary with entries whole
(`EXACT_CACHE_CONTENT=whole`) and with their files' content in packs (the default), side by
side in one run, on the local store, the v2 service double (bench-service, fast blob store, with
its REST API so a save finds earlier entries) and s3s-fs.

    CARGO_PROFILE_RELEASE_LTO=false cargo build --release --example bench-service
    python3 bench/content_e2e.py --bin dist/exact-cache-x86_64-unknown-linux-gnu
        [--stores local fast s3] [--reps 3] [--dataset-a] [--scratch /dev/shm/exact-cache-content]

For each store and each mode (`whole`, `packs`), on a fresh store:
  1. Ten keys of one tree: 2,000 files, ~84 MB (lognormal sizes; 60% generated source, 40% half
     noise), each key with 20 files (1%) changed from the key before, saved in turn. Recorded:
     what each save added to the store (its bytes uploaded) and its wall time.
  2. The store's size after the ten keys, against its size after the first.
  3. Restores of the last key, `--reps` times each, rotating their order: into an empty
     directory, onto a tree that already holds every file, and onto one missing 10% of them.
     Every restore is checked file by file against the tree saved.
With `--dataset-a`: bench.py's dataset (a) (30,000 files, ~1 GB; numpy needed, as save_ab.py),
a cold save and restore in each mode on each store, and the `zstd -d | tar -x` floor of its
restore (the archive made once with `tar | zstd -3`).

Prints Markdown tables of medians and ratios (`packs / whole`); writes every run to --json.
Everything it deletes is inside SCRATCH (save_ab.Scratch checks).
"""
import argparse
import hashlib
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import time
import urllib.request

BENCH_DIR = pathlib.Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.dont_write_bytecode = True
sys.path.insert(0, str(BENCH_DIR))
import bench  # noqa: E402
import s3 as s3bench  # noqa: E402
import save_ab  # noqa: E402

PREFIX = "content-e2e"
FILES = 2_000
CHANGED = 20
KEYS = 10
REST_TOKEN = "rest-token-for-tests"  # the service double's (tests/integration/support/services)
DEFAULT_REF = "refs/heads/main"


def log(msg):
    print(f"[content-e2e] {msg}", flush=True)


# ---- the tree of ten keys ------------------------------------------------------------------------


def file_bytes(i: int, version: int) -> bytes:
    rng = random.Random(i * 1_000_003 + version * 7919)
    size = int(min(max(rng.lognormvariate(9.925, 1.2), 200), 4 << 20))
    if i % 5 < 3:
        lines, n = [], 0
        while n < size:
            line = f"    tmp{n % 997} = x{i}_{version} * {rng.random():.9f} + buf[{rng.randrange(1 << 20)}]\n"
            lines.append(line)
            n += len(line)
        return "".join(lines).encode()[:size]
    half = size // 2
    return rng.randbytes(half) + bytes(size - half)


def write_key(ws: pathlib.Path, versions: list, only=None):
    for i in (range(FILES) if only is None else only):
        path = ws / "data" / f"d{i % 40:02d}" / f"f{i:04d}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(file_bytes(i, versions[i]))


def digest(path: pathlib.Path) -> str:
    return bench.tree_digest(path)


# ---- the stores ----------------------------------------------------------------------------------


class Store:
    """A fresh store of one kind: the flags and variables a step needs, and its stored bytes."""

    def __init__(self, kind: str, args, scratch: save_ab.Scratch, work: pathlib.Path):
        self.kind, self.env, self.flags = kind, {}, []
        self.service = self.server = None
        if kind == "local":
            self.dir = scratch.fresh("local-store")
            self.flags = ["--backend", "local", "--local-dir", str(self.dir)]
        elif kind == "fast":
            self.service = save_ab.Service(args.service, scratch.fresh("blobs"))
            self.env = dict(self.service.env, GITHUB_API_URL=self.service.url.rstrip("/"),
                            GITHUB_REPOSITORY="acme/widgets", GITHUB_REF=DEFAULT_REF)
            self.flags = ["--github-token", REST_TOKEN]
        else:
            self.server = s3bench.S3Server(work)
            self.env = dict(AWS_ACCESS_KEY_ID=s3bench.ACCESS_KEY, AWS_SECRET_ACCESS_KEY=s3bench.SECRET_KEY,
                            AWS_REGION="us-east-1")
            self.flags = ["--backend", "s3", "--s3-bucket", s3bench.BUCKET, "--s3-endpoint", self.server.endpoint]

    def stored(self) -> int:
        if self.kind == "local":
            return save_ab.dir_bytes(self.dir)
        if self.kind == "fast":
            with urllib.request.urlopen(self.service.url + "bench/entries") as r:
                return sum(e["size"] for e in json.load(r) if e["finalized"])
        return save_ab.dir_bytes(self.server.dir / s3bench.BUCKET)

    def stop(self):
        if self.service:
            self.service.stop()
        if self.server:
            self.server.stop()


def step(exe, op, store: Store, mode: str, variant: str, ws: pathlib.Path, scratch: save_ab.Scratch,
         want=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_", "INPUT_", "STATE_", "AWS_"))}
    env.update(store.env, HOME=str(scratch.fresh("home")), RUNNER_TEMP=str(scratch.fresh("runner-temp")),
               NO_PROXY="*", EXACT_CACHE_DIR=str(scratch.root / "unused-local"))
    # Packs are the default since issue 43; `whole` asks for whole archives (older binaries
    # took `packs` as the switch and ignore `whole`).
    env["EXACT_CACHE_CONTENT"] = mode
    cmd = [exe, op, "--path", "data", "--native", "none", "--prefix", PREFIX, "--variant", variant,
           "--workspace", str(ws), *bench.key_flags(exe), *store.flags]
    m = bench.measure(cmd, env)
    out = save_ab.outputs(m["stdout"])
    want = want or (("save-result", "saved") if op == "save" else ("reused", "true"))
    if out.get(want[0]) != want[1]:
        raise RuntimeError(f"{op} ({store.kind}, {mode}) did not end {want}:\n{m['stdout'][-3000:]}\n{m['stderr']}")
    return m


def ten_keys(args, exe, kind, mode, scratch, work) -> dict:
    ws = scratch.fresh("ws")
    versions = [0] * FILES
    write_key(ws, versions)
    store = Store(kind, args, scratch, work)
    saves = []
    try:
        for k in range(KEYS):
            if k:
                changed = random.Random(k).sample(range(FILES), CHANGED)
                for i in changed:
                    versions[i] = k
                write_key(ws, versions, changed)
            before = store.stored()
            m = step(exe, "save", store, mode, f"k{k}", ws, scratch)
            saves.append({"key": k, "wall": m["wall"], "cpu": m["cpu"], "added": store.stored() - before})
            log(f"{kind} {mode} key {k}: {m['wall']:.2f} s, added {saves[-1]['added'] / 1e6:.2f} MB")
        tree = save_ab.dir_bytes(ws / "data")
        expected = digest(ws / "data")
        # `miss`: a restore of a key with no entry onto the full tree, the cost every restore
        # pays before it reads an entry (the process, the key, the lookup).
        restores = {"empty": [], "full": [], "missing-10%": [], "miss": []}
        for rep in range(args.reps):
            order = list(restores)[rep % 4:] + list(restores)[:rep % 4]
            for case in order:
                target = scratch.fresh("target")
                if case != "empty":
                    subprocess.run(["cp", "-a", str(ws / "data"), str(target / "data")], check=True)
                if case == "missing-10%":
                    for i in random.Random(99 + rep).sample(range(FILES), FILES // 10):
                        (target / "data" / f"d{i % 40:02d}" / f"f{i:04d}.bin").unlink()
                if case == "miss":
                    m = step(exe, "restore", store, mode, "absent", target, scratch, ("miss-reason", "not-found"))
                else:
                    m = step(exe, "restore", store, mode, f"k{KEYS - 1}", target, scratch)
                    assert digest(target / "data") == expected, f"{kind} {mode} {case}: the restore differs"
                restores[case].append(m["wall"])
                log(f"{kind} {mode} restore {case}: {m['wall']:.3f} s")
        return {"tree": tree, "saves": saves, "first": saves[0]["added"], "after_ten": store.stored(),
                "restores": restores}
    finally:
        store.stop()
        scratch.rmtree(scratch.root / "local-store")
        scratch.rmtree(scratch.root / "blobs")


def dataset_a(args, exe, kind, mode, scratch, work, ws) -> dict:
    store = Store(kind, args, scratch, work)
    try:
        save = step(exe, "save", store, mode, "a", ws, scratch)
        target = scratch.fresh("target")
        restore = step(exe, "restore", store, mode, "a", target, scratch)
        assert digest(target / "data") == digest(ws / "data"), f"{kind} {mode}: dataset a differs"
        log(f"{kind} {mode} dataset a: save {save['wall']:.2f} s, restore {restore['wall']:.2f} s")
        return {"save": save["wall"], "restore": restore["wall"], "stored": store.stored()}
    finally:
        store.stop()
        scratch.rmtree(scratch.root / "target")
        scratch.rmtree(scratch.root / "local-store")
        scratch.rmtree(scratch.root / "blobs")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", required=True, help="the exact-cache binary")
    p.add_argument("--stores", nargs="+", default=["local", "fast", "s3"], choices=["local", "fast", "s3"])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--dataset-a", action="store_true")
    p.add_argument("--work", default=os.environ.get("EXACT_CACHE_BENCH_DIR", "/tmp/exact-cache-bench"))
    p.add_argument("--scratch", default="/dev/shm/exact-cache-content")
    p.add_argument("--service", default=str(ROOT / "target/release/examples/bench-service"))
    p.add_argument("--json", help="where to write every run (default SCRATCH/content_e2e.json)")
    args = p.parse_args()
    exe = str(pathlib.Path(args.bin).resolve())
    scratch = save_ab.Scratch(args.scratch)
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    modes = ["whole", "packs"]
    results = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count(), "binary": exe,
               "ten_keys": {}, "dataset_a": {}}
    for kind in args.stores:
        for mode in modes:
            results["ten_keys"][f"{kind}/{mode}"] = ten_keys(args, exe, kind, mode, scratch, work)
    if args.dataset_a:
        ws = save_ab.ensure_dataset(work, "a")
        archive = work / "floor-a.tar.zst"
        if not archive.exists():
            subprocess.run(f"tar -cf - -C '{ws}' data | zstd -T0 -3 -q -f -o '{archive}'", shell=True, check=True)
        for rep in range(args.reps):
            for kind in args.stores:
                for mode in (modes if rep % 2 == 0 else modes[::-1]):
                    r = dataset_a(args, exe, kind, mode, scratch, work, ws)
                    results["dataset_a"].setdefault(f"{kind}/{mode}", []).append(r)
            target = scratch.fresh("floor")
            m = bench.measure(f"zstd -d -q -c '{archive}' | tar -xf - -C '{target}'", dict(os.environ), shell=True)
            results["dataset_a"].setdefault("floor", []).append({"restore": m["wall"]})
            scratch.rmtree(target)
    print("\n".join(report(results, args)), flush=True)
    out = pathlib.Path(args.json) if args.json else scratch.root / "content_e2e.json"
    out.write_text(json.dumps(results, indent=1))
    log(f"wrote {out}")


def report(results, args) -> list:
    mb = lambda n: f"{n / 1e6:.2f}"  # noqa: E731
    lines = [f"Content stored once, end to end: {results['started']}, {results['cores']} cores, "
             f"{args.reps} restores of each kind (medians)", ""]
    lines += ["| store | mode | tree MB | key 1 stored MB | keys 2–10 added MB (min–max) | as % of the tree | "
              "store after 10 keys MB | ÷ key 1 | save s keys 2–10 (median) | restore empty s | full s | "
              "missing 10% s | empty ÷ full | miss s | (empty − miss) ÷ (full − miss) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in results["ten_keys"].items():
        kind, mode = name.split("/")
        added = [s["added"] for s in r["saves"][1:]]
        med = {c: statistics.median(w) for c, w in r["restores"].items()}
        lines.append(
            f"| {kind} | {mode} | {mb(r['tree'])} | {mb(r['first'])} | {mb(min(added))}–{mb(max(added))} | "
            f"{100 * min(added) / r['tree']:.2f}–{100 * max(added) / r['tree']:.2f}% | {mb(r['after_ten'])} | "
            f"{r['after_ten'] / r['first']:.2f}× | {statistics.median(s['wall'] for s in r['saves'][1:]):.2f} | "
            f"{med['empty']:.3f} | {med['full']:.3f} | {med['missing-10%']:.3f} | {med['empty'] / med['full']:.1f}× | "
            f"{med['miss']:.3f} | {(med['empty'] - med['miss']) / (med['full'] - med['miss']):.1f}× |")
    lines.append("")
    lines += ["| store | packs ÷ whole: bytes added by keys 2–10 (medians) | store after 10 keys | "
              "restore empty | full | missing 10% |", "|---|---|---|---|---|---|"]
    for kind in args.stores:
        w, p = results["ten_keys"].get(f"{kind}/whole"), results["ten_keys"].get(f"{kind}/packs")
        if not (w and p):
            continue
        med = lambda r, c: statistics.median(r["restores"][c])  # noqa: E731
        added = lambda r: statistics.median(s["added"] for s in r["saves"][1:])  # noqa: E731
        lines.append(f"| {kind} | {added(p) / added(w):.3f} | {p['after_ten'] / w['after_ten']:.3f} | "
                     f"{med(p, 'empty') / med(w, 'empty'):.2f} | {med(p, 'full') / med(w, 'full'):.2f} | "
                     f"{med(p, 'missing-10%') / med(w, 'missing-10%'):.2f} |")
    if results["dataset_a"]:
        floor = statistics.median(r["restore"] for r in results["dataset_a"]["floor"])
        lines += ["", f"Dataset (a), cold, medians of {args.reps}; `zstd -d | tar -x` floor {floor:.2f} s", "",
                  "| store | mode | save s | restore s | stored MB | save ÷ whole | restore ÷ whole | restore ÷ floor |",
                  "|---|---|---|---|---|---|---|---|"]
        for kind in args.stores:
            cells = {m: results["dataset_a"].get(f"{kind}/{m}") for m in ("whole", "packs")}
            if not all(cells.values()):
                continue
            s = {m: statistics.median(r["save"] for r in rs) for m, rs in cells.items()}
            t = {m: statistics.median(r["restore"] for r in rs) for m, rs in cells.items()}
            for m, rs in cells.items():
                lines.append(f"| {kind} | {m} | {s[m]:.2f} | {t[m]:.2f} | {mb(rs[0]['stored'])} | "
                             f"{s[m] / s['whole']:.3f} | {t[m] / t['whole']:.3f} | {t[m] / floor:.2f} |")
    return lines


if __name__ == "__main__":
    main()
