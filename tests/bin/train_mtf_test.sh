#!/usr/bin/env bash
# Packed T0/MTF finetuning end to end on the CPU (ctest train_mtf_test):
#   1. bin/preprocess --json-keys inputs targets writes PREFIX_inputs_document and
#      PREFIX_targets_document with as many documents each;
#   2. bin/train with [data] mtf = true on that prefix (ALiBi, pad 0): the packed rows are
#      logged, and the loss of the last steps is well below the first step's;
#   3. a rerun gives the same losses (the packing is seeded by [data] seed);
#   4. a pair of unequal document counts, and mtf with learned positions, are refused naming
#      the files / the key.
# usage: train_mtf_test.sh BUILD/bin/train BUILD/bin/preprocess (from the repository root)
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/tiny_synth_ini.sh"
fail() { echo "FAIL: $*"; exit 1; }
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | sed -E 's/ +/ /g'; }

# Sums of two digits: inputs "a+b=", targets "c;" (c = (a + b) mod 10).
for i in $(seq 0 299); do
  a=$((i % 10)) b=$(((i / 10) % 10))
  printf '{"inputs": "%d+%d=", "targets": "%d;"}\n' "$a" "$b" $(((a + b) % 10))
done > "$work/pairs.jsonl"
"$preprocess" --no-progress --input "$work/pairs.jsonl" --json-keys inputs targets \
  --tokenizer-type Byte --output-prefix "$work/mtf" > "$work/pre.log" 2>&1 \
  || fail "preprocess failed: $(tail -3 "$work/pre.log")"
for key in inputs targets; do
  for ext in bin idx; do
    [[ -s $work/mtf_${key}_document.$ext ]] || fail "no mtf_${key}_document.$ext"
  done
done
# .idx: 9-byte magic, u64 version, u8 dtype, then u64 N sequences at byte 18.
count() { od -An -tu8 -j18 -N8 "$1" | tr -d ' '; }
[[ $(count "$work/mtf_inputs_document.idx") == 300 && $(count "$work/mtf_targets_document.idx") == 300 ]] \
  || fail "document counts: $(count "$work/mtf_inputs_document.idx") inputs, $(count "$work/mtf_targets_document.idx") targets"

tiny_synth_ini "$work/t.ini" "$work" model.vocab_size=257 model.max_seq_len=32 \
  model.position_embedding=alibi data.paths="$work/mtf" data.seq_len=32 data.mtf=true \
  data.pad_token=0 train.steps=30 optim.lr=3e-3 optim.warmup_steps=3
"$train" "$work/t.ini" > "$work/a.log" 2>&1 || fail "training failed: $(tail -3 "$work/a.log")"
grep -q 'data (MTF): .*300 input/target pairs; train \[0, 291).*packed rows of 33 tokens' \
  "$work/a.log" || fail "no MTF data line: $(grep 'data' "$work/a.log" | head -3)"
first=$(losses "$work/a.log" | head -1 | awk '{print $NF}')
last=$(losses "$work/a.log" | tail -5 | awk '{s += $NF} END {print s / NR}')
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.6 * f) }' \
  || fail "loss did not fall: first $first, mean of the last 5 $last"

"$train" "$work/t.ini" > "$work/b.log" 2>&1 || fail "rerun failed: $(tail -3 "$work/b.log")"
diff <(losses "$work/a.log") <(losses "$work/b.log") || fail "a rerun gave other losses"

# A targets dataset of another corpus (fewer documents) under the same prefix.
head -100 "$work/pairs.jsonl" > "$work/short.jsonl"
"$preprocess" --no-progress --input "$work/short.jsonl" --json-keys targets --tokenizer-type Byte \
  --output-prefix "$work/bad" > /dev/null 2>&1
cp "$work/mtf_inputs_document.bin" "$work/bad_inputs_document.bin"
cp "$work/mtf_inputs_document.idx" "$work/bad_inputs_document.idx"
rc=0
"$train" "$work/t.ini" data.paths="$work/bad" > "$work/bad.log" 2>&1 || rc=$?
((rc != 0)) || fail "unequal pairs were accepted"
grep -q 'bad_inputs_document holds 300 sequences and .*bad_targets_document 100' "$work/bad.log" \
  || fail "no pair-count error: $(tail -3 "$work/bad.log")"
rc=0
"$train" "$work/t.ini" model.position_embedding=learned > "$work/pos.log" 2>&1 || rc=$?
((rc != 0)) || fail "mtf with learned positions was accepted"
grep -q '\[data\] mtf.*alibi or rotary' "$work/pos.log" \
  || fail "no position error: $(tail -3 "$work/pos.log")"
echo PASS
