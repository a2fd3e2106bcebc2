#!/usr/bin/env bash
# bin/train with [model] type = t5 (ctest train_t5_test): configs/tiny_t5_cpu.ini trains 24
# steps on the T5 demo corpus (MODEL=t5 scripts/prepare-demo-data.sh: the Bible split into
# sentences, BERT WordPiece + 100 sentinels) and the validation loss falls by more than 1.5 nats
# from the untrained one (about ln(30624) = 10.3); --dry-run prints the memory plan and stops
# (smaller activations with recompute = full); a run saved at step 2 and resumed logs the
# uninterrupted run's later steps (its TensorBoard losses are the logged ones), and a config of
# another T5 version refuses its checkpoint;
# bin/convert exports the checkpoint to HF and imports it back (export again: the same bytes),
# and the import finetunes; with MPIRUN set (mpirun and its flags), tp = 2 (dropout off: the
# FFN-hidden masks are per TP slice; also with sequence parallelism and full recompute), dp = 2,
# dp = 2 with ZeRO stage 1 and pp = 2 (encoder on stage 0, decoder on stage 1; dropout on) log
# the single-rank run's losses and gradient norms, pp = 2 its validation losses, and a pp = 2
# checkpoint resumes on one rank with the uninterrupted run's later steps.
# The corpus needs the bible-kjv package: skipped (exit 77) without it.
# usage: train_t5_test.sh BUILD/bin/train BUILD/bin/preprocess BUILD/bin/convert
set -euo pipefail
train=$1
preprocess=$2
convert=$3
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
MODEL=t5 PREPROCESS=$preprocess scripts/prepare-demo-data.sh > "$work/prepare.log" 2>&1 ||
  fail "prepare-demo-data: $(cat "$work/prepare.log")"
config=configs/tiny_t5_cpu.ini

"$train" "$config" --dry-run train.device=cpu > "$work/dry.log" 2>&1 ||
  fail "--dry-run: $(tail -3 "$work/dry.log")"
grep -q 'model: T5 v1.0, 2 encoder + 2 decoder layers' "$work/dry.log" || fail "no model line"
grep -q 'memory plan' "$work/dry.log" || fail "no memory plan in --dry-run"
grep -q 'val loss' "$work/dry.log" && fail "--dry-run trained"
# recompute = full keeps one layer's activations per stack: a smaller activation arena.
#   activations          1.2 MiB   40.1%
arena() { sed -n 's/^ *activations *\([0-9.]*\) MiB.*/\1/p' "$1" | head -1; }
"$train" "$config" --dry-run train.device=cpu parallel.recompute=full > "$work/dry_full.log" 2>&1 ||
  fail "--dry-run recompute=full: $(tail -3 "$work/dry_full.log")"
awk -v a="$(arena "$work/dry.log")" -v f="$(arena "$work/dry_full.log")" \
  'BEGIN { exit !(f > 0 && f < a) }' ||
  fail "recompute=full: activations $(arena "$work/dry_full.log") MiB, not below $(arena "$work/dry.log")"

# Checkpoints: 4 steps saving at step 2, then a run resumed from that checkpoint logs the
# uninterrupted run's steps 3 and 4 (the uninterrupted run also writes TensorBoard events, whose
# losses are the logged ones); a v1.1 config refuses the v1.0 checkpoint naming the key.
# step 3/4 | loss 10.3535 | lr 1.000e-03 | grad norm 4.447
steps() { grep -oE 'step +[0-9]+/4 \| loss [0-9.]+ \| lr [0-9.e+-]+ \| grad norm [0-9.]+' "$1"; }
ck=(train.steps=4 optim.warmup_steps=2 train.log_interval=1 train.eval_iters=0 train.device=cpu
  "data.cache_dir=$work")
"$train" "$config" "${ck[@]}" log.tensorboard_dir="$work/tb" > "$work/whole.log" 2>&1 ||
  fail "4 steps: $(tail -3 "$work/whole.log")"
