#!/usr/bin/env bash
# bin/train with [curriculum] end to end on the CPU (ctest train_curriculum_test):
#   1. fixed_discrete 4, 8, 16 up to steps 2, 4: every step's log line names its length;
#   2. stopped by exit_interval at step 3 and resumed by a fresh process: steps 4-6 log the
#      same losses as the uninterrupted run (the consumed tokens travel with the checkpoint).
# usage: train_curriculum_test.sh BUILD/bin/train (from the repository root)
set -euo pipefail
train=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" curriculum.enabled=true curriculum.schedule=fixed_discrete \
  curriculum.min_difficulty=4 curriculum.max_difficulty=16 "curriculum.difficulty=4, 8, 16" \
  "curriculum.max_step=2, 4"
fail() { echo "FAIL: $*"; exit 1; }
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | sed -E 's/ +/ /g'; }

"$train" "$work/t.ini" > "$work/full.log" 2>&1 || fail "run failed: $(tail -3 "$work/full.log")"
got=$(grep -oE 'step +[0-9]+/6 .*curriculum seqlen [0-9]+' "$work/full.log" \
  | sed -E 's/step +([0-9]+)\/6 .*curriculum seqlen ([0-9]+)/\1:\2/' | tr '\n' ' ')
[[ $got == "1:4 2:4 3:8 4:8 5:16 6:16 " ]] || fail "lengths per step: $got"

"$train" "$work/t.ini" checkpoint.save="$work/ck" checkpoint.exit_interval=3 > "$work/a.log" 2>&1 \
  || fail "exit_interval run failed: $(tail -3 "$work/a.log")"
"$train" "$work/t.ini" checkpoint.load="$work/ck" checkpoint.save="$work/ck" \
  > "$work/b.log" 2>&1 || fail "resume failed: $(tail -3 "$work/b.log")"
diff <(losses "$work/full.log" | tail -3) <(losses "$work/b.log") \
  || fail "resumed losses differ from the uninterrupted run"
grep -q '"consumed_tokens": 64' "$work/ck/step_00000003/manifest.json" \
  || fail "step 3's checkpoint does not record 4*4 + 4*4 + 4*8 = 64 consumed tokens"
echo PASS
