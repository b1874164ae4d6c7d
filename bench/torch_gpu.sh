#!/usr/bin/env bash
# The torch-inductor example on a CUDA machine, cold then warm, through the binary's command line
# (no act, no runner): what the README's GPU figures come from.
#
#   bench/torch_gpu.sh BINARY [OUT_DIR]      (DEVICE=cpu runs it on the CPU, to try the script)
#
# Each run is a fresh machine as far as torch can tell (its own HOME and TMPDIR, the inductor and
# Triton cache directories removed); only the local store survives between runs. Run 1 restores
# (a miss), compiles, saves; run 2 restores (a hit), compiles from the restored caches, saves.
# Writes each step's log, the fingerprint and summary.json (the outputs, torch's report) to
# OUT_DIR. Everything it writes is under one scratch directory, removed at the end.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: bench/torch_gpu.sh BINARY [OUT_DIR]" >&2; exit 2; }
bin=$(cd "$(dirname "$1")" && pwd -P)/$(basename "$1")
out=$(mkdir -p "${2:-/tmp/exact-cache-torch-gpu}" && cd "${2:-/tmp/exact-cache-torch-gpu}" && pwd -P)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
python=${PYTHON:-python3}
export DEVICE=${DEVICE:-cuda}

scratch=$(mktemp -d "/tmp/exact-cache-torch-gpu.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
ws=$scratch/ws
mkdir -p "$ws/examples/torch-inductor"
cp "$root/examples/torch-inductor/compile_model.py" "$ws/examples/torch-inductor/"
export EXACT_CACHE_DIR=$scratch/store
export TORCHINDUCTOR_CACHE_DIR=$scratch/caches/inductor TRITON_CACHE_DIR=$scratch/caches/triton
args=(--preset torch-inductor --python "$python" --prefix inductor-gpu-v1
  --hash-files examples/torch-inductor/compile_model.py --workspace "$ws")

# Outside Actions the binary prints its outputs as name=value lines on stdout.
exact_cache() {
  env -u GITHUB_ACTIONS -u GITHUB_OUTPUT -u GITHUB_STATE -u GITHUB_ENV -u GITHUB_STEP_SUMMARY \
    "$bin" "$@"
}
output() { sed -n "s/^$1=//p" "$2" | tail -n 1; }

for run in cold warm; do
  rm -rf "$scratch/caches" "$scratch/$run"
  mkdir -p "$scratch/$run/home" "$scratch/$run/tmp" "$scratch/$run/runner-temp"
  export HOME=$scratch/$run/home TMPDIR=$scratch/$run/tmp RUNNER_TEMP=$scratch/$run/runner-temp
  start=$(date +%s.%N)
  exact_cache restore --verbose "${args[@]}" >"$out/$run-restore.log" 2>&1
  restore_s=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  reused=$(output reused "$out/$run-restore.log")
  cp "$(output fingerprint-file "$out/$run-restore.log")" "$out/$run-fingerprint.json"
  start=$(date +%s.%N)
  (cd "$ws" && EXPECT_WARM=$reused "$python" examples/torch-inductor/compile_model.py) >"$out/$run-compile.log" 2>&1
  python_s=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  start=$(date +%s.%N)
  exact_cache save "${args[@]}" >"$out/$run-save.log" 2>&1
  save_s=$(python3 -c "import time; print(round(time.time() - $start, 2))")
  python3 - "$out" "$run" "$restore_s" "$python_s" "$save_s" "$scratch/caches" <<'EOF'
import json, os, sys
out, run, restore_s, python_s, save_s, caches = sys.argv[1:]
def outputs(step):
    return dict(l.split("=", 1) for l in open(f"{out}/{run}-{step}.log").read().splitlines()
                if "=" in l and l.split("=", 1)[0].replace("-", "").isalnum())
report = next(json.loads(l.split("INDUCTOR ", 1)[1]) for l in open(f"{out}/{run}-compile.log") if "INDUCTOR " in l)
size = sum(os.path.getsize(os.path.join(b, f)) for b, _, fs in os.walk(caches) for f in fs)
restore, save = outputs("restore"), outputs("save")
row = {"run": run, "restore": {k: restore.get(k) for k in ("cache-hit", "reused", "miss-reason", "key")},
       "save": {k: save.get(k) for k in ("save-result", "time-saved")}, "torch": report,
       "seconds": {"restore": float(restore_s), "python": float(python_s), "save": float(save_s)},
       "cache_bytes": size}
path = f"{out}/summary.json"
rows = json.load(open(path)) if os.path.exists(path) else []
json.dump(rows + [row], open(path, "w"), indent=1)
print(json.dumps(row))
EOF
done
# The facets that tie kernels to the GPU, as the warm run's fingerprint recorded them.
python3 - "$out/warm-fingerprint.json" <<'EOF'
import json, sys
components = json.load(open(sys.argv[1]))["components"]
for name, value in components.items():
    if any(word in name for word in ("gpu", "cuda", "torch", "triton", "isa")):
        print(name, json.dumps(value)[:400])
EOF
