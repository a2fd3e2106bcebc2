#!/usr/bin/env bash
# bin/finetune end to end on the CPU (ctest finetune_bin_test): the King James Bible testament
# task (scripts/make-testament-task.sh: balanced, chance 0.5) with a byte-level GPT from
# scratch for 200 steps; the dev accuracy after training must be above chance (> 0.54 on 200
# dev verses; this configuration reaches 0.575 here, a weak classifier: 64 bytes of a verse and
# a 2-layer byte-level model trained from nothing), the loss must fall, the result
# is saved and bin/eval reads it. The same with head = linear (128 bytes per verse) must reach
# > 0.6. Bad config: labels that are not one token, a missing
# train_data, a bad JSONL line: exit 1 with a message. Exits 77 (skipped) without `bible`.
# usage: finetune_test.sh BUILD/bin/finetune BUILD/bin/eval (from the repository root)
set -euo pipefail
finetune=$1
eval_bin=$2
if ! command -v bible >/dev/null 2>&1; then
  echo "finetune_test: skipped: the 'bible' program (bible-kjv) is missing"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
bash scripts/make-testament-task.sh "$work" 1000 100 > /dev/null
cat > "$work/ft.ini" <<INI
[model]
vocab_size = 257
max_seq_len = 64
d_model = 64
n_heads = 4
n_layers = 2
[data]
seq_len = 64
eod_token = 256
[tokenizer]
type = Byte
[finetune]
train_data = $work/testament_train.jsonl
dev_data = $work/testament_dev.jsonl
labels = O,N
[train]
micro_batch = 32
global_batch = 32
steps = 200
device = cpu
eval_interval = 50
log_interval = 50
[optim]
lr = 6e-3
warmup_steps = 10
INI
"$finetune" "$work/ft.ini" checkpoint.save="$work/ck" > "$work/ft.log" 2>&1 \
  || fail "finetune: $(tail -3 "$work/ft.log")"
acc() { grep -oE "step +$1/200 \| dev accuracy [0-9.]+" "$work/ft.log" | awk '{print $NF}'; }
[[ -n $(acc 0) && -n $(acc 200) ]] || fail "no dev accuracy lines: $(cat "$work/ft.log")"
awk -v a="$(acc 200)" 'BEGIN { exit !(a > 0.54) }' \
  || fail "dev accuracy $(acc 200) after training is not above chance: $(grep dev "$work/ft.log")"
first=$(grep -oE 'step +50/200 \| loss [0-9.]+' "$work/ft.log" | awk '{print $NF}')
last=$(grep -oE 'step +200/200 \| loss [0-9.]+' "$work/ft.log" | awk '{print $NF}')
awk -v a="$last" -v b="$first" 'BEGIN { exit !(a < b) }' || fail "loss $first -> $last"
grep -q "saved $work/ck/step_00000200" "$work/ft.log" || fail "not saved"
printf '{"text": "In the beginning God created the heaven and the earth. O"}\n' > "$work/l.jsonl"
"$eval_bin" "$work/ck" --lambada "$work/l.jsonl" > "$work/eval.log" 2>&1 \
  || fail "bin/eval on the result: $(cat "$work/eval.log")"

# The linear head (classifier.weight/bias on the last token's final hidden state) on the same
# task: 128 bytes per verse, lr 1e-3; reaches 0.66 here (chance 0.5, 200 dev verses).
"$finetune" "$work/ft.ini" finetune.head=linear data.seq_len=128 model.max_seq_len=128 \
  optim.lr=1e-3 > "$work/linear.log" 2>&1 || fail "finetune head=linear: $(tail -3 "$work/linear.log")"
lacc=$(grep -oE "step +200/200 \| dev accuracy [0-9.]+" "$work/linear.log" | awk '{print $NF}')
awk -v a="$lacc" 'BEGIN { exit !(a > 0.6) }' \
  || fail "head=linear: dev accuracy '$lacc' after training is not well above chance: $(grep dev "$work/linear.log")"

expect_error() {  # PATTERN ARGS...
  local pattern=$1 rc=0
  shift
  "$finetune" "$work/ft.ini" "$@" > "$work/err.log" 2>&1 || rc=$?
  ((rc == 1)) || fail "$*: exit status $rc, expected 1: $(cat "$work/err.log")"
  grep -qE -e "$pattern" "$work/err.log" || fail "$*: no '$pattern' in: $(cat "$work/err.log")"
}
expect_error '"Old" is 3 tokens of the Byte tokenizer' finetune.labels=Old,New
expect_error "train_data is not set" finetune.train_data=
expect_error "labels: needs at least two distinct" finetune.labels=O,O
printf '{"text": "x", "label": 0}\n{"text": "y"}\n' > "$work/bad.jsonl"
expect_error "bad.jsonl:2: no field" finetune.train_data="$work/bad.jsonl"
printf '{"text": "x", "label": 2}\n' > "$work/bad2.jsonl"
expect_error "example 0: label 2 outside 0 .. 1" finetune.train_data="$work/bad2.jsonl"
echo "finetune_test: all passed (dev accuracy $(acc 0) -> $(acc 200); linear head $lacc)"
