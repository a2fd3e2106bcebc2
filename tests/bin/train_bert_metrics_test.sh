#!/usr/bin/env bash
# BERT's loss parts end to end on the CPU (ctest train_bert_metrics_test): the tiny BERT of
# tests/bin/fixtures/tiny_bert.ini trains 4 steps (log_interval 1, evaluation every 2 steps)
# with [log] tensorboard_dir; then
#   1. every step line and validation line shows "loss L | lm loss A | sop loss B" with
#      A + B = L (4 decimals);
#   2. the event file (read by scripts/gpu/tensorboard_check.py's minimal reader) holds
#      Megatron's "lm-loss-training/lm loss" = A and "lm-loss-training/sop loss" = B and
#      anvil's "lm-loss-training/total loss" = L at every step, and the validation parts at
#      steps 0, 2, 4, equal to the text log;
#   3. with bert_binary_head = false: "lm loss" only, equal to the loss, no "sop loss".
# usage: train_bert_metrics_test.sh BUILD/bin/train   (from the repository root)
set -euo pipefail
train=$1
check=scripts/gpu/tensorboard_check.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
args=(tests/bin/fixtures/tiny_bert.ini "data.cache_dir=$work/cache" train.steps=4
  train.eval_interval=2 train.eval_iters=1 "log.tensorboard_dir=$work/tb")
"$train" "${args[@]}" > "$work/a.log" 2>&1 || fail "run failed: $(tail -3 "$work/a.log")"
# scalars TAG: "STEP VALUE" lines of one tag.
scalars() {
  python3 "$check" --reader minimal --tag "$1" "$work/tb" 2> /dev/null | cut -f2,3 | tr '\t' ' '
}
value() { awk -v s="$1" '$1 == s { print $2; found = 1 } END { exit !found }'; }
near() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; exit !(d <= 1.5e-4 && -d <= 1.5e-4) }'; }

n='\([0-9.]*\)'
parts="lm loss $n | sop loss $n"
steps=0
while read -r s l a b; do
  near "$(awk -v a="$a" -v b="$b" 'BEGIN { print a + b }')" "$l" || fail "step $s: $a + $b != $l"
  near "$(scalars "lm-loss-training/lm loss" | value "$s")" "$a" || fail "step $s: TB lm loss"
  near "$(scalars "lm-loss-training/sop loss" | value "$s")" "$b" || fail "step $s: TB sop loss"
  near "$(scalars "lm-loss-training/total loss" | value "$s")" "$l" || fail "step $s: TB total"
  steps=$((steps + 1))
done < <(sed -n "s/.*step $n\/4 | loss $n | $parts | lr.*/\1 \2 \3 \4/p" "$work/a.log")
[[ $steps == 4 ]] || fail "$steps step lines with loss parts: $(grep 'step' "$work/a.log")"

# Validation: the first line at each evaluated step (step 4 is evaluated twice, as Megatron).
evals=0
while read -r s l a b; do
  near "$(awk -v a="$a" -v b="$b" 'BEGIN { print a + b }')" "$l" || fail "val $s: $a + $b != $l"
  near "$(scalars "lm-loss-validation/valid/lm loss validation" | value "$s" | head -1)" "$a" ||
    fail "val step $s: TB lm loss validation"
  near "$(scalars "lm-loss-validation/valid/sop loss validation" | value "$s" | head -1)" "$b" ||
    fail "val step $s: TB sop loss validation"
  evals=$((evals + 1))
done < <(sed -n "s/.*step *$n\/4 | val loss $n (ppl [0-9.]*) | $parts .*/\1 \2 \3 \4/p" \
  "$work/a.log" | awk '!seen[$1]++')
[[ $evals == 3 ]] || fail "$evals validation steps with loss parts (want 0, 2, 4)"

# 3. No binary head: the loss is the lm loss.
"$train" "${args[@]}" model.bert_binary_head=false train.steps=1 optim.warmup_steps=0 \
  "log.tensorboard_dir=$work/tb1" > "$work/b.log" 2>&1 || fail "$(tail -3 "$work/b.log")"
line=$(grep 'step 1/1 | loss' "$work/b.log") || fail "no step line: $(tail -3 "$work/b.log")"
[[ $line =~ \|\ loss\ ([0-9.]+)\ \|\ lm\ loss\ ([0-9.]+)\ \|\ lr ]] || fail "line: $line"
[[ ${BASH_REMATCH[1]} == "${BASH_REMATCH[2]}" ]] || fail "lm loss is not the loss: $line"
echo "PASS"
