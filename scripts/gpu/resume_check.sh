#!/usr/bin/env bash
# Bitwise resume on the GPU (issue 10), from the repo root on the GPU machine:
#   A: configs/demo_gpu.ini (flash attention, dropout 0.1), 40 steps, checkpoint at 40;
#   B: the same run stopped by exit_interval at step 20 (checkpoint saved), then a fresh
#      process loads it and runs steps 21-40.
# Passes when steps 21-40 log the same losses in A and B and the step-40 checkpoints of A and B
# hold byte-identical tensors (every rank_*.safetensors file equal; the manifests differ only
# in the config they record).
#   scripts/gpu/resume_check.sh        (binaries from .gpu/run, else $BUILD/bin)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
anvil() { if [[ -x .gpu/run ]]; then .gpu/run "$@"; else "${BUILD:-build}/bin/$1" "${@:2}"; fi; }
common=(train.steps=40 train.log_interval=1 train.eval_iters=0 "data.cache_dir=$work/cache")
anvil train configs/demo_gpu.ini "${common[@]}" "checkpoint.save=$work/a" \
  >"$work/a.log" 2>&1
anvil train configs/demo_gpu.ini "${common[@]}" "checkpoint.save=$work/b" \
  checkpoint.exit_interval=20 >"$work/b1.log" 2>&1
anvil train configs/demo_gpu.ini "${common[@]}" "checkpoint.save=$work/b" \
  "checkpoint.load=$work/b" >"$work/b2.log" 2>&1
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | sed -E 's/ +/ /g'; }
losses "$work/a.log" | tail -20 >"$work/a.txt"
losses "$work/b2.log" >"$work/b.txt"
echo "uninterrupted (steps 21-40):"; cat "$work/a.txt" | tr '\n' ';'; echo
echo "resumed:"; cat "$work/b.txt" | tr '\n' ';'; echo
diff "$work/a.txt" "$work/b.txt" >/dev/null || { echo "FAIL: losses differ"; exit 1; }
[[ $(wc -l <"$work/a.txt") -eq 20 ]] || { echo "FAIL: expected 20 logged steps"; exit 1; }
for f in "$work"/a/step_00000040/rank_*.safetensors; do
  cmp "$f" "$work/b/step_00000040/$(basename "$f")" ||
    { echo "FAIL: $(basename "$f") differs"; exit 1; }
done
echo "PASS: resume is bitwise (losses and step-40 tensors identical)"
