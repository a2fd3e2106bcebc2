#!/usr/bin/env bash
# [parallel] offload_optimizer end to end on the CPU (ctest train_offload_test), where the host
# path is the real one (host AdamW on the offload's own master / m / v, copies in and out):
#   1. one rank: a tiny GPT trains 4 steps with and without offload; the logged losses and grad
#      norms are equal and the saved checkpoints' tensor files (masters, Adam moments) are
#      byte-identical; resuming the offloaded run from its step-2 checkpoint gives the same
#      step-4 tensors again (checkpoint load into the host state); the same with an fp16
#      compute copy and dynamic loss scaling;
#   2. with `dp` (ctest train_offload_dp_test; $MPIRUN, 2 ranks) instead: DP2 with ZeRO-1 and
#      with ZeRO-2, each with and without offload: the same losses and byte-identical per-rank
#      tensor files;
#   3. --dry-run shows the offloaded state ("offload (host)") and no "master" / "optimizer"
#      category; zero_stage 3 with offload is refused naming the key.
# usage: train_offload_test.sh BUILD/bin/train        (from the repository root)
#        MPIRUN="mpirun ..." train_offload_test.sh BUILD/bin/train dp
set -euo pipefail
train=$1
mode=${2:-}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/tiny_synth_ini.sh"
ini() {  # ini NAME OFFLOAD ZERO_STAGE STEPS [SECTION.KEY=VALUE...]: the config on stdout
  tiny_synth_ini "$work/.$1.ini" "$work" train.steps="$4" optim.warmup_steps=1 \
    optim.weight_decay=0.1 parallel.offload_optimizer="$2" parallel.offload_threads=2 \
    parallel.zero_stage="$3" checkpoint.save="$work/$1" "${@:5}"
  cat "$work/.$1.ini"
}
steps() { grep -oE 'step [0-9]+/[0-9]+ \| loss [0-9.]+.*grad norm [0-9.e+-]+' "$1"; }
same_run() {  # same_run A B: equal step lines and byte-identical tensor files at step 4
  [[ $(steps "$work/$1.log" | wc -l) == 4 ]] || { cat "$work/$1.log"; fail "$1: not 4 steps"; }
  [[ "$(steps "$work/$1.log")" == "$(steps "$work/$2.log")" ]] \
    || { steps "$work/$1.log"; steps "$work/$2.log"; fail "$1 and $2 log different steps"; }
  local n=0
  for f in "$work/$1/step_00000004/"rank_*.safetensors; do
    cmp "$f" "$work/$2/step_00000004/$(basename "$f")" || fail "$1 and $2: $(basename "$f") differ"
    n=$((n + 1))
  done
  [[ $n -gt 0 ]] || fail "$1: no tensor files"
}
run() {  # run NAME OFFLOAD ZERO NP [STEPS] [SECTION.KEY=VALUE...]
  ini "$1" "$2" "$3" "${5:-4}" "${@:6}" > "$work/$1.ini"
  if [[ $4 == 1 ]]; then
    "$train" "$work/$1.ini" > "$work/$1.log" 2>&1 || { cat "$work/$1.log"; fail "$1"; }
  else
    $MPIRUN -np "$4" "$train" "$work/$1.ini" > "$work/$1.log" 2>&1 \
      || { cat "$work/$1.log"; fail "$1"; }
  fi
  if [[ $2 == true ]]; then
    grep -q "optimizer offloaded to the host" "$work/$1.log" || fail "$1: offload not on"
  fi
}

if [[ $mode == dp ]]; then
  [[ -n ${MPIRUN:-} ]] || fail "dp needs MPIRUN"
  for z in 1 2; do
    run "dp_z$z" false $z 2
    run "dp_z${z}_off" true $z 2
    same_run "dp_z$z" "dp_z${z}_off"
  done
  echo "train_offload_dp_test: OK"
  exit 0
fi

run plain false 0 1
run off true 0 1
same_run plain off
# fp16 compute copy with dynamic loss scaling: the host step unscales and writes f16 back.
fp16=(train.precision=fp16 train.initial_loss_scale=1024)
run plain16 false 0 1 4 "${fp16[@]}"
run off16 true 0 1 4 "${fp16[@]}"
same_run plain16 off16
grep -q "f16 parameters" "$work/off16.log" || fail "off16: not fp16"
# The offloaded run saved and stopped at step 2 ([checkpoint] exit_interval), then resumed.
run half true 0 1 4 checkpoint.exit_interval=2
run resumed true 0 1 4 checkpoint.load="$work/half"
for f in "$work/plain/step_00000004/"rank_*.safetensors; do
  cmp "$f" "$work/resumed/step_00000004/$(basename "$f")" || fail "resumed offload run differs"
done
grep -q "resuming from $work/half/step_00000002" "$work/resumed.log" \
  || { cat "$work/resumed.log"; fail "no resume"; }

ini dry true 1 4 > "$work/dry.ini"
"$train" "$work/dry.ini" --dry-run > "$work/dry.log" 2>&1 || { cat "$work/dry.log"; fail "dry run"; }
grep -q "offload (host)" "$work/dry.log" || { cat "$work/dry.log"; fail "dry run: no offload"; }
if grep -qE "^ *(master|optimizer) " "$work/dry.log"; then
  cat "$work/dry.log"
  fail "dry run: device master / optimizer with offload"
fi
ini z3 true 3 4 > "$work/z3.ini"
if "$train" "$work/z3.ini" parallel.dp=1 --dry-run > "$work/z3.log" 2>&1; then
  fail "offload with zero_stage 3 was accepted"
fi
grep -q "offload_optimizer.*zero_stage 3" "$work/z3.log" || { cat "$work/z3.log"; fail "z3 message"; }
echo "train_offload_test: OK"
