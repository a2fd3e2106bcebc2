#!/usr/bin/env bash
# bin/train's [log] tensorboard_dir end to end on the CPU (ctest train_tensorboard_test): the
# event file is read back by scripts/gpu/tensorboard_check.py's minimal reader (its own
# CRC-32C and protobuf decoding, every checksum checked) and compared with the text log:
#   1. configs/tiny_cpu.ini for 4 steps (the bundled test corpus instead of the demo corpus,
#      which CI does not build), log_interval 2, evaluation every 2 steps: "lm-loss-training/
#      lm loss" at every step, the mean of each interval's two equal to the logged loss (4
#      decimals); learning rate and grad norm at the log steps equal to the line's; the
#      validation loss at steps 0, 2, 4 and 4 again (Megatron evaluates after the loop too)
#      equal to the "val loss" lines, in order; "vs samples" and
#      "vs tokens" at step * 4 and step * 4 * 128;
#      named validation groups each under lm-loss-validation/NAME/ (an unnamed set: "valid",
#      as Megatron-DeepSpeed names it), with the losses their log lines show;
#   2. SIGKILL after the step-2 log line (and evaluation): the file still holds steps 1 and 2
#      (flushed at each log interval), every record intact;
#   3. a tensorboard_dir that cannot be a directory, or tensorboard_log_interval 0: exit 1 with
#      an error naming the key (and the path);
#   4. with MPIRUN set: 2 ranks (pp 2): the last rank writes the file, with the losses rank 0
#      logs.
# usage: train_tensorboard_test.sh BUILD/bin/train   (from the repository root; DEVICE=cuda runs
#        it on a GPU)
set -euo pipefail
train=$1
check=scripts/gpu/tensorboard_check.py
work=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill -KILL "$pid" 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# The 4-layer demo model of tiny_cpu.ini on tests/io/fixtures/gpt_index/synth_a (ids < 65535,
# not GPT-2 tokens: no [tokenizer]).
args=(configs/tiny_cpu.ini data.paths=tests/io/fixtures/gpt_index/synth_a model.vocab_size=65535
  tokenizer.type= tokenizer.vocab_file= tokenizer.merge_file=
  data.eod_token=0 data.cache_dir="$work/cache" train.device="${DEVICE:-cpu}" train.steps=4
  optim.warmup_steps=1 train.log_interval=2 train.eval_interval=2 train.eval_iters=1)
# scalars DIR TAG: "STEP VALUE" lines of one tag.
scalars() { python3 "$check" --reader minimal --tag "$2" "$1" | cut -f2,3 | tr '\t' ' '; }
# value STEP: the VALUE of the "STEP VALUE" line on stdin.
value() { awk -v s="$1" '$1 == s { print $2; found = 1 } END { exit !found }'; }
near() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; exit !(d <= t && -d <= t) }'; }

# 1. A full run.
"$train" "${args[@]}" log.tensorboard_dir="$work/tb" > "$work/a.log" 2>&1 \
  || fail "run failed: $(tail -3 "$work/a.log")"
