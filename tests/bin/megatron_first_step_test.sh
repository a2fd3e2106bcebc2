#!/usr/bin/env bash
# The first step after bin/convert import-megatron equals the fork's (ctest
# megatron_first_step_test): the fixture checkpoint (TP2 x PP2 x DP2, ZeRO-1, iteration 3;
# scripts/make_megatron_ds_fixture.py) imported, bin/train resumes it for one step (step 4, the
# fork's batch of samples 24..31: its train index over a small Byte-tokenized corpus, seed 42,
# seq_len 8, train_samples 800 as the fixture's args) and saves; scripts/megatron_first_step_ref.py
# recomputes that step from the imported state with a numpy transcription of the fork's forward
# and Adam step and compares the loss and every updated master weight and moment (its docstring
# gives the tolerances and why). Six runs: the import with --vocab-padding-in-loss (vocabulary
# 120, its 8 padded rows kept as padding that the loss spans) and with --keep-vocab-padding
# (vocabulary 128), both the softmax over the padded vocabulary of 128 as the fork's (the fork's
# own step), and the default import (the padding rows dropped: the same step with the softmax
# over the 120 real rows), each on one rank and at TP2 x PP2 under mpirun (4 ranks).
# Exit 77 (skipped) without a python3 that has numpy.
# usage: megatron_first_step_test.sh CONVERT TRAIN PREPROCESS   (from the repository root)
set -euo pipefail
convert=$1
train=$2
preprocess=$3
py=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" > /dev/null && "$p" -c 'import numpy' 2> /dev/null; then py=$p; break; fi
done
if [[ -z "$py" ]]; then
  echo "megatron_first_step_test: no python3 with numpy (apt-get install python3-numpy): skipped"
  exit 77
fi
fx=tests/io/fixtures/megatron_ds
tmp=$(mktemp -d)
[[ -n "${MEGATRON_FIRST_STEP_KEEP:-}" ]] && echo "keeping $tmp" || trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# A corpus of Byte tokens < 120 (letters up to 'i', digits, spaces; eod 0).
for i in $(seq 0 79); do printf '{"text": "abc def ghi %s %s"}\n' "$i" "$((i * 7 % 13))"; done \
  > "$tmp/d.jsonl"
"$preprocess" --no-progress --input "$tmp/d.jsonl" --tokenizer-type Byte \
  --output-prefix "$tmp/d" > "$tmp/pre.log" 2>&1 || { cat "$tmp/pre.log"; exit 1; }
data=$tmp/d_text_document
ini() {  # ini IMPORT_OUTPUT CKPT OUT TP PP
  sed -n '/^\[model\]/,/^\[train\]/p' "$1" | sed '$d'
  cat <<INI
[train]
global_batch = 8
micro_batch = 2
seed = 42
train_samples = 800
device = cpu
eval_iters = 0
log_interval = 1
[optim]
lr = 6e-4
min_lr = 6e-5
warmup_samples = 16
decay_samples = 640
decay_style = cosine
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
eps = 1e-8
clip_grad = 1.0
[data]
seed = 42
seq_len = 8
split = 969,30,1
paths = $data
eod_token = 0
cache_dir = $3/cache
[checkpoint]
load = $2
save = $3/ck
exit_interval = 4
[log]
tensorboard_dir = $3/tb
[parallel]
tp = $4
pp = $5
INI
}
for kind in inloss padded real; do
  opt=()
  [[ $kind == padded ]] && opt=(--keep-vocab-padding)
  [[ $kind == inloss ]] && opt=(--vocab-padding-in-loss)
  "$convert" import-megatron "$fx/ckpt" "$tmp/in_$kind" "${opt[@]}" > "$tmp/import_$kind.txt"
  if [[ $kind == padded ]]; then want=128; else want=120; fi
  grep -q "^vocab_size = $want$" "$tmp/import_$kind.txt" \
    || fail "$kind import: vocab_size $(grep vocab_size "$tmp/import_$kind.txt")"
  if [[ $kind == inloss ]]; then
    grep -q "^vocab_padding_in_loss = true$" "$tmp/import_$kind.txt" \
      && grep -q "^padded_vocab = 128$" "$tmp/import_$kind.txt" \
      || fail "inloss import: no vocab_padding_in_loss / padded_vocab 128 in the settings"
  fi
  for layout in "1 1" "2 2"; do
    read -r tp pp <<< "$layout"
    out=$tmp/out_${kind}_tp${tp}pp${pp}
    mkdir -p "$out"
    ini "$tmp/import_$kind.txt" "$tmp/in_$kind" "$out" "$tp" "$pp" > "$out/t.ini"
    if [[ $tp == 1 ]]; then
      "$train" "$out/t.ini" > "$out/log" 2>&1 || { cat "$out/log"; fail "$kind TP$tp x PP$pp"; }
    else
      mpirun --allow-run-as-root --oversubscribe -np 4 "$train" "$out/t.ini" > "$out/log" 2>&1 \
        || { cat "$out/log"; fail "$kind TP$tp x PP$pp"; }
    fi
    grep -q "resuming from $tmp/in_$kind/step_00000003: step 3, 24 samples consumed" "$out/log" \
      || { cat "$out/log"; fail "$kind TP$tp x PP$pp: no resume from step 3"; }
    echo "== $kind vocabulary, TP$tp x PP$pp"
    "$py" scripts/megatron_first_step_ref.py --before "$tmp/in_$kind/step_00000003" \
      --after "$out/ck/step_00000004" --data "$data" --tensorboard "$out/tb" \
      --index-cache "$out/cache" || fail "$kind TP$tp x PP$pp differs from the reference"
  done
done
echo "megatron_first_step_test: OK"
