#!/usr/bin/env python3
"""exact-cache vs the official @actions/cache client, side by side in one run, against the
physical limit. Run through `bench/run` (it prepares the tools); see bench/README.md.

For each blob-store profile (Azurite, host-style; the minimal fast blob store) and dataset
((a) an Inductor-like tree of 30,000 files, ~1 GB; (b) 5 weights-like files of 400 MB), it runs
save then restore with exact-cache and with @actions/cache, alternating which goes first,
`--reps` times, and takes medians. Baselines: `tar | zstd -T0` to /dev/null (save floor),
`zstd -d | tar -x` from a local file (restore floor), `cp -r` (file creation floor), and the blob
store's own PUT/GET of the archive (curl). Results: results.json, RESULTS.md, chart.png.
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
PAGE = os.sysconf("SC_PAGE_SIZE")
AZURITE_PORT = 10000
HOSTS = ["devstoreaccount1.blob.core.windows.net", "fastblob.blob.core.windows.net"]


def log(msg):
    print(f"[bench] {msg}", flush=True)


# ---- datasets --------------------------------------------------------------------------------


def make_inductor_tree(dest: pathlib.Path, files=30_000, seed=42):
    """~1 GB in `files` files with lognormal sizes: generated Python/C++ source (compressible)
    and compiled objects (half noise, half structure), in Inductor's two-hex-digit layout."""
    import numpy as np

    rng = np.random.default_rng(seed)
    words = [b"def", b"kernel", b"tmp", b"xindex", b"tl.load", b"tl.store", b"mask", b"=", b"(", b")", b"+", b"*",
             b"0.5", b"float32", b"in_ptr0", b"out_ptr0", b"xmask", b"triton.jit", b"return", b"import", b"torch",
             b"\n", b"    ", b"#include", b"<cstdint>", b"extern", b'"C"', b"void", b"{", b"}", b";", b"for"]
    corpus_words = rng.integers(0, len(words), size=12_000_000)
    corpus = b" ".join(words[i] for i in corpus_words)
    ids = rng.integers(0, 2**32, size=400_000)
    corpus_parts = corpus.split(b"tmp")
    corpus = b"".join(p + b"tmp%08x" % ids[i % len(ids)] for i, p in enumerate(corpus_parts))
    sizes = np.minimum(rng.lognormal(mean=9.18, sigma=1.6, size=files), 20 << 20).astype(np.int64)
    kinds = rng.random(files)
    for i in range(files):
        d = dest / f"{i % 256:02x}"
        d.mkdir(parents=True, exist_ok=True)
        size = int(sizes[i])
        if kinds[i] < 0.6:
            start = int(rng.integers(0, len(corpus) - size - 1))
            (d / f"c{i:06x}.py").write_bytes(corpus[start:start + size])
        else:
            noise = rng.bytes(size // 2)
            structure = bytes(range(256)) * (size // 2 // 256 + 1)
            (d / f"c{i:06x}.so").write_bytes(noise + structure[: size - len(noise)])
    return sum(int(s) for s in sizes)


def make_weights(dest: pathlib.Path, files=5, size=400 << 20, seed=7):
    """`files` files of float32 weights (normal): nearly incompressible."""
    import numpy as np

    rng = np.random.default_rng(seed)
    dest.mkdir(parents=True, exist_ok=True)
    chunk = 16 << 20
    for i in range(files):
        with open(dest / f"layer{i}.pth", "wb") as f:
            left = size
            while left:
                n = min(chunk, left)
                f.write((rng.standard_normal(n // 4) * 0.02).astype(np.float32).tobytes())
                left -= n
    return files * size


def dataset(work: pathlib.Path, name: str) -> pathlib.Path:
    """The workspace holding `data/` for dataset `name`, generated once."""
    ws = work / "datasets" / name
    marker = ws / ".complete"
    if marker.exists():
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    log(f"generating dataset {name} …")
    started = time.time()
    total = make_inductor_tree(ws / "data") if name == "a" else make_weights(ws / "data")
    marker.write_text(str(total))
    log(f"dataset {name}: {total / 2**20:.0f} MiB in {time.time() - started:.0f} s")
    return ws


# ---- measurement -------------------------------------------------------------------------------


def tree_rss(root_pid: int) -> int:
    """Resident bytes of `root_pid` and all its descendants."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry))
        except (OSError, IndexError, ValueError):
            pass
    total, stack = 0, [root_pid]
    while stack:
        pid = stack.pop()
        try:
            with open(f"/proc/{pid}/statm") as f:
                total += int(f.read().split()[1]) * PAGE
        except OSError:
            pass
        stack.extend(children.get(pid, []))
    return total


def dir_bytes(path: pathlib.Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(path):
        for n in names:
            try:
                total += os.lstat(os.path.join(dirpath, n)).st_size
            except OSError:
                pass
    return total


def measure(cmd, env, cwd=None, watch_dir=None, shell=False):
    """Run `cmd`; wall time, CPU seconds (with descendants), peak RSS of the process tree,
    peak bytes in `watch_dir` (the client's temporary directory). Dirty pages of earlier steps
    are flushed first: their writeback would otherwise slow whatever runs next."""
    os.sync()
    time.sleep(0.5)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, shell=shell, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    peak = {"rss": 0, "disk": 0}
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak["rss"] = max(peak["rss"], tree_rss(proc.pid))
            if watch_dir is not None:
                peak["disk"] = max(peak["disk"], dir_bytes(watch_dir))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = proc.communicate()
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd} failed ({proc.returncode}):\n{out.decode()[-2000:]}\n{err.decode()[-4000:]}")
    return {"wall": wall, "cpu": cpu, "rss_mb": peak["rss"] / 2**20, "disk_mb": peak["disk"] / 2**20,
            "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")[-3000:]}


def tree_digest(path: pathlib.Path) -> str:
    """One digest of every file's relative path, mode and content: restores must be identical."""
    import hashlib

    h = hashlib.sha256()
    for dirpath, dirs, names in os.walk(path):
        dirs.sort()
        for n in sorted(names):
            p = pathlib.Path(dirpath) / n
            h.update(str(p.relative_to(path)).encode())
            h.update(oct(p.lstat().st_mode & 0o777).encode())
            with open(p, "rb") as f:
                while chunk := f.read(1 << 20):
                    h.update(chunk)
    return h.hexdigest()


def key_flags(exe: str) -> list:
    """What a binary needs to take the benchmark's key (`--path data --native none --variant …`,
    the machine's facts only): since issue 32 such a key is an input error unless
    `--allow-machine-only-key` is given, a flag older binaries do not know (their `save --help`
    does not offer it), so A/B runs of old builds keep working."""
    shown = subprocess.run([exe, "save", "--help"], capture_output=True, text=True).stdout
    return ["--allow-machine-only-key"] if "--allow-machine-only-key" in shown else []


# ---- peers and services ---------------------------------------------------------------------------


class Hosts:
    """Map the blob hosts to 127.0.0.1 in /etc/hosts for the run, then put the file back."""

    def __enter__(self):
        self.saved = pathlib.Path("/etc/hosts").read_text()
        lines = [line for line in self.saved.splitlines() if not any(h in line for h in HOSTS)]
        lines.append("127.0.0.1 " + " ".join(HOSTS) + "  # exact-cache bench")
        pathlib.Path("/etc/hosts").write_text("\n".join(lines) + "\n")
        return self

    def __exit__(self, *exc):
        pathlib.Path("/etc/hosts").write_text(self.saved)


def wait_port(port, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


class Azurite:
    def __init__(self, work: pathlib.Path, location=None):
        self.dir = pathlib.Path(location) if location else work / "azurite"
        shutil.rmtree(self.dir, ignore_errors=True)
        self.dir.mkdir(parents=True)
        binary = ROOT / "tests/node/node_modules/.bin/azurite-blob"
        self.proc = subprocess.Popen(
            [str(binary), "--blobHost", "127.0.0.1", "--blobPort", str(AZURITE_PORT), "--location", str(self.dir),
             "--skipApiVersionCheck", "--loose", "--silent", "--disableTelemetry"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(AZURITE_PORT)

    def stop(self):
        os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Service:
    """bench/service.rs: the test suite's v2 Twirp service, as a process."""

    def __init__(self, profile: str):
        binary = ROOT / "target/release/examples/bench-service"
        args = ["azurite", f"{HOSTS[0]}:{AZURITE_PORT}"] if profile == "azurite" else ["fast", "fastblob"]
        env = dict(os.environ, EXACT_CACHE_AZURITE_PORT=str(AZURITE_PORT))
        self.proc = subprocess.Popen([str(binary), *args], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        info = json.loads(self.proc.stdout.readline())
        self.env = info["env"]
        self.url = info["url"]

    def entry_size(self, key: str) -> int:
        with urllib.request.urlopen(self.url + "bench/entries") as r:
            entries = json.load(r)
        return max((e["size"] for e in entries if e["key"] == key and e["finalized"]), default=0)

    def stored(self) -> int:
        """Every finalized entry's bytes: an entry of packs uploads its packs as entries too."""
        with urllib.request.urlopen(self.url + "bench/entries") as r:
            return sum(e["size"] for e in json.load(r) if e["finalized"])

    def twirp(self, method: str, body: dict) -> dict:
        req = urllib.request.Request(
            self.url + f"twirp/github.actions.results.api.v1.CacheService/{method}",
            data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.env['ACTIONS_RUNTIME_TOKEN']}"})
        with urllib.request.urlopen(req) as r:
            return json.load(r)

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait()


# ---- one benchmark --------------------------------------------------------------------------------


class Scratch:
    """Fresh directories for restore targets and RUNNER_TEMP, on `root` (tmpfs by default).
    Old trees are moved aside and deleted only between measurements, never while one runs."""

    def __init__(self, root: pathlib.Path):
        self.root = root
        self.trash = root / "trash"
        shutil.rmtree(root, ignore_errors=True)
        self.trash.mkdir(parents=True)
        self.n = 0

    def fresh(self, name: str) -> pathlib.Path:
        path = self.root / name
        if path.exists():
            self.n += 1
            path.rename(self.trash / f"{name}-{self.n}")
        path.mkdir()
        return path

    def empty_trash(self):
        shutil.rmtree(self.trash, ignore_errors=True)
        self.trash.mkdir()


def run(args):
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    scratch = Scratch(pathlib.Path(args.scratch))
    exe = str(pathlib.Path(args.binary).resolve())
    node_cli = str(ROOT / "tests/node/actions-cache.mjs")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_"))}
    base_env["NO_PROXY"] = "*"
    ours_env = dict(kv.split("=", 1) for kv in args.ours_env)
    datasets = {name: dataset(work, name) for name in args.datasets}
    results = {"meta": {"reps": args.reps, "cores": os.cpu_count(), "binary": exe, "scratch": args.scratch,
                        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
                        "zstd": subprocess.run(["zstd", "--version"], capture_output=True, text=True).stdout.strip(),
                        "node": subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()},
               "runs": []}

    # Physical-limit baselines, per dataset (independent of the blob store).
    floors = {}
    for name, ws in datasets.items():
        archive = work / f"floor-{name}.tar.zst"
        subprocess.run(f"tar -cf - -C '{ws}' data | zstd -T0 -3 -q -f -o '{archive}'", shell=True, check=True)
        f = {"archive_mb": archive.stat().st_size / 2**20}
        saves, restores, copies = [], [], []
        for _ in range(args.reps):
            saves.append(measure(f"tar -cf - -C '{ws}' data | zstd -T0 -3 -q -c > /dev/null", base_env, shell=True)["wall"])
            target = scratch.fresh("floor-target")
            restores.append(measure(f"zstd -d -q -c '{archive}' | tar -xf - -C '{target}'", base_env, shell=True)["wall"])
            target = scratch.fresh("floor-target")
            copies.append(measure(["cp", "-r", str(ws / "data"), str(target)], base_env)["wall"])
            scratch.empty_trash()
        f.update(save=statistics.median(saves), restore=statistics.median(restores), copy=statistics.median(copies))
        floors[name] = f
        log(f"floors {name}: save {f['save']:.2f} s, restore {f['restore']:.2f} s, cp -r {f['copy']:.2f} s, archive {f['archive_mb']:.0f} MiB")
    results["floors"] = floors

    # Each (store, dataset) cell gets a fresh blob store and service: what one cell stored (gigabytes
    # in Azurite's database and extents) must not slow the next one down.
    for profile in args.profiles:
        for name, ws in datasets.items():
            azurite = Azurite(work, args.azurite_dir) if profile == "azurite" else None
            service = Service(profile)
            try:
                env = dict(base_env, **service.env)
                # The blob store's own ceiling: one PUT and one GET of the floor archive.
                archive = work / f"floor-{name}.tar.zst"
                key = f"ceiling-{name}-{time.time_ns()}"
                url = service.twirp("CreateCacheEntry", {"key": key, "version": "0" * 64})["signed_upload_url"]
                put = measure(["curl", "-sSf", "-X", "PUT", "-H", "x-ms-blob-type: BlockBlob", "-H", "x-ms-version: 2025-01-05",
                               "--upload-file", str(archive), "-o", "/dev/null", url], base_env)["wall"]
                get = measure(["curl", "-sSf", "-o", "/dev/null", url], base_env)["wall"]
                blocks_url = service.twirp("CreateCacheEntry", {"key": key + "-blocks", "version": "0" * 64})["signed_upload_url"]
                blocks = measure([sys.executable, str(BENCH / "put_blocks.py"), str(archive), blocks_url], base_env)["wall"]
                results.setdefault("ceilings", {}).setdefault(profile, {})[name] = {"put": put, "put_blocks": blocks, "get": get}
                log(f"{profile} ceiling {name}: PUT {put:.2f} s, PUT in blocks {blocks:.2f} s, GET {get:.2f} s ({floors[name]['archive_mb']:.0f} MiB)")
                run_cell(args, results, profile, name, ws, env, ours_env, exe, node_cli, scratch, service, work)
            finally:
                service.stop()
                if azurite:
                    azurite.stop()
    return results


def run_cell(args, results, profile, name, ws, env, ours_env, exe, node_cli, scratch, service, work):
    """The repetitions of one (store, dataset) cell: ours and the peer alternating."""
    digest = tree_digest(ws / "data")
    for rep in range(args.reps):
        order = ["ours", "peer"] if rep % 2 == 0 else ["peer", "ours"]
        for tool in order:
            key = f"{tool}-{profile}-{name}-{rep}-{time.time_ns()}"
            scratch.empty_trash()
            temp = scratch.fresh("runner-temp")
            target = scratch.fresh("restore-ws")
            run_env = dict(env, RUNNER_TEMP=str(temp), EXACT_CACHE_DIR=str(work / "unused-local"))
            if tool == "ours":
                run_env.update(ours_env)
                common = ["--path", "data", "--native", "none", "--prefix", "bench", "--variant", key, *key_flags(exe)]
                stored = service.stored()
                save = measure([exe, "save", *common, "--workspace", str(ws)], run_env, watch_dir=temp)
                wire = service.stored() - stored
                restore = measure([exe, "restore", *common, "--workspace", str(target)], run_env, watch_dir=temp)
                assert "reused=true" in restore["stdout"], restore["stdout"] + restore["stderr"]
            else:
                save = measure(["node", node_cli, "save", key, "data"], dict(run_env, GITHUB_WORKSPACE=str(ws)), watch_dir=temp)
                temp = scratch.fresh("runner-temp")
                restore = measure(["node", node_cli, "restore", key, "data"], dict(run_env, GITHUB_WORKSPACE=str(target)), watch_dir=temp)
                assert json.loads(restore["stdout"])["matchedKey"] == key, restore["stdout"]
                wire = service.entry_size(key)
            identical = tree_digest(target / "data") == digest
            for op, m in (("save", save), ("restore", restore)):
                m.pop("stdout")
                m.pop("stderr")
                results["runs"].append(dict(m, profile=profile, dataset=name, tool=tool, op=op, rep=rep, wire_mb=wire / 2**20, identical=identical))
            log(f"{profile} {name} rep {rep} {tool}: save {save['wall']:.2f} s, restore {restore['wall']:.2f} s, "
                f"rss {save['rss_mb']:.0f}/{restore['rss_mb']:.0f} MiB, disk {save['disk_mb']:.0f}/{restore['disk_mb']:.0f} MiB, "
                f"wire {wire / 2**20:.0f} MiB, identical {identical}")


# ---- report -----------------------------------------------------------------------------------------


def summarize(results):
    rows = []
    floors, ceilings = results["floors"], results.get("ceilings", {})
    for profile in sorted({r["profile"] for r in results["runs"]}):
        for name in sorted({r["dataset"] for r in results["runs"]}):
            for op in ("save", "restore"):
                pick = lambda tool, field: statistics.median(
                    r[field] for r in results["runs"]
                    if (r["profile"], r["dataset"], r["op"], r["tool"]) == (profile, name, op, tool))
                local = floors[name][op]
                # A streaming save cannot send one Put Blob (its size is not known up front):
                # its ceiling is the store's block upload.
                ceiling = ceilings[profile][name]
                remote = ceiling.get("put_blocks", ceiling["put"]) if op == "save" else ceiling["get"]
                limit = max(local, remote)
                ours, peer = pick("ours", "wall"), pick("peer", "wall")
                rows.append({
                    "profile": profile, "dataset": name, "op": op, "ours": ours, "peer": peer, "ratio": ours / peer,
                    "limit": limit, "limit_ratio": limit / ours, "local_floor": local, "store_ceiling": remote,
                    "ours_cpu": pick("ours", "cpu"), "peer_cpu": pick("peer", "cpu"),
                    "ours_rss": max(r["rss_mb"] for r in results["runs"] if (r["profile"], r["dataset"], r["op"], r["tool"]) == (profile, name, op, "ours")),
                    "peer_rss": max(r["rss_mb"] for r in results["runs"] if (r["profile"], r["dataset"], r["op"], r["tool"]) == (profile, name, op, "peer")),
                    "ours_disk": pick("ours", "disk_mb"), "peer_disk": pick("peer", "disk_mb"),
                    "ours_wire": pick("ours", "wire_mb"), "peer_wire": pick("peer", "wire_mb"),
                    "identical": all(r["identical"] for r in results["runs"] if (r["profile"], r["dataset"]) == (profile, name)),
                })
    return rows


TARGETS = {("a", "restore"): 0.6, ("b", "restore"): 0.8, ("a", "save"): 0.7, ("b", "save"): 0.7}


def write_report(results, out: pathlib.Path):
    rows = summarize(results)
    names = {"a": "(a) Inductor-like tree, 30,000 files", "b": "(b) 5 × 400 MB weights"}
    meta = results["meta"]
    lines = [
        "# Benchmark: exact-cache vs `@actions/cache`",
        "",
        f"Run {meta['started']} on {meta['cores']} cores; {meta['reps']} repetitions per cell, medians, ours and the",
        f"peer alternating. {meta['zstd']}; node {meta['node']}. Regenerate with `bench/run` (see bench/README.md).",
        "",
        "Ratios: **ours/peer** below 1 means exact-cache is faster; **limit/ours** near 1 means exact-cache is near the",
        "physical limit, the slower of the local floor (`tar | zstd -T0` for save, `zstd -d | tar -x` for restore) and the",
        "blob store's own PUT/GET of the same archive (curl).",
        "",
        "| store | dataset | op | ours s | peer s | ours/peer | target | limit s | limit/ours | CPU s ours/peer | peak RSS MiB ours/peer | extra disk MiB ours/peer | wire MiB ours/peer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        target = TARGETS[(r["dataset"], r["op"])]
        met = "✅" if r["ratio"] <= target else "❌"
        lines.append(
            f"| {r['profile']} | {names[r['dataset']]} | {r['op']} | {r['ours']:.2f} | {r['peer']:.2f} | **{r['ratio']:.2f}** | "
            f"≤ {target} {met} | {r['limit']:.2f} | {r['limit_ratio']:.2f} | {r['ours_cpu']:.1f} / {r['peer_cpu']:.1f} | "
            f"{r['ours_rss']:.0f} / {r['peer_rss']:.0f} | {r['ours_disk']:.0f} / {r['peer_disk']:.0f} | "
            f"{r['ours_wire']:.0f} / {r['peer_wire']:.0f} |")
    lines += ["", "Baselines (medians):", "",
              "| dataset | save floor s | restore floor s | `cp -r` s | archive MiB |", "|---|---|---|---|---|"]
    for name, f in results["floors"].items():
        lines.append(f"| {names[name]} | {f['save']:.2f} | {f['restore']:.2f} | {f['copy']:.2f} | {f['archive_mb']:.0f} |")
    lines += ["", "Blob store ceilings for the same archive (curl: one Put Blob, Put Block in 16 MiB blocks 4 at a",
              "time + Put Block List, one GET):", "",
              "| store | dataset | Put Blob s | Put Block ×4 s | GET s |", "|---|---|---|---|---|"]
    for profile, c in results.get("ceilings", {}).items():
        for name, v in c.items():
            lines.append(f"| {profile} | {names[name]} | {v['put']:.2f} | {v.get('put_blocks', float('nan')):.2f} | {v['get']:.2f} |")
    notes = BENCH / "notes.md"
    if notes.exists():
        lines += ["", notes.read_text().strip()]
    lines += ["", "Every restore, ours and the peer's, was checked byte-for-byte (paths, modes, content) against the",
              "dataset: " + ("all identical." if all(r["identical"] for r in rows) else "**some differed** (see results.json)."),
              "", "![chart](chart.png)", ""]
    # The cells run on their own (`--preset-cost`, `--stack`, `--s3`) keep their sections here.
    for section in ("preset-cost.md", "RESULTS-grow.md", "RESULTS-s3.md"):
        if (BENCH / section).exists():
            lines += [(BENCH / section).read_text().strip(), ""]
    out.joinpath("RESULTS.md").write_text("\n".join(lines))
    chart(rows, out / "chart.png")


def chart(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    profiles = sorted({r["profile"] for r in rows})
    fig, axes = plt.subplots(1, len(profiles), figsize=(6.5 * len(profiles), 4.8), squeeze=False)
    for ax, profile in zip(axes[0], profiles):
        cells = [r for r in rows if r["profile"] == profile]
        labels = [f"({r['dataset']}) {r['op']}" for r in cells]
        x = range(len(cells))
        width = 0.27
        ax.bar([i - width for i in x], [r["ours"] for r in cells], width, label="exact-cache", color="#2e7d32")
        ax.bar(list(x), [r["peer"] for r in cells], width, label="@actions/cache", color="#9e9e9e")
        ax.bar([i + width for i in x], [r["limit"] for r in cells], width, label="physical limit", color="#90caf9")
        for i, r in enumerate(cells):
            ax.text(i - width, r["ours"], f"{r['ratio']:.2f}×", ha="center", va="bottom", fontsize=8)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels)
        ax.set_ylabel("wall time, s (lower is better)")
        ax.set_title(f"blob store: {profile}")
        ax.legend(fontsize=8)
    fig.suptitle("exact-cache vs @actions/cache (labels: ours/peer)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--binary", default=str(ROOT / "dist/exact-cache-x86_64-unknown-linux-gnu"))
    p.add_argument("--work", default=os.environ.get("EXACT_CACHE_BENCH_DIR", "/tmp/exact-cache-bench"))
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--scratch", default="/dev/shm/exact-cache-bench",
                   help="restore targets and RUNNER_TEMP (tmpfs by default: see bench/README.md)")
    p.add_argument("--datasets", nargs="+", default=["a", "b"], choices=["a", "b"])
    p.add_argument("--profiles", nargs="+", default=["azurite", "fast"], choices=["azurite", "fast"])
    p.add_argument("--out", default=str(BENCH))
    p.add_argument("--report-only", action="store_true", help="rewrite RESULTS.md and chart.png from results.json")
    p.add_argument("--s3", action="store_true",
                   help="only the S3 cell: save/restore through s3s-fs vs curl PUT/GET of the same archive (RESULTS-s3.md)")
    p.add_argument("--stack", action="store_true",
                   help="only the `grow` cell: restore a base + 5 layers vs the same content as one entry (RESULTS-grow.md)")
    p.add_argument("--azurite-dir", help="Azurite's storage (default: under --work)")
    p.add_argument("--ours-env", nargs="*", default=[], metavar="NAME=VALUE",
                   help="extra environment for exact-cache (tuning experiments, e.g. EXACT_CACHE_UPLOAD_BLOCK_MIB=32)")
    args = p.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.s3:
        import s3

        result = s3.run_s3(args)
        s3.write_report(result, out)
        log(f"wrote {out / 'RESULTS-s3.md'}")
        return 0
    if args.stack:
        import stack

        with Hosts():
            result = stack.run_stack(args)
        stack.write_report(result, out)
        log(f"wrote {out / 'RESULTS-grow.md'}")
        return 0
    if args.report_only:
        results = json.loads((out / "results.json").read_text())
    else:
        with Hosts():
            results = run(args)
        (out / "results.json").write_text(json.dumps(results, indent=1))
    write_report(results, out)
    log(f"wrote {out / 'RESULTS.md'} and {out / 'chart.png'}")


if __name__ == "__main__":
    sys.exit(main())
