#!/usr/bin/env bash
# One device call for the Hopper forward (AttentionKernel::kWgmma, ops/cuda/
# flash_attention_forward_sm90a.cu): its tests against the CPU twin, then the forward bench beside
# the mma.sync forward on the same shapes, then compute-sanitizer racecheck and memcheck on the
# padded / cross / grouped-query cases. Run from the repo root with the bundle in $BUNDLE
# (default .gpu-fa3: scripts/gpu/bundle.sh .gpu-fa3 build/tests/flash_attention_gpu_test
# build/bench/attention_bench). Steps: all (default), test, bench, sanitize (comma-separated).
#   scripts/gpu/attention_wgmma_check.sh [steps]
set -uo pipefail
b=${BUNDLE:-.gpu-fa3}
steps=${1:-test,bench,sanitize}
out=${OUT:-/tmp/anvil-wgmma}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if [[ $steps == *test* ]]; then
  "$b/run" flash_attention_gpu_test --gtest_filter='*Wgmma*' >"$out/test.txt" 2>&1
  echo "test rc=$?"
  grep -E '^\[  (FAILED|PASSED|  OK|SKIPPED)|Failure|error|Which is|wgmma B=' "$out/test.txt" | head -40
fi
if [[ $steps == *bench* ]]; then
  "$b/run" attention_bench --benchmark_filter='Wgmma|MmaSync' >"$out/bench.txt" 2>&1
  echo "bench rc=$?"
  grep -E '^BM_' "$out/bench.txt" | awk '{print $1, $NF}'
fi
if [[ $steps == *sanitize* ]]; then
  for tool in racecheck memcheck; do
    LD_LIBRARY_PATH=$PWD/$b/lib compute-sanitizer --tool "$tool" "$b/bin/flash_attention_gpu_test" \
      --gtest_filter='*WgmmaForwardPadding*' >"$out/$tool.txt" 2>&1
    echo "$tool rc=$?"
    grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|hazard|PASSED|FAILED' "$out/$tool.txt" | head -8
  done
fi