files=("$work"/tb/events.out.tfevents.*)
[[ ${#files[@]} == 1 ]] || fail "expected one event file, got: ${files[*]}"
[[ $(basename "${files[0]}") =~ ^events\.out\.tfevents\.[0-9]{10}\.$(hostname)$ ]] \
  || fail "event file name $(basename "${files[0]}")"
loss=$(scalars "$work/tb" "lm-loss-training/lm loss")
[[ $(echo "$loss" | cut -d' ' -f1 | tr '\n' ' ') == "1 2 3 4 " ]] || fail "lm loss steps: $loss"
for s in 2 4; do
  line=$(grep -E "step +$s/4 \| loss" "$work/a.log") || fail "no log line for step $s"
  logged=$(sed -E 's/.*\| loss ([0-9.]+) .*/\1/' <<< "$line")
  mean=$(awk -v s=$s '$1 == s - 1 || $1 == s { t += $2 } END { printf "%.4f", t / 2 }' <<< "$loss")
  [[ $mean == "$logged" ]] || fail "step $s: mean lm loss $mean, logged $logged"
  lr=$(sed -E 's/.*\| lr ([0-9.e+-]+) .*/\1/' <<< "$line")
  tb_lr=$(scalars "$work/tb" "learning-rate/learning-rate" | value $s)
  [[ $(printf "%.3e" "$tb_lr") == "$lr" ]] || fail "step $s: learning rate $tb_lr, logged $lr"
  norm=$(sed -E 's/.*\| grad norm ([0-9.]+) .*/\1/' <<< "$line")
  tb_norm=$(scalars "$work/tb" "grad-norm/grad-norm" | value $s)
  [[ $(printf "%.3f" "$tb_norm") == "$norm" ]] || fail "step $s: grad norm $tb_norm, logged $norm"
  scalars "$work/tb" "iteration-time/tokens per second" | value $s > /dev/null \
    || fail "no tokens per second at step $s"
done
# The x axes of the "vs" tags: samples = step * global_batch 4, tokens = samples * 128.
for s in 1 2 3 4; do
  v=$(echo "$loss" | value $s)
  [[ $(scalars "$work/tb" "lm-loss-training/lm loss vs samples" | value $((s * 4))) == "$v" ]] \
    || fail "lm loss vs samples at $((s * 4))"
  [[ $(scalars "$work/tb" "lm-loss-training/lm loss vs tokens" | value $((s * 512))) == "$v" ]] \
    || fail "lm loss vs tokens at $((s * 512))"
done
val=$(scalars "$work/tb" "lm-loss-validation/valid/lm loss validation")
ppl=$(scalars "$work/tb" "lm-loss-validation/valid/lm loss validation ppl")
mapfile -t logged_val < <(grep -oE "val loss [0-9.]+ \(ppl" "$work/a.log" | cut -d' ' -f3)
[[ ${#logged_val[@]} == 4 ]] || fail "expected 4 val loss lines, got ${#logged_val[@]}"
mapfile -t val_lines <<< "$val"
mapfile -t ppl_lines <<< "$ppl"
[[ ${#val_lines[@]} == 4 ]] || fail "expected 4 validation events, got: $val"
i=0
for s in 0 2 4 4; do
  read -r vs v <<< "${val_lines[$i]}"
  [[ $vs == "$s" ]] || fail "validation event $i at step $vs, expected $s"
  [[ $(printf "%.4f" "$v") == "${logged_val[$i]}" ]] \
    || fail "step $s: validation loss $v, logged ${logged_val[$i]}"
  # ppl = exp(min(20, loss)), from the double loss: within 1e-5 relative of exp(float32 loss).
  want=$(awk -v v="$v" 'BEGIN { printf "%.6f", exp(v < 20 ? v : 20) }')
  read -r _ p <<< "${ppl_lines[$i]}"
  near "$p" "$want" "$(awk -v w="$want" 'BEGIN { print w * 1e-5 }')" \
    || fail "step $s: validation ppl $p, expected $want"
  i=$((i + 1))
done

# 1b. Named validation groups (valid_weighted_split_paths): each under Megatron-DeepSpeed's
# lm-loss-validation/NAME/ prefix, with the losses logged as "NAME loss".
groups="alpha: 1 0:0.5 tests/io/fixtures/gpt_index/synth_a; beta: 1 0.5:1 tests/io/fixtures/gpt_index/synth_a"
"$train" "${args[@]}" train.steps=2 data.valid_weighted_split_paths="$groups" \
  log.tensorboard_dir="$work/groups" > "$work/g.log" 2>&1 || fail "groups run: $(tail -3 "$work/g.log")"
for name in alpha beta; do
  mapfile -t logged < <(grep -oE "$name loss [0-9.]+ \(ppl" "$work/g.log" | cut -d' ' -f3)
  mapfile -t events < <(scalars "$work/groups" "lm-loss-validation/$name/lm loss validation")
  [[ ${#logged[@]} -ge 2 && ${#events[@]} == "${#logged[@]}" ]] \
    || fail "$name: ${#events[@]} events for ${#logged[@]} logged evaluations"
  for i in "${!logged[@]}"; do
    read -r _ v <<< "${events[$i]}"
    [[ $(printf "%.4f" "$v") == "${logged[$i]}" ]] || fail "$name evaluation $i: $v, logged ${logged[$i]}"
  done
done
[[ -z $(scalars "$work/groups" "lm-loss-validation/valid/lm loss validation") ]] \
  || fail "an unnamed validation set was written next to the groups"

# 2. SIGKILL after the step-2 log line: steps 1 and 2 were flushed.
"$train" "${args[@]}" train.steps=200 log.tensorboard_dir="$work/killed" > "$work/k.log" 2>&1 &
pid=$!
# (The step-2 evaluation's line comes after the interval's flush.)
for _ in $(seq 1200); do grep -qE "step +2/200 \| val loss" "$work/k.log" || ! kill -0 "$pid" \
  && break; sleep 0.1; done
kill -KILL "$pid"
{ wait "$pid"; } 2> /dev/null && fail "the killed run exited 0"
pid=
got=$(scalars "$work/killed" "lm-loss-training/lm loss" | cut -d' ' -f1 | head -2 | tr '\n' ' ')
[[ $got == "1 2 " ]] || fail "after SIGKILL the event file holds lm loss steps '$got'"

# 3. Bad settings: clear errors.
touch "$work/plain"
for dir in "$work/plain" "$work/plain/sub"; do
  if "$train" "${args[@]}" log.tensorboard_dir="$dir" > "$work/bad.log" 2>&1; then
    fail "tensorboard_dir $dir accepted"
  fi
  grep -q "error: \[log\] tensorboard_dir: TensorBoard .*$dir" "$work/bad.log" \
    || fail "unclear error for $dir: $(cat "$work/bad.log")"
done
if "$train" "${args[@]}" log.tensorboard_log_interval=0 > "$work/bad.log" 2>&1; then
  fail "tensorboard_log_interval 0 accepted"
fi
grep -q "\[log\] tensorboard_log_interval: must be > 0" "$work/bad.log" \
  || fail "unclear error: $(cat "$work/bad.log")"

# 4. Two ranks, two pipeline stages: rank 1 writes the losses rank 0 logs.
if [[ -n ${MPIRUN:-} ]]; then
  $MPIRUN -np 2 "$train" "${args[@]}" parallel.pp=2 train.eval_iters=0 \
    log.tensorboard_dir="$work/pp2" > "$work/pp2.log" 2>&1 \
    || fail "pp2 run failed: $(tail -3 "$work/pp2.log")"
  grep -q "TensorBoard events: $work/pp2/events.out.tfevents.\* (rank 1)" "$work/pp2.log" \
    || fail "no TensorBoard line naming rank 1"
  pp_loss=$(scalars "$work/pp2" "lm-loss-training/lm loss")
  for s in 2 4; do
    logged=$(grep -E "step +$s/4 \| loss" "$work/pp2.log" | sed -E 's/.*\| loss ([0-9.]+) .*/\1/')
    mean=$(awk -v s=$s '$1 == s - 1 || $1 == s { t += $2 } END { printf "%.4f", t / 2 }' \
      <<< "$pp_loss")
    [[ $mean == "$logged" ]] || fail "pp2 step $s: mean lm loss $mean, logged $logged"
  done
fi
echo "train_tensorboard_test: OK"
