#!/usr/bin/env bash
# A stand-in for an expensive fixture generator: writes model-like files into $1.
set -euo pipefail
out="${1:?usage: generate.sh OUT_DIR}"
mkdir -p "$out/saved_model/variables"
head -c 1048576 /dev/urandom > "$out/model.pth"
printf 'tensor([1., 2., 3.])\n' > "$out/model.expected"
printf 'graph\n' > "$out/saved_model/saved_model.pb"
head -c 4096 /dev/urandom > "$out/saved_model/variables/variables.data-00000-of-00001"
echo "generated $(find "$out" -type f | wc -l) files in $out"
