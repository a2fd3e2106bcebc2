#!/usr/bin/env bash
# bin/train with [model] type = t5 and everything the shared trainer gives GPT (ctest
# train_t5_fp16_test): configs/tiny_t5_cpu.ini with train.precision = fp16 (f16 activations on
# the CPU, dynamic loss scaling), a batch ramp-up (rampup_batch_size 4 2 16 towards 8: steps of
# 4, 4, 6, 6, 8, ... samples), skip_iterations and an [eval] section (text perplexity and
# LAMBADA, scored encoder -> decoder: model/tasks/seq2seq_eval.h):
#   1. the uninterrupted 8-step run logs the loss scale, skips the overflowing first steps with
#      the scale kept at the first overflow and halved from the second on (hysteresis 2),
#      follows the ramp-up (the consumed samples in the manifest), logs a data-only step for
#      the skipped range and an [eval] text and lambada line at steps 0, 4 and 8;
#   2. a run stopped at step 4 by exit_interval and resumed logs the uninterrupted run's steps
#      5-8 (loss, lr, grad norm, loss scale) and [eval] lines line for line;
#   3. the manifest holds the scaler's state; the resume starts after the ramp-up's 20 samples.
# The corpus needs the bible-kjv package: skipped (exit 77) without it.
# usage: train_t5_fp16_test.sh BUILD/bin/train BUILD/bin/preprocess
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap '[[ -n ${KEEP:-} ]] || rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
if ! command -v bible >/dev/null 2>&1; then
  echo "SKIP: the demo corpus needs the 'bible' program (apt-get install bible-kjv)"
  exit 77
fi
MODEL=t5 PREPROCESS=$preprocess scripts/prepare-demo-data.sh > "$work/prepare.log" 2>&1 ||
  fail "prepare-demo-data: $(cat "$work/prepare.log")"
config=configs/tiny_t5_cpu.ini

printf 'in the beginning god created the heaven and the earth . and the earth was without form ,
and void ; and darkness was upon the face of the deep .\n' > "$work/text.txt"
printf '{"text": "and god said , let there be light : and there was light"}\n' > "$work/l.jsonl"
printf '{"text": "and god saw the light , that it was good"}\n' >> "$work/l.jsonl"

# 4 + 4 + 6 + 6 + 8 + 8 + 8 + 8 samples over steps 1-8; step 6 only consumes its batch.
run=(train.steps=8 train.log_interval=1 train.eval_interval=4 train.eval_iters=1
  train.device=cpu "data.cache_dir=$work" optim.warmup_steps=2 train.precision=fp16
  train.initial_loss_scale=4194304 train.micro_batch=2 train.global_batch=8
  "train.rampup_batch_size=4 2 16" train.skip_iterations=6-6
  "eval.text=$work/text.txt" eval.text_detokenizer=none eval.text_stride=16
  "eval.lambada=$work/l.jsonl")
"$train" "$config" "${run[@]}" > "$work/whole.log" 2>&1 || fail "8 steps: $(tail -3 "$work/whole.log")"
# "step 3/8 | loss 10.8123 | lr 0.000e+00 | grad norm 5.951 | loss scale 2097152.0" of each step
# (a skipped step: loss nan, grad norm nan; the timing columns dropped).
steps() {
  grep -E 'step +[0-9]+/8 \| loss ' "$1" | sed -E \
    's/.*(step +[0-9]+\/8 \| loss [^|]* \| lr [^|]* \| grad norm [^|]* ).*(\| loss scale [0-9.]+).*/\1\2/'
}
evals() { grep -oE 'step +[0-9]+/8 \| eval (text|lambada) [^|]*' "$1"; }
[[ $(steps "$work/whole.log" | wc -l) == 8 ]] ||
  fail "expected 8 step lines with a loss scale: $(grep 'step ' "$work/whole.log" | head -3)"
grep -q "step 1: grad norm is .*, skipping the update (loss scale 4194304.0 -> 4194304.0)" \
  "$work/whole.log" || fail "step 1 did not overflow keeping the scale: $(grep -m2 'step 1' "$work/whole.log")"
grep -q "step 2: grad norm is .*, skipping the update (loss scale 4194304.0 -> 2097152.0)" \
  "$work/whole.log" || fail "step 2 did not halve the scale"
grep -qE 'step +6/8 .*data only' "$work/whole.log" || fail "step 6 is not a data-only step"
applied=$(steps "$work/whole.log" | grep -vcE 'grad norm (nan|inf)')
[[ $applied -ge 3 ]] || fail "fewer than 3 steps with a finite grad norm: $(steps "$work/whole.log")"
for st in 0 4 8; do
  grep -qE "step +$st/8 \| eval text $work/text.txt: loss [0-9.]+ \| ppl [0-9.]+" "$work/whole.log" ||
    fail "no [eval] text line at step $st: $(grep eval "$work/whole.log")"
  grep -qE "step +$st/8 \| eval lambada $work/l.jsonl: accuracy [0-9.]+ \([0-2]/2\)" \
    "$work/whole.log" || fail "no [eval] lambada line at step $st"
done

"$train" "$config" "${run[@]}" checkpoint.exit_interval=4 "checkpoint.save=$work/ck" \
  > "$work/first.log" 2>&1 || fail "save: $(tail -3 "$work/first.log")"
grep -q "saved checkpoint $work/ck/step_00000004 at step 4" "$work/first.log" ||
  fail "no save at step 4: $(tail -3 "$work/first.log")"
manifest=$work/ck/step_00000004/manifest.json
grep -q '"hysteresis_tracker"' "$manifest" || fail "no grad_scaler state in the manifest"
"$train" "$config" "${run[@]}" "checkpoint.load=$work/ck" > "$work/resumed.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/resumed.log")"
# 4 + 4 + 6 + 6 samples before step 5.
grep -q 'resuming from .*step_00000004: step 4, 20 samples consumed' "$work/resumed.log" ||
  fail "no resume line at step 4 with the ramp-up's 20 samples: $(grep resuming "$work/resumed.log")"
diff <(steps "$work/whole.log" | tail -4) <(steps "$work/resumed.log") ||
  fail "the resumed steps 5-8 differ from the uninterrupted run's"
diff <(evals "$work/whole.log" | grep -E 'step +8/8') <(evals "$work/resumed.log" | grep -E 'step +8/8') ||
  fail "the resumed run's [eval] at step 8 differs from the uninterrupted run's"
echo "t5 fp16 + ramp-up + skip_iterations + [eval]: steps 5-8 resumed from step 4 equal the" \
  "uninterrupted run's"
