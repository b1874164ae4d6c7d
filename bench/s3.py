"""`bench/run --s3`: `backend: s3` against s3s-fs (a real S3 server on local disk), side by side
with the store's own ceiling in one run. For each dataset: exact-cache's save and restore; the
same data as one archive PUT and GET with curl (one SigV4-signed request each) and with boto3's
multipart transfer (16 MiB parts, 4 at a time, as ours); and the local pack/unpack floor,
rotating which goes first, `--reps` times; medians, ratios to the ceiling, peak RSS of the client, and the peak bytes
in its RUNNER_TEMP (there must be no temporary archive). Every restore is checked byte for byte.
Writes RESULTS-s3.md and results-s3.json."""
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import time

import bench

ACCESS_KEY = "AKIABENCHEXACTCACHE1"
SECRET_KEY = "bench-secret-key-0123456789abcdefghij"
BUCKET = "bench-bucket"


# boto3's multipart transfer of one file, as a peer client would do it: 16 MiB parts, 4 at a time.
BOTO = f'''
import sys, boto3
from boto3.s3.transfer import TransferConfig
endpoint, op, path, key = sys.argv[1:5]
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
config = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=16 << 20, max_concurrency=4)
if op == "put":
    s3.upload_file(path, "{BUCKET}", key, Config=config)
else:
    s3.download_file("{BUCKET}", key, path, Config=config)
'''


