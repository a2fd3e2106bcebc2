#!/usr/bin/env bash
# bin/train's [train] precision and loss scaling end to end (ctest train_precision_test):
#   1. fp16 on the CPU with Megatron's defaults (initial scale 2^32, hysteresis 2): the first
#      steps overflow and are skipped, the skip warnings show the scale kept at the first
#      overflow and halved from the second on, the log lines show "loss scale", and
#      TensorBoard's loss-scale/loss-scale holds the scale after each step's update;
#   2. stopped at step 12 by exit_interval and resumed: the checkpoint's manifest holds the
#      grad_scaler state and the resumed run logs the uninterrupted run's losses and scales;
#   3. bad values are refused naming the key;
#   4. on a GPU (skipped without one): fp16 and fp32 on CUDA train, fp32's losses equal the CPU
#      f32 run's to 1e-3, fp16's end within 10% of the CPU fp16 run's, and fp16 from a scale
#      that never overflows (2^16) ends within 5% of bf16's.
# usage: train_precision_test.sh BUILD/bin/train   (from the repository root)
set -euo pipefail
train=$1
check=scripts/gpu/tensorboard_check.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" model.hidden_dropout=0.1 model.attention_dropout=0.1 \
  train.steps=24 train.precision=fp16 train.log_interval=4
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.na-]+ .*loss scale [0-9.]+' "$1" |
  sed -E 's/ +/ /g; s/\| lr.*\| loss scale/| loss scale/'; }

# 1. Overflow skips and the scale sequence.
"$train" "$work/t.ini" log.tensorboard_dir="$work/tb" > "$work/full.log" 2>&1 ||
  fail "fp16 run failed: $(tail -3 "$work/full.log")"
grep -q "step 1: grad norm is .*, skipping the update (loss scale 4294967296.0 -> 4294967296.0)" \
  "$work/full.log" || fail "step 1 did not overflow keeping the scale: $(grep -m3 step "$work/full.log")"
grep -q "step 2: grad norm is .*, skipping the update (loss scale 4294967296.0 -> 2147483648.0)" \
  "$work/full.log" || fail "step 2 did not halve the scale"
grep -qE "step +4/24 \| .* \| loss scale 536870912.0 \| skipped 4" "$work/full.log" ||
  fail "no 'loss scale' / 'skipped' in the step-4 log line: $(grep -m1 'step  4' "$work/full.log")"
skipped=$(sed -n 's/.*done: 24 steps (\([0-9]*\) skipped).*/\1/p' "$work/full.log")
[[ -n $skipped && $skipped -ge 8 && $skipped -lt 24 ]] ||
  fail "expected a run of overflow-skipped steps then training, got '$skipped' skipped"
tb=$(python3 "$check" --reader minimal --tag "loss-scale/loss-scale" "$work/tb" 2>/dev/null |
  cut -f2,3 | tr '\t' ' ')
# at STEP VALUE: the scalar of STEP equals VALUE.
at() { awk -v s="$1" -v v="$2" '$1 == s && $2 == v { f = 1 } END { exit !f }' <<< "$tb"; }
at 1 4294967296 || fail "loss-scale at step 1: $tb"
at 2 2147483648 || fail "loss-scale at step 2: $tb"
last=$(grep -oE 'loss scale [0-9.]+' "$work/full.log" | tail -1 | awk '{ print $3 }')
at 24 "$last" || fail "loss-scale at step 24 differs from the log's $last: $tb"

# 2. Stop at 12, resume: the scaler state comes back from the manifest.
"$train" "$work/t.ini" checkpoint.save="$work/ck" checkpoint.exit_interval=12 > "$work/a.log" 2>&1 ||
  fail "exit_interval run failed: $(tail -3 "$work/a.log")"
grep -q '"grad_scaler"' "$work/ck/step_00000012/manifest.json" || fail "no grad_scaler in the manifest"
grep -q '"hysteresis_tracker"' "$work/ck/step_00000012/manifest.json" ||
  fail "no hysteresis_tracker in the manifest"
"$train" "$work/t.ini" checkpoint.load="$work/ck" > "$work/b.log" 2>&1 ||
  fail "resume failed: $(tail -3 "$work/b.log")"
diff <(losses "$work/full.log" | tail -3) <(losses "$work/b.log") ||
  fail "resumed losses or scales differ from the uninterrupted run"

# 3. Bad values.
for bad in train.precision=fp8 train.hysteresis=0 train.loss_scale_window=0 \
  train.min_loss_scale=0 train.loss_scale=-2; do
  key=${bad%%=*}
  if "$train" "$work/t.ini" "$bad" > "$work/bad.log" 2>&1; then fail "$bad was accepted"; fi
  grep -q "\[train\] ${key#train.}" "$work/bad.log" || fail "$bad: $(tail -2 "$work/bad.log")"
done

# 4. CUDA.
if [[ $("$train" "$work/t.ini" train.device=auto --print-device) != cuda ]]; then
  echo "PASS (CPU parts; no GPU: CUDA fp16/fp32 runs skipped)"
  exit 0
fi
final() { sed -n 's/.*train loss [0-9.]* -> \([0-9.]*\).*/\1/p' "$1"; }
"$train" "$work/t.ini" train.precision=fp32 train.log_interval=1 > "$work/c32.log" 2>&1 ||
  fail "CPU fp32 run failed: $(tail -3 "$work/c32.log")"
"$train" "$work/t.ini" train.device=cuda train.precision=fp32 train.log_interval=1 \
  > "$work/g32.log" 2>&1 || fail "CUDA fp32 run failed: $(tail -3 "$work/g32.log")"
paste <(grep -oE '\| loss [0-9.]+' "$work/c32.log" | awk '{ print $3 }') \
  <(grep -oE '\| loss [0-9.]+' "$work/g32.log" | awk '{ print $3 }') |
  awk '{ d = $1 - $2; if (d > 1e-3 || -d > 1e-3) { print "step " NR ": " $0; bad = 1 } }
       END { exit bad }' || fail "CUDA fp32 losses differ from the CPU's"
"$train" "$work/t.ini" train.device=cuda > "$work/g16.log" 2>&1 ||
  fail "CUDA fp16 run failed: $(tail -3 "$work/g16.log")"
grep -q "loss scale" "$work/g16.log" || fail "no loss scale in the CUDA fp16 log"
awk -v a="$(final "$work/g16.log")" -v b="$(final "$work/full.log")" \
  'BEGIN { d = a - b; exit !(a > 0 && d < 0.1 * b && -d < 0.1 * b) }' ||
  fail "CUDA fp16 final loss $(final "$work/g16.log") vs CPU $(final "$work/full.log")"
# fp16 from a scale that does not overflow follows bf16's curve (issue 14's check).
"$train" "$work/t.ini" train.device=cuda train.initial_loss_scale=65536 > "$work/g16b.log" 2>&1 ||
  fail "CUDA fp16 (2^16) run failed: $(tail -3 "$work/g16b.log")"
"$train" "$work/t.ini" train.device=cuda train.precision=bf16 > "$work/gbf.log" 2>&1 ||
  fail "CUDA bf16 run failed: $(tail -3 "$work/gbf.log")"
grep -q "done: 24 steps (0 skipped)" "$work/g16b.log" || fail "fp16 from 2^16 skipped steps"
awk -v a="$(final "$work/g16b.log")" -v b="$(final "$work/gbf.log")" \
  'BEGIN { d = a - b; exit !(a > 0 && d < 0.05 * b && -d < 0.05 * b) }' ||
  fail "CUDA fp16 final loss $(final "$work/g16b.log") vs bf16 $(final "$work/gbf.log")"
echo PASS
