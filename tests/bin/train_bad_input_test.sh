#!/usr/bin/env bash
# bin/train refuses bad sizes and stops diverging runs (ctest train_bad_input_test, CPU): each
# case must exit non-zero with one error line naming the key(s) and the limit, promptly
# (timeout 60 s: a size that slips through hangs, allocates or wraps instead):
#   1. size overflow: max_seq_len 2^58 and INT64_MAX, d_model 2^62, n_layers 4e12, steps
#      INT64_MAX, a micro-batch whose activations exceed 2^44 elements;
#   2. a memory plan larger than the host's MemAvailable (and accepted, dry run only, with
#      [train] check_memory = false); with MPIRUN set (mpirun and its flags), two ranks whose
#      plans fit alone but not together on this host;
#   3. an absurd [optim] lr; a run whose loss goes NaN stops after max_skipped_steps (on one
#      rank, and with MPIRUN on two data-parallel ranks);
#   4. a validation set used up by a resumed run's extra evaluations: [data] valid_exhausted =
#      error stops the run naming the set, wrap (the default) warns once and goes on.
# usage: train_bad_input_test.sh BUILD/bin/train   (from the repository root)
set -euo pipefail
train=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" train.steps=20 optim.warmup_steps=0
fail() { echo "FAIL: $*"; exit 1; }

# refused PATTERN ARGS...: bin/train with ARGS exits 1 within 60 s, printing PATTERN.
refused() {
  local pattern=$1 rc=0
  shift
  timeout 60 "$train" "$work/t.ini" "$@" > "$work/out.log" 2>&1 || rc=$?
  [[ $rc == 1 ]] || fail "$* exited $rc, expected 1: $(tail -3 "$work/out.log")"
  grep -qF -- "$pattern" "$work/out.log" || fail "$*: no '$pattern' in: $(tail -3 "$work/out.log")"
}

# 1. Size arithmetic.
refused "[model] max_seq_len: 288230376151711744 exceeds the limit 2^31 - 1" \
  model.max_seq_len=288230376151711744 --dry-run
refused "[model] max_seq_len: 9223372036854775807 exceeds the limit 2^31 - 1" \
  model.max_seq_len=9223372036854775807 data.seq_len=9223372036854775807
refused "[model] d_model: 4611686018427387904 exceeds the limit 2^31 - 1" \
  model.d_model=4611686018427387904 model.n_heads=1 --dry-run
refused "[model] n_layers: 4000000000000 exceeds the limit 2^16" \
  model.n_layers=4000000000000 --dry-run
refused "[train] steps: 9223372036854775807 exceeds the limit 2^40" \
  train.steps=9223372036854775807
refused "exceeds the limit 2^44 = 17592186044416 elements of one tensor" \
  train.micro_batch=1073741824 train.global_batch=1073741824 --dry-run

# 2. The memory plan against the host's memory (a 13 T-parameter model: ~200 TB).
big=(model.d_model=16384 model.n_heads=128 model.n_layers=4096)
refused "bytes) are available (MemAvailable of /proc/meminfo" "${big[@]}" --dry-run
timeout 60 "$train" "$work/t.ini" "${big[@]}" train.check_memory=false --dry-run \
  > "$work/out.log" 2>&1 || fail "check_memory = false still refused: $(tail -3 "$work/out.log")"
if [[ -n ${MPIRUN:-} ]]; then
  # Two CPU ranks on this host, each planning about 0.65 of MemAvailable (d_model 1024: 201 MB
  # per layer, 1.07 GB of embedding): each fits alone, together they do not.
  layers=$(awk '/MemAvailable/ {l = int((0.65 * $2 * 1024 - 1.07e9) / 2.01e8); print (l < 1 ? 1 : l)}' \
    /proc/meminfo)
  rc=0
  timeout 60 $MPIRUN -np 2 "$train" "$work/t.ini" model.d_model=1024 model.n_heads=16 \
    model.n_layers="$layers" --dry-run > "$work/out.log" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "two ranks of $layers layers each were not refused"
  grep -q "the memory plans of the 2 ranks on this host need" "$work/out.log" \
    || fail "no host memory message: $(grep error "$work/out.log" | head -2)"
fi

# 3. Learning rate and divergence (init_std 1e30 overflows the attention scores: NaN at once).
refused "[optim] lr: 1e+300 exceeds the limit 10" optim.lr=1e300
refused "the run diverged: 3 consecutive steps up to step 3 were skipped" \
  model.init_std=1e30 train.max_skipped_steps=3
grep -q "step 3: grad norm is [a-z]*, skipping the update" "$work/out.log" || fail "no skip warnings"
grep -q "step 4:" "$work/out.log" && fail "the diverged run went on after step 3"
if [[ -n ${MPIRUN:-} ]]; then
  # Two DP ranks agree on the global gradient norm: both stop at step 3, rank 0 reports.
  rc=0
  timeout 60 $MPIRUN -np 2 "$train" "$work/t.ini" model.init_std=1e30 train.max_skipped_steps=3 \
    > "$work/out.log" 2>&1 || rc=$?
  [[ $rc != 0 ]] || fail "the diverged 2-rank run exited 0"
  grep -q "error (rank 0 of 2): the run diverged: 3 consecutive steps" "$work/out.log" \
    || fail "2 ranks: no divergence message: $(grep error "$work/out.log" | head -2)"
fi

# 4. A validation set used up: a run saved at step 4 (evaluations at 4 and at the end: the two
# its set was sized for) resumed for 8 steps evaluates twice more over a set sized for three.
# valid_exhausted = error stops it naming the set (Megatron-DeepSpeed's StopIteration); wrap
# (the default) starts the set over with one warning.
ev=(train.eval_interval=4 train.eval_iters=2)
"$train" "$work/t.ini" "${ev[@]}" train.steps=4 checkpoint.save="$work/ev" > "$work/ev.log" 2>&1 \
  || fail "evaluating run: $(tail -3 "$work/ev.log")"
refused "the val split's 27 samples are used up (sample 27 asked for); [data] valid_exhausted" \
  "${ev[@]}" train.steps=8 checkpoint.load="$work/ev" checkpoint.override_lr_scheduler=true \
  data.valid_exhausted=error
grep -qE "step +8/8 \| loss" "$work/out.log" || fail "the error came before step 8's evaluation"
"$train" "$work/t.ini" "${ev[@]}" train.steps=8 checkpoint.load="$work/ev" \
  checkpoint.override_lr_scheduler=true > "$work/wrap.log" 2>&1 || fail "wrap: $(tail -3 "$work/wrap.log")"
[[ $(grep -c "the val split's 27 samples are used up (sample 27 asked for): wrapping around" \
  "$work/wrap.log") == 1 ]] || fail "no single wrap warning: $(grep -i warn "$work/wrap.log")"
echo "PASS"
