#!/usr/bin/env bash
# Resuming with another lr schedule (ctest train_lr_resume_test, CPU; model/train/checkpoint.h
# resume_lr_schedule), Megatron's AnnealingLR load_state_dict rules:
#   1. a checkpoint of 4 steps (lr 1e-3, cosine to step 8) resumed with lr 2e-3 is refused,
#      naming both values and both options; cosine -> linear likewise names decay_style;
#   2. use_checkpoint_lr_scheduler: steps 5-8 use the lrs of the uninterrupted lr 1e-3 run, and
#      the checkpoint it saves records lr 1e-3 again (so a second resume keeps it);
#   3. override_lr_scheduler: steps 5-8 use the lrs of the uninterrupted lr 2e-3 run (the
#      position continues in the config's schedule), and says so in the log;
#   4. both options at once is a config error; an equal schedule resumes without a note;
#   5. another global batch (larger or smaller) resumes from the consumed samples with a note.
# usage: train_lr_resume_test.sh BUILD/bin/train BUILD/bin/preprocess (from the repo root)
set -euo pipefail
train=$1
preprocess=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

for i in $(seq 0 49); do printf '{"text": "number %d: the dog ran home."}\n' "$i"; done > "$work/d.jsonl"
"$preprocess" --no-progress --input "$work/d.jsonl" --tokenizer-type Byte --append-eod \
  --output-prefix "$work/d" > "$work/pre.log" 2>&1 || fail "preprocess: $(cat "$work/pre.log")"
cat > "$work/t.ini" <<INI
[model]
vocab_size = 257
max_seq_len = 16
d_model = 32
n_heads = 2
n_layers = 1
[data]
paths = $work/d_text_document
seq_len = 16
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 2
steps = 8
device = cpu
eval_iters = 0
log_interval = 1
[optim]
lr = 1e-3
min_lr = 1e-5
warmup_steps = 2
decay_steps = 8
decay_style = cosine
INI
# lrs LOG: the lr of steps 5-8.
lrs() { grep -oE 'step +[5-8]/8 \| loss [^|]+\| lr [^ ]+' "$1" | awk '{print $NF}' | tr '\n' ' '; }
t() { local log=$1; shift; "$train" "$work/t.ini" "$@" > "$work/$log" 2>&1; }

t full1.log || fail "lr 1e-3 run: $(tail -3 "$work/full1.log")"
t full2.log optim.lr=2e-3 || fail "lr 2e-3 run: $(tail -3 "$work/full2.log")"
t part.log train.steps=4 checkpoint.save="$work/ck" || fail "4 steps: $(tail -3 "$work/part.log")"
want1=$(lrs "$work/full1.log")
want2=$(lrs "$work/full2.log")
[[ $(echo $want1 | wc -w) == 4 && $want1 != "$want2" ]] || fail "lrs: '$want1' vs '$want2'"

# 1. Refused.
if t r1.log optim.lr=2e-3 checkpoint.load="$work/ck"; then fail "lr 2e-3 resume accepted"; fi
grep -qF "was trained with another lr schedule (lr: checkpoint 0.001, config 0.002): set [checkpoint] override_lr_scheduler = true to use the config's, or use_checkpoint_lr_scheduler = true to keep the checkpoint's" \
  "$work/r1.log" || fail "refusal: $(tail -2 "$work/r1.log")"
if t r2.log optim.decay_style=linear checkpoint.load="$work/ck"; then fail "linear accepted"; fi
grep -qF "(decay_style: checkpoint cosine, config linear)" "$work/r2.log" \
  || fail "decay style: $(tail -2 "$work/r2.log")"

# 2. The checkpoint's schedule.
t u.log optim.lr=2e-3 checkpoint.load="$work/ck" checkpoint.use_checkpoint_lr_scheduler=true \
  checkpoint.save="$work/ck_u" || fail "use_checkpoint: $(tail -3 "$work/u.log")"
[[ $(lrs "$work/u.log") == "$want1" ]] || fail "use_checkpoint lrs '$(lrs "$work/u.log")' != '$want1'"
grep -qF "use_checkpoint_lr_scheduler: keeping" "$work/u.log" || fail "no note: $(tail -3 "$work/u.log")"
grep -qE '"lr": 0\.001[,}]' "$work/ck_u/step_00000008/manifest.json" \
  || fail "saved schedule: $(grep -o '"lr_schedule"[^}]*' "$work/ck_u/step_00000008/manifest.json")"

# 3. The config's schedule.
t o.log optim.lr=2e-3 checkpoint.load="$work/ck" checkpoint.override_lr_scheduler=true \
  || fail "override: $(tail -3 "$work/o.log")"
[[ $(lrs "$work/o.log") == "$want2" ]] || fail "override lrs '$(lrs "$work/o.log")' != '$want2'"
grep -qF "override_lr_scheduler: the config's lr schedule replaces" "$work/o.log" \
  || fail "no override note: $(tail -3 "$work/o.log")"

# 4. Both options; an equal schedule.
if t b.log checkpoint.load="$work/ck" checkpoint.override_lr_scheduler=true \
  checkpoint.use_checkpoint_lr_scheduler=true; then fail "both options accepted"; fi
grep -qF "override_lr_scheduler exclude each other" "$work/b.log" || fail "both: $(tail -2 "$work/b.log")"
t same.log checkpoint.load="$work/ck" || fail "same schedule: $(tail -3 "$work/same.log")"
[[ $(lrs "$work/same.log") == "$want1" ]] || fail "same lrs"
if grep -qE "(override|use_checkpoint)_lr_scheduler: " "$work/same.log"; then fail "a note for an equal schedule"; fi

# 5. Another global batch (Megatron-DeepSpeed allows it): the run continues from the 8 samples
# the checkpoint consumed, says so, and its own batches follow: 8 + 4 x 4 = 24 samples at step
# 8 with global_batch 4, 8 + 4 x 1 = 12 with global_batch 1 (micro_batch 1).
for g in 4 1; do
  t g$g.log checkpoint.load="$work/ck" checkpoint.override_lr_scheduler=true \
    train.global_batch=$g train.micro_batch=$((g < 2 ? 1 : 2)) checkpoint.save="$work/ck_g$g" \
    || fail "global_batch $g: $(tail -3 "$work/g$g.log")"
  grep -qF "the checkpoint consumed 8 samples in 4 steps, where [train] global_batch $g" \
    "$work/g$g.log" || fail "global_batch $g: no note: $(grep -i warn "$work/g$g.log")"
  grep -qE "\"consumed_samples\": $((8 + 4 * g))[,}]" "$work/ck_g$g/step_00000008/manifest.json" \
    || fail "global_batch $g: $(grep -o '"consumed_samples": [0-9]*' "$work/ck_g$g/step_00000008/manifest.json")"
done
echo "train_lr_resume_test: OK"