# Its TensorBoard events (the shared trainer's metrics sink): the logged loss of every step.
for s in 1 2 3 4; do
  logged=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/whole.log" | grep -oE '[0-9.]+$')
  tb=$(python3 scripts/gpu/tensorboard_check.py --reader minimal --tag "lm-loss-training/lm loss" \
    "$work/tb" | awk -F'\t' -v s=$s '$2 == s { printf "%.4f", $3 }')
  [[ -n $logged && $tb == "$logged" ]] || fail "step $s: TensorBoard lm loss '$tb', logged '$logged'"
done
"$train" "$config" "${ck[@]}" checkpoint.exit_interval=2 "checkpoint.save=$work/ck" \
  > "$work/first.log" 2>&1 || fail "save: $(tail -3 "$work/first.log")"
grep -q "saved checkpoint $work/ck/step_00000002 at step 2" "$work/first.log" ||
  fail "no save at step 2: $(tail -3 "$work/first.log")"
"$train" "$config" "${ck[@]}" "checkpoint.load=$work/ck" > "$work/resumed.log" 2>&1 ||
  fail "resume: $(tail -3 "$work/resumed.log")"
grep -q 'resuming from .*step_00000002: step 2' "$work/resumed.log" || fail "no resume line"
diff <(steps "$work/whole.log" | tail -2) <(steps "$work/resumed.log") ||
  fail "the resumed steps 3-4 differ from the uninterrupted run's"
if "$train" "$config" "${ck[@]}" "checkpoint.load=$work/ck" model.t5_version=1.1 \
  > "$work/bad.log" 2>&1; then
  fail "a T5 v1.1 config loaded the v1.0 checkpoint"
fi
grep -q 't5_version: checkpoint 1.0, config 1.1' "$work/bad.log" ||
  fail "the refusal does not name t5_version: $(tail -2 "$work/bad.log")"
echo "checkpoint: steps 3-4 resumed from step 2 equal the uninterrupted run's"
# Hugging Face: export the step-2 checkpoint, import it, export again: the same bytes; the
# import finetunes.
"$convert" export "$work/ck" "$work/hf" 2 > "$work/convert.log" 2>&1 ||
  fail "export: $(cat "$work/convert.log")"
tr -d '\n ' < "$work/hf/config.json" | grep -q '"architectures":\["T5ForConditionalGeneration"\]' ||
  fail "config.json: $(cat "$work/hf/config.json")"
grep -q '"feed_forward_proj": "relu"' "$work/hf/config.json" || fail "no feed_forward_proj relu"
"$convert" import "$work/hf" "$work/imported" > "$work/convert.log" 2>&1 ||
  fail "import: $(cat "$work/convert.log")"
"$convert" export "$work/imported" "$work/hf2" > "$work/convert.log" 2>&1 ||
  fail "export of the import: $(cat "$work/convert.log")"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" ||
  fail "export -> import -> export changed model.safetensors"
"$train" "$config" "${ck[@]}" train.steps=2 optim.warmup_steps=1 "checkpoint.load=$work/imported" \
  checkpoint.finetune=true > "$work/tuned.log" 2>&1 || fail "finetune: $(tail -3 "$work/tuned.log")"
grep -q 'finetune: weights of' "$work/tuned.log" || fail "the import was not loaded"
echo "convert: T5 export, import, export: the same model.safetensors; the import finetunes"

"$train" "$config" train.steps=24 optim.warmup_steps=4 train.eval_interval=24 \
  train.eval_iters=4 train.log_interval=8 train.device=cpu "data.cache_dir=$work" \
  > "$work/train.log" 2>&1 || fail "train: $(tail -5 "$work/train.log")"
# done: 24 steps (0 skipped), ... | train loss 10.55 -> 8.8 | val loss 10.7181 (step 0) -> 8.6 (ppl ..)
read -r before after < <(sed -n 's/.*val loss \([0-9.]*\) (step [0-9]*) -> \([0-9.]*\).*/\1 \2/p' \
  "$work/train.log" | tail -1) || fail "no validation losses in $(tail -3 "$work/train.log")"
echo "tiny_t5_cpu: val loss $before -> $after"
awk -v b="$before" 'BEGIN { exit !(b > 9.5 && b < 11.5) }' ||
  fail "the untrained validation loss $before is not near ln(30624) = 10.3"
