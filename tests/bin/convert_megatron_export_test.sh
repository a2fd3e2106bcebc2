#!/usr/bin/env bash
# bin/convert export-megatron (ctest convert_megatron_export_test): the fork-layout fixture
# (scripts/make_megatron_ds_fixture.py, TP2 x PP2 x DP2) imported, exported again and re-imported:
#   1. exported at the fixture's layout (TP2 x PP2 x DP2, vocabulary padded as the fixture's), the
#      re-import is byte-identical to the first import (tensor file and manifest);
#   2. exported at TP1 x PP1 x DP1, the re-import's tensor file is byte-identical and its
#      manifest differs in the recorded layout only;
#   3. refused by name: an existing export folder, --dtype bf16 (unsupported dtype), a TP degree
#      that does not divide the heads, an unknown option, and a GPT-2 checkpoint (unknown layout:
#      the fork's GPTModelPipe folder holds BLOOM-style models).
# With --torch (ctest convert_megatron_export_torch_test) it checks instead that torch reads both
# exports as the fork's tools do and finds the fixture's tensors (scripts/check_megatron_export.py);
# it exits 77 (skipped) when no python3 with torch is found.
# usage: convert_megatron_export_test.sh CONVERT TRAIN [--torch]   (from the repository root)
set -euo pipefail
convert=$1
train=$2
mode=${3:-}
fx=tests/io/fixtures/megatron_ds/ckpt
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
"$convert" import-megatron "$fx" "$work/ck" > /dev/null
"$convert" export-megatron "$work/ck" "$work/x2" --tp 2 --pp 2 --dp 2 --vocab-divisible-by 16 \
  > "$work/out.txt"
grep -q "TP2 x PP2 x DP2 (fp16 module weights, vocabulary 120 padded to 128)" "$work/out.txt" \
  || fail "export said: $(cat "$work/out.txt")"
"$convert" export-megatron "$work/ck" "$work/x1" > "$work/out1.txt"
grep -q "TP1 x PP1 x DP1 (fp16 module weights, vocabulary 120 padded to 128)" "$work/out1.txt" \
  || fail "export said: $(cat "$work/out1.txt")"
[[ $(ls "$work/x2/global_step3" | wc -l) == 24 ]] || fail "TP2 x PP2 x DP2: not 24 files"
[[ "$(cat "$work/x2/latest")" == global_step3 ]] || fail "latest: $(cat "$work/x2/latest")"

if [[ "$mode" == --torch ]]; then
  py=""
  for p in python3 /usr/bin/python3; do
    if command -v "$p" > /dev/null && "$p" -c 'import torch' 2> /dev/null; then py=$p; break; fi
  done
  if [[ -z "$py" ]]; then
    echo "convert_megatron_export_torch_test: no python3 with torch (apt-get install python3-torch): skipped"
    exit 77
  fi
  "$py" scripts/check_megatron_export.py "$work/x2" "$fx"
  "$py" scripts/check_megatron_export.py "$work/x1" "$fx"
  echo "convert_megatron_export_torch_test: OK"
  exit 0
fi

s=step_00000003
"$convert" import-megatron "$work/x2" "$work/ck2" > /dev/null
cmp "$work/ck/$s/rank_00000.safetensors" "$work/ck2/$s/rank_00000.safetensors" \
  || fail "TP2 x PP2 x DP2 round trip: tensors differ"
cmp "$work/ck/$s/manifest.json" "$work/ck2/$s/manifest.json" \
  || fail "TP2 x PP2 x DP2 round trip: manifests differ"
"$convert" import-megatron "$work/x1" "$work/ck1" > /dev/null
cmp "$work/ck/$s/rank_00000.safetensors" "$work/ck1/$s/rank_00000.safetensors" \
  || fail "TP1 round trip: tensors differ"
layout='"(tp|pp|dp)": [0-9]+'
diff <(grep -vE "$layout" "$work/ck/$s/manifest.json") \
  <(grep -vE "$layout" "$work/ck1/$s/manifest.json") || fail "TP1 round trip: manifests differ"
grep -qE '"tp": 1' "$work/ck1/$s/manifest.json" || fail "TP1 round trip: layout not recorded"

refused() {  # refused WHAT PATTERN ARGS...: the command fails with PATTERN in its error
  local what=$1 pattern=$2
  shift 2
  if "$@" > /dev/null 2> "$work/err.txt"; then fail "$what was accepted"; fi
  grep -q -- "$pattern" "$work/err.txt" || fail "$what: $(cat "$work/err.txt")"
}
refused "an existing export" "latest exists" "$convert" export-megatron "$work/ck" "$work/x2"
refused "--dtype bf16" "--dtype bf16: unsupported dtype" \
  "$convert" export-megatron "$work/ck" "$work/x3" --dtype bf16
refused "--tp 3" "TP3 x PP1 x DP1 does not divide" \
  "$convert" export-megatron "$work/ck" "$work/x3" --tp 3
refused "--zero 1" "unknown option --zero" \
  "$convert" export-megatron "$work/ck" "$work/x3" --zero 1
# A GPT-2 checkpoint (learned positions, no embedding LayerNorm): one step of a tiny run.
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/gpt2.ini" "$work" train.global_batch=2 train.steps=1 optim.warmup_steps=0 \
  checkpoint.save="$work/gpt2"
"$train" "$work/gpt2.ini" > "$work/train.log" 2>&1 || { cat "$work/train.log"; fail "train"; }
refused "a GPT-2 checkpoint" "unknown layout for export-megatron" \
  "$convert" export-megatron "$work/gpt2" "$work/x3"
[[ ! -e "$work/x3/latest" ]] || fail "a refused export wrote latest"
echo "convert_megatron_export_test: OK"
