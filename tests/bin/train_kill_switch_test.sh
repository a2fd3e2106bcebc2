#!/usr/bin/env bash
# bin/train's [train] kill_switch_path end to end on the CPU (ctest train_kill_switch_test), as
# the BigScience fork's --kill-switch-path:
#   1. the file exists at the start: exit 0 at once, no step trained, nothing saved;
#   2. the file appears mid-run: the run saves a checkpoint after the step it finished and
#      exits 0; the checkpoint's step is the last step logged.
# usage: train_kill_switch_test.sh BUILD/bin/train (from the repository root)
set -euo pipefail
train=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" train.steps=100000 train.kill_switch_path="$work/kill"
fail() { echo "FAIL: $*"; exit 1; }

touch "$work/kill"
"$train" "$work/t.ini" checkpoint.save="$work/ck0" > "$work/start.log" 2>&1 \
  || fail "exit status $? with the kill switch present at the start"
grep -q "detected kill switch at $work/kill: exiting" "$work/start.log" || fail "no start message"
grep -qE 'step +1/' "$work/start.log" && fail "a step ran although the kill switch was there"
[[ ! -e "$work/ck0/latest" ]] || fail "a checkpoint was saved at the start"
rm "$work/kill"

"$train" "$work/t.ini" checkpoint.save="$work/ck" > "$work/run.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qE "step +3/" "$work/run.log" || ! kill -0 "$pid" && break; sleep 0.1; done
touch "$work/kill"
wait "$pid" || fail "kill switch run exited with $?: $(tail -3 "$work/run.log")"
last=$(grep -oE 'step +[0-9]+/100000' "$work/run.log" | tail -1 | grep -oE '[0-9]+/' | tr -d /)
grep -q "detected kill switch at $work/kill: exiting after step $last" "$work/run.log" \
  || fail "no exit message for step $last"
[[ $(cat "$work/ck/latest") == "$last" ]] || fail "latest $(cat "$work/ck/latest") is not $last"
echo PASS