awk -v b="$before" -v a="$after" 'BEGIN { exit !(a < b - 1.5) }' ||
  fail "the validation loss fell from $before to $after only (want more than 1.5)"
if [[ -n ${MPIRUN:-} ]]; then
  common=(train.steps=4 optim.warmup_steps=2 train.log_interval=1 train.eval_iters=0
    train.micro_batch=4 train.device=cpu "data.cache_dir=$work")
  for layout in "parallel.tp=2 model.hidden_dropout=0" "parallel.dp=2 model.hidden_dropout=0.1" \
    "parallel.dp=2 model.hidden_dropout=0.1 parallel.zero_stage=1" \
    "parallel.dp=2 model.hidden_dropout=0.1 parallel.zero_stage=3" \
    "parallel.pp=2 model.hidden_dropout=0.1" \
    "parallel.tp=2 parallel.sequence_parallel=true parallel.recompute=full model.hidden_dropout=0"; do
    read -r -a extra <<< "${layout#* }"
    "$train" "$config" "${common[@]}" "${extra[@]}" > "$work/one.log" 2>&1 ||
      fail "one rank ($layout): $(tail -3 "$work/one.log")"
    # shellcheck disable=SC2086
    $MPIRUN -np 2 "$train" "$config" "${common[@]}" $layout > "$work/two.log" 2>&1 ||
      fail "mpirun $layout: $(tail -3 "$work/two.log")"
    [[ $(steps "$work/one.log" | wc -l) == 4 ]] || fail "one rank ($layout): no step lines"
    diff <(steps "$work/one.log") <(steps "$work/two.log") ||
      fail "$layout: the losses or norms differ from one rank's"
    echo "$layout: the 4 steps equal one rank's"
  done
  # Evaluation through the pipeline (the loss from the last stage): the same validation losses.
  # step 2/2 | val loss 10.4005 (ppl 32878.57) | 1.2s
  vals() { grep -oE 'val loss [0-9.]+' "$1"; }
  eval_args=(train.steps=2 optim.warmup_steps=1 train.eval_interval=1 train.eval_iters=2
    train.micro_batch=4 train.device=cpu "data.cache_dir=$work")
  "$train" "$config" "${eval_args[@]}" > "$work/one.log" 2>&1 ||
    fail "one rank (eval): $(tail -3 "$work/one.log")"
  $MPIRUN -np 2 "$train" "$config" "${eval_args[@]}" parallel.pp=2 > "$work/two.log" 2>&1 ||
    fail "mpirun pp = 2 (eval): $(tail -3 "$work/two.log")"
  [[ $(vals "$work/one.log" | wc -l) -ge 3 ]] || fail "one rank: no validation lines"
  diff <(vals "$work/one.log") <(vals "$work/two.log") ||
    fail "pp = 2: the validation losses differ from one rank's"
  echo "parallel.pp=2: the validation losses equal one rank's"
  # A checkpoint saved by two pipeline stages resumes on one rank.
  $MPIRUN -np 2 "$train" "$config" "${ck[@]}" parallel.pp=2 checkpoint.exit_interval=2 \
    "checkpoint.save=$work/ck_pp" > "$work/two.log" 2>&1 ||
    fail "pp = 2 save: $(tail -3 "$work/two.log")"
  "$train" "$config" "${ck[@]}" "checkpoint.load=$work/ck_pp" > "$work/resumed.log" 2>&1 ||
    fail "resume of the pp = 2 checkpoint: $(tail -3 "$work/resumed.log")"
  grep -q 'saved with .*pp 2, pp_split_rank 1' "$work/resumed.log" ||
    fail "the resume line does not name the pipeline layout: $(grep resuming "$work/resumed.log")"
  diff <(steps "$work/whole.log" | tail -2) <(steps "$work/resumed.log") ||
    fail "steps 3-4 resumed from the pp = 2 checkpoint differ from the uninterrupted run's"
  echo "parallel.pp=2: its checkpoint resumes on one rank with the uninterrupted run's steps"
fi
echo PASS
