"""`bench/run --stack`: what `grow`'s layers cost a restore. The same content restored two ways,
side by side in one run, alternating which goes first: as a base and 5 small layers (one exact
key, `grow: true`), and as one entry. Reports medians and their ratio (target: at most 1.2).

The base is dataset (a), ~1 GB in 30,000 files; each layer adds 200 files (a few MiB) made the
same way with another seed. Both restores go through the v2 service with the fast blob store
(every slot is lookups + a download over HTTP), into fresh directories on tmpfs, and every
restore is checked byte for byte."""
import json
import os
import pathlib
import shutil
import statistics
import time

import bench

LAYERS = 5
LAYER_FILES = 200


def layer_dirs(work: pathlib.Path) -> list:
    """The files each layer adds, generated once (under `data/`, beside the base's)."""
    dirs = []
    for i in range(1, LAYERS + 1):
        d = work / "datasets" / f"layer{i}"
        marker = d / ".complete"
        if not marker.exists():
            shutil.rmtree(d, ignore_errors=True)
            bench.make_inductor_tree(d / "data" / f"new{i}", files=LAYER_FILES, seed=100 + i)
            marker.write_text("ok")
        dirs.append(d / "data")
    return dirs


def copy_into(src: pathlib.Path, dest: pathlib.Path):
    shutil.copytree(src, dest, dirs_exist_ok=True)


def run_stack(args) -> dict:
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    scratch = bench.Scratch(pathlib.Path(args.scratch))
    exe = str(pathlib.Path(args.binary).resolve())
    base_ws = bench.dataset(work, "a")
    layers = layer_dirs(work)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("ACTIONS_", "GITHUB_", "RUNNER_", "EXACT_CACHE_"))}
    base_env["NO_PROXY"] = "*"
    service = bench.Service("fast")
    result = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "cores": os.cpu_count(), "binary": exe,
              "layers": LAYERS, "layer_files": LAYER_FILES, "runs": []}
    try:
        env = dict(base_env, **service.env, EXACT_CACHE_DIR=str(work / "unused-local"))
        run_id = str(time.time_ns())
        flags = bench.key_flags(exe)

        def cli(op, ws, variant, temp, *extra):
            common = ["--path", "data", "--native", "none", "--prefix", "stackbench", "--variant", variant + run_id,
                      *flags]
            return bench.measure([exe, op, *common, "--workspace", str(ws), *extra], dict(env, RUNNER_TEMP=str(temp)))

        # The stack: save the base; then, five times, restore it (with its layers), add a layer's
        # files, and save with the restore's key: `grow` keeps them as the next layer.
        temp = scratch.fresh("stack-temp")
        work_ws = scratch.fresh("stack-ws")
        copy_into(base_ws / "data", work_ws / "data")
        saved = cli("save", work_ws, "stack", temp, "--grow", "true")
        key = next(line.split("=", 1)[1] for line in saved["stdout"].splitlines() if line.startswith("key="))
        for i, layer in enumerate(layers, 1):
            restored = cli("restore", work_ws, "stack", temp, "--grow", "true", "--grow-max-layers", str(LAYERS))
            assert f"layers={i - 1}" in restored["stdout"], restored["stdout"] + restored["stderr"]
            copy_into(layer, work_ws / "data")
            grown = cli("save", work_ws, "stack", temp, "--grow", "true", "--grow-max-layers", str(LAYERS),
                        "--key", key)
            assert "save-result=layer" in grown["stdout"], grown["stdout"] + grown["stderr"]
        bench.log(f"stack: base + {LAYERS} layers saved under {key}")

        # The same content as one entry.
        flat_ws = scratch.fresh("flat-ws")
        copy_into(base_ws / "data", flat_ws / "data")
        for layer in layers:
            copy_into(layer, flat_ws / "data")
        digest = bench.tree_digest(flat_ws / "data")
        cli("save", flat_ws, "flat", scratch.fresh("flat-temp"), "--grow", "false")
        scratch.empty_trash()

        for rep in range(args.reps):
            order = ["stack", "flat"] if rep % 2 == 0 else ["flat", "stack"]
            for how in order:
                scratch.empty_trash()
                target = scratch.fresh("restore-ws")
                temp = scratch.fresh("runner-temp")
                grow = ["--grow", "true", "--grow-max-layers", str(LAYERS)] if how == "stack" else ["--grow", "false"]
                m = cli("restore", target, how, temp, *grow)
                assert "reused=true" in m["stdout"], m["stdout"] + m["stderr"]
                assert f"layers={LAYERS if how == 'stack' else 0}" in m["stdout"], m["stdout"]
                identical = bench.tree_digest(target / "data") == digest
                assert identical, f"{how} restore differs from the content"
                result["runs"].append({"how": how, "rep": rep, "wall": m["wall"], "cpu": m["cpu"], "rss_mb": m["rss_mb"]})
                bench.log(f"stack bench rep {rep} {how}: restore {m['wall']:.2f} s, rss {m['rss_mb']:.0f} MiB")
    finally:
        service.stop()
    med = {how: statistics.median(r["wall"] for r in result["runs"] if r["how"] == how) for how in ("stack", "flat")}
    result["median"] = med
    result["ratio"] = med["stack"] / med["flat"]
    bench.log(f"stack bench: base + {LAYERS} layers {med['stack']:.2f} s, one entry {med['flat']:.2f} s, "
              f"ratio {result['ratio']:.3f}")
    return result


def write_report(result: dict, out: pathlib.Path):
    runs = result["runs"]
    pick = lambda how, field: statistics.median(r[field] for r in runs if r["how"] == how)
    lines = [
        "## `grow`: restoring a base and its layers",
        "",
        f"Generated by `bench/run --stack` on {result['started']} ({result['cores']} cores, "
        f"{len(runs) // 2} repetitions, medians). The same content restored two ways through the v2 "
        "service with the fast blob store, alternating which goes first: dataset (a) (~1 GB, 30,000 "
        f"files) as a base plus {result['layers']} layers of {result['layer_files']} files each "
        "(`grow: true`), and all of it as one entry. Every restore is checked byte for byte.",
        "",
        "| restore | wall | CPU | peak RSS |",
        "|---|---|---|---|",
    ]
    for how, label in (("stack", f"base + {result['layers']} layers"), ("flat", "one entry")):
        lines.append(f"| {label} | {pick(how, 'wall'):.2f} s | {pick(how, 'cpu'):.2f} s | {pick(how, 'rss_mb'):.0f} MiB |")
    lines += ["", f"**Ratio (stack / one entry): {result['ratio']:.3f}** (target: at most 1.2).", ""]
    (out / "RESULTS-grow.md").write_text("\n".join(lines))
    (out / "results-grow.json").write_text(json.dumps(result, indent=1))
