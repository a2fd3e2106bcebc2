#!/usr/bin/env bash
# bin/train with [model] type = bert end to end (ctest train_bert_test): configs/tiny_bert_cpu.ini
# on the sentence-split demo corpus (MODEL=bert scripts/prepare-demo-data.sh; needs the
# bible-kjv package: skipped, exit 77, without it) runs 20 steps and its validation loss (masked
# LM + sentence order) falls by more than 2 nats from the untrained ln(30524) + ln 2 = 11.0;
# then a 2-step run saved at step 2 and resumed to step 3 gives the uninterrupted 3-step run's
# last training loss (checkpoints keep the BERT heads).
# usage: train_bert_test.sh BUILD/bin/train BUILD/bin/preprocess
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
if ! command -v bible >/dev/null 2>&1; then
  echo "SKIP: the demo corpus needs the 'bible' program (apt-get install bible-kjv)"
  exit 77
fi
MODEL=bert PREPROCESS=$preprocess scripts/prepare-demo-data.sh > "$work/prepare.log" 2>&1 ||
  fail "prepare-demo-data: $(cat "$work/prepare.log")"
config=configs/tiny_bert_cpu.ini
"$train" "$config" train.steps=20 optim.warmup_steps=3 train.eval_interval=20 \
  train.eval_iters=4 train.log_interval=10 train.device=cpu "data.cache_dir=$work" \
  > "$work/train.log" 2>&1 || fail "$config: $(tail -5 "$work/train.log")"
grep -q "model: BERT 4 layers" "$work/train.log" || fail "no BERT model line"
# done: ... | val loss 11.0459 (step 0) -> 8.1234 (ppl ...)
read -r before after < <(sed -n 's/.*val loss \([0-9.]*\) (step 0) -> \([0-9.]*\).*/\1 \2/p' \
  "$work/train.log" | tail -1) || fail "no validation losses in $(tail -3 "$work/train.log")"
echo "$config: val loss $before -> $after"
awk -v b="$before" 'BEGIN { exit !(b > 10.5 && b < 11.5) }' ||
  fail "the untrained validation loss $before is not near ln(30524) + ln 2 = 11.0"
awk -v b="$before" -v a="$after" 'BEGIN { exit !(a < b - 2.0) }' ||
  fail "the validation loss fell from $before to $after only (want more than 2)"

short=(train.eval_iters=0 train.log_interval=1 train.device=cpu optim.warmup_steps=1
  optim.decay_steps=3 "data.cache_dir=$work")
loss_at() { sed -n "s/.*step $1\/$2 | loss \([0-9.]*\) .*/\1/p" "$3" | tail -1; }
"$train" "$config" train.steps=3 "${short[@]}" > "$work/full.log" 2>&1 ||
  fail "3 steps: $(tail -3 "$work/full.log")"
"$train" "$config" train.steps=2 "${short[@]}" "checkpoint.save=$work/ck" > "$work/a.log" 2>&1 ||
  fail "2 steps: $(tail -3 "$work/a.log")"
"$train" "$config" train.steps=3 "${short[@]}" "checkpoint.load=$work/ck" > "$work/b.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/b.log")"
want=$(loss_at 3 3 "$work/full.log")
got=$(loss_at 3 3 "$work/b.log")
[[ -n "$want" && "$want" == "$got" ]] || fail "resumed step 3 loss '$got', uninterrupted '$want'"
echo "resumed step 3 loss $got = uninterrupted"
echo PASS