class S3Server:
    def __init__(self, work: pathlib.Path):
        self.dir = work / "s3s-data"
        shutil.rmtree(self.dir, ignore_errors=True)
        (self.dir / BUCKET).mkdir(parents=True)
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        binary = bench.ROOT / ".tools/bin/s3s-fs"
        self.proc = subprocess.Popen([str(binary), "--host", "127.0.0.1", "--port", str(self.port),
                                      "--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY, str(self.dir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        bench.wait_port(self.port)
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def curl(self, *args):
        return ["curl", "-sSf", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{ACCESS_KEY}:{SECRET_KEY}",
                "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", *args]

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def run_s3(args) -> dict:
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    scratch = bench.Scratch(pathlib.Path(args.scratch))
    exe = str(pathlib.Path(args.binary).resolve())
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_", "AWS_"))}
    base_env.update(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION="us-east-1", NO_PROXY="*")
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count(), "binary": exe, "runs": []}
    server = S3Server(work)
    try:
        for name in args.datasets:
            ws = bench.dataset(work, name)
            digest = bench.tree_digest(ws / "data")
            archive = work / f"floor-{name}.tar.zst"
            if not archive.exists():
                subprocess.run(f"tar -cf - -C '{ws}' data | zstd -T0 -3 -q -f -o '{archive}'", shell=True, check=True)
            for rep in range(args.reps):
                tools = ["ours", "ceiling", "multipart", "floor"]
                order = tools if rep % 2 == 0 else tools[::-1]
                for tool in order:
                    scratch.empty_trash()
                    temp = scratch.fresh("runner-temp")
                    env = dict(base_env, RUNNER_TEMP=str(temp), EXACT_CACHE_DIR=str(work / "unused-local"))
                    if tool == "ours":
                        variant = f"{name}-{rep}-{time.time_ns()}"
                        common = ["--path", "data", "--native", "none", "--prefix", "bench", "--variant", variant,
                                  *bench.key_flags(exe),
                                  "--backend", "s3", "--s3-bucket", BUCKET, "--s3-endpoint", server.endpoint]
                        save = bench.measure([exe, "save", *common, "--workspace", str(ws)], env, watch_dir=temp)
                        assert "save-result=saved" in save["stdout"], save["stdout"] + save["stderr"]
                        target = scratch.fresh("restore-ws")
                        temp = scratch.fresh("runner-temp")
                        env["RUNNER_TEMP"] = str(temp)
                        restore = bench.measure([exe, "restore", *common, "--workspace", str(target)], env, watch_dir=temp)
                        assert "reused=true" in restore["stdout"], restore["stdout"] + restore["stderr"]
                        assert bench.tree_digest(target / "data") == digest, "restore differs"
                    elif tool == "ceiling":
                        url = f"{server.endpoint}/{BUCKET}/ceiling-{name}-{rep}"
                        save = bench.measure(server.curl("-T", str(archive), "-o", "/dev/null", url), env)
                        restore = bench.measure(server.curl("-o", "/dev/null", url), env)
                    elif tool == "multipart":
                        key = f"multipart-{name}-{rep}"
                        save = bench.measure([sys.executable, "-c", BOTO, server.endpoint, "put", str(archive), key], env)
                        restore = bench.measure([sys.executable, "-c", BOTO, server.endpoint, "get", "/dev/null", key], env)
                    else:
                        # The local floor: packing to nowhere, unpacking from a local file.
                        save = bench.measure(f"tar -cf - -C '{ws}' data | zstd -T0 -3 -q -c > /dev/null", env, shell=True)
                        target = scratch.fresh("floor-target")
                        restore = bench.measure(f"zstd -d -q -c '{archive}' | tar -xf - -C '{target}'", env, shell=True)
                    for op, m in (("save", save), ("restore", restore)):
                        result["runs"].append({"dataset": name, "tool": tool, "op": op, "rep": rep, "wall": m["wall"],
                                               "rss_mb": m["rss_mb"], "disk_mb": m["disk_mb"]})
                    bench.log(f"s3 {name} rep {rep} {tool}: save {save['wall']:.2f} s, restore {restore['wall']:.2f} s, "
                              f"rss {save['rss_mb']:.0f}/{restore['rss_mb']:.0f} MiB, temp {save['disk_mb']:.0f}/{restore['disk_mb']:.0f} MiB")
                shutil.rmtree(server.dir / BUCKET, ignore_errors=True)
                (server.dir / BUCKET).mkdir()
    finally:
        server.stop()
    return result


def write_report(result: dict, out: pathlib.Path):
    runs = result["runs"]
    med = lambda name, tool, op, field: statistics.median(
        r[field] for r in runs if (r["dataset"], r["tool"], r["op"]) == (name, tool, op))
    lines = [
        "## `backend: s3` against s3s-fs",
        "",
        f"Generated by `bench/run --s3` on {result['started']} ({result['cores']} cores, medians of "
        f"{len({r['rep'] for r in runs})} repetitions, alternating). s3s-fs (a real S3 server that checks "
        "SigV4, on local disk) on 127.0.0.1. **Ceiling**: the same data as one `tar | zstd -3` archive, "
        "PUT and GET with curl in one signed request each. **Ours**: `exact-cache save`/`restore` "
        "`--backend s3` (multipart upload of 16 MiB parts, parallel ranged GETs), every restore checked "
        "byte for byte. Peak RSS is the client's; *temp* is the peak size of its `RUNNER_TEMP`.",
        "",
        "| dataset | op | ours | curl, one request | boto3, multipart | local floor | limit | ours / limit | ours / curl | ours / boto3 | ours peak RSS | ours temp |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted({r["dataset"] for r in runs}):
        for op in ("save", "restore"):
            ours, ceiling, multipart, floor = (med(name, t, op, "wall") for t in ("ours", "ceiling", "multipart", "floor"))
            limit = max(min(ceiling, multipart), floor)
            lines.append(f"| {name} | {op} | {ours:.2f} s | {ceiling:.2f} s | {multipart:.2f} s | {floor:.2f} s | "
                         f"{limit:.2f} s | **{ours / limit:.2f}** | {ours / ceiling:.2f} | **{ours / multipart:.2f}** | "
                         f"{med(name, 'ours', op, 'rss_mb'):.0f} MiB | {med(name, 'ours', op, 'disk_mb'):.0f} MiB |")
    lines += [
        "",
        "Datasets: (a) an Inductor-like tree of 30,000 files, ~1 GB; (b) 5 files of 400 MB of float32 weights. "
        "The **local floor** is `tar | zstd -T0 -3` to /dev/null (save) and `zstd -d | tar -x` from a local file "
        "(restore): a save streams packing and upload at once, so its **limit** is the slower of packing and the "
        "store's faster transfer (curl or boto3); a restore's, the slower of the faster GET and unpacking. The store "
        "ceiling alone leaves out packing and file creation, which no client can skip. boto3 pays what every "
        "multipart client pays on this server (its completion copies the parts).",
        "",
    ]
    notes = bench.BENCH / "s3-notes.md"
    if notes.exists():
        lines += [notes.read_text().strip(), ""]
    (out / "RESULTS-s3.md").write_text("\n".join(lines))
    (out / "results-s3.json").write_text(json.dumps(result, indent=1))
