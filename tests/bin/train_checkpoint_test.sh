#!/usr/bin/env bash
# bin/train checkpoints end to end on the CPU (ctest train_checkpoint_test):
#   1. a 10-step run, and the same run stopped by exit_interval at step 5 (exit 0, checkpoint
#      saved) then resumed by a fresh process: steps 6-10 log the same losses;
#   2. SIGTERM mid-run: the step finishes, a checkpoint is saved, exit status 0; the same at
#      exit_duration_min; SIGKILL while saving every step leaves a loadable checkpoint, and the
#      next completed save removes the temporary directory of a save whose process is gone;
#   3. a flipped byte in the newest checkpoint: refused naming the file, the previous one used;
#   4. bin/convert: export to Hugging Face, import, export again: the same model.safetensors
#      bytes (import is export's exact inverse); finetune from the import trains;
#   5. [tokenizer] GPT2BPE: a vocab_size that differs is refused; the files travel with the
#      checkpoint and export writes them as vocab.json / merges.txt with a tokenizer_config.json;
#   6. with MPIRUN set (mpirun and its flags): a TP2 run stopped by SIGUSR1, resumed on 1 rank;
#      Ctrl-C (SIGINT) of mpirun: every rank stops after the same step and saves it.
# usage: train_checkpoint_test.sh BUILD/bin/train BUILD/bin/convert BUILD/bin/preprocess
#        (from the repository root; DEVICE=cuda runs the same on a GPU, where the logged losses
#        (4 decimals) must agree too)
set -euo pipefail
train=$1
convert=$2
preprocess=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" model.hidden_dropout=0.1 model.attention_dropout=0.1 \
  train.steps=10 train.device="${DEVICE:-cpu}"
fail() { echo "FAIL: $*"; exit 1; }
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1" | sed -E 's/ +/ /g'; }

# 1. Uninterrupted vs stopped at 5 and resumed.
"$train" "$work/t.ini" > "$work/full.log" 2>&1
"$train" "$work/t.ini" checkpoint.save="$work/ck" checkpoint.exit_interval=5 > "$work/a.log" 2>&1 \
  || fail "exit_interval run failed: $(tail -3 "$work/a.log")"
grep -q "exit_interval 5 reached: stopping after step 5" "$work/a.log" || fail "no exit message"
[[ $(cat "$work/ck/latest") == 5 ]] || fail "latest is not 5"
"$train" "$work/t.ini" checkpoint.load="$work/ck" checkpoint.save="$work/ck" \
  > "$work/b.log" 2>&1 || fail "resume failed: $(tail -3 "$work/b.log")"
grep -q "resuming from $work/ck/step_00000005: step 5" "$work/b.log" || fail "no resume line"
diff <(losses "$work/full.log" | tail -5) <(losses "$work/b.log") \
  || fail "resumed losses differ from the uninterrupted run"
[[ $(cat "$work/ck/latest") == 10 ]] || fail "no final checkpoint"

# 2. SIGTERM: the run saves where it is and exits 0.
"$train" "$work/t.ini" train.steps=300 checkpoint.save="$work/sig" > "$work/sig.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qE "step +3/" "$work/sig.log" || ! kill -0 "$pid" && break; sleep 0.1; done
kill -TERM "$pid"
wait "$pid" || fail "SIGTERM run exited with $?: $(tail -3 "$work/sig.log")"
grep -q "received SIGTERM: stopping after step" "$work/sig.log" || fail "no SIGTERM message"
[[ -f "$work/sig/step_$(printf %08d "$(cat "$work/sig/latest")")/manifest.json" ]] \
  || fail "no checkpoint after SIGTERM"

# 2b. exit_duration_min: saves and exits 0 after the first step past the limit.
"$train" "$work/t.ini" checkpoint.save="$work/dur" checkpoint.exit_duration_min=1e-6 \
  > "$work/dur.log" 2>&1 || fail "exit_duration_min run failed: $(tail -3 "$work/dur.log")"
grep -q "exit_duration_min 1e-06 reached: stopping after step 1" "$work/dur.log" \
  || fail "no exit_duration_min message"
[[ $(cat "$work/dur/latest") == 1 ]] || fail "no checkpoint at the duration limit"

# 2c. SIGKILL while saving every step: what is left loads (the newest complete checkpoint).
"$train" "$work/t.ini" train.steps=300 checkpoint.save="$work/kill" checkpoint.save_interval=1 \
  checkpoint.keep_last=2 > "$work/kill.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qE "step +8/" "$work/kill.log" || ! kill -0 "$pid" && break; sleep 0.1; done
kill -KILL "$pid"
{ wait "$pid"; } 2>/dev/null && fail "the killed run exited 0"
# The leftover of an interrupted save by a process that is gone: the next completed save removes
# it and says so.
stale="$work/kill/step_00000099.tmp-$(bash -c 'echo $$')"
mkdir -p "$stale" && echo partial > "$stale/rank_00000.safetensors"
"$train" "$work/t.ini" train.steps=300 checkpoint.load="$work/kill" checkpoint.exit_interval=1 \
  checkpoint.save="$work/kill" \
  > "$work/kill2.log" 2>&1 || fail "resume after SIGKILL failed: $(tail -3 "$work/kill2.log")"
grep -q "resuming from $work/kill/step_" "$work/kill2.log" || fail "nothing resumed after SIGKILL"
[[ ! -e $stale ]] || fail "the stale $stale survived a completed save"
grep -q "removed $stale, the leftover of an interrupted save" "$work/kill2.log" \
  || fail "the removal of $stale was not logged"

# 3. A flipped byte in step 10's tensors: refused, step 5 used.
file="$work/ck/step_00000010/rank_00000.safetensors"
printf '\x55' | dd of="$file" bs=1 seek=$(( $(stat -c %s "$file") - 100 )) conv=notrunc 2>/dev/null
# (train.steps moves the decay's end: the config's schedule replaces the checkpoint's.)
"$train" "$work/t.ini" checkpoint.load="$work/ck" train.steps=6 \
  checkpoint.override_lr_scheduler=true > "$work/c.log" 2>&1 \
  || fail "fallback run failed: $(tail -3 "$work/c.log")"
grep -q "refusing checkpoint $work/ck/step_00000010: $file: CRC-32C" "$work/c.log" \
  || fail "no refusal naming the file: $(grep -i warn "$work/c.log")"
grep -q "resuming from $work/ck/step_00000005" "$work/c.log" || fail "step 5 not used"
# 4. Hugging Face round trip of step 5, and finetuning from the import.
"$convert" export "$work/ck" "$work/hf" 5 > "$work/conv.log" 2>&1 || fail "$(cat "$work/conv.log")"
grep -q '"model_type": "gpt2"' "$work/hf/config.json" || fail "no gpt2 config.json"
"$convert" import "$work/hf" "$work/imp" >> "$work/conv.log" 2>&1 || fail "$(cat "$work/conv.log")"
"$convert" export "$work/imp" "$work/hf2" >> "$work/conv.log" 2>&1 || fail "$(cat "$work/conv.log")"
cmp "$work/hf/model.safetensors" "$work/hf2/model.safetensors" || fail "export-import-export differs"
"$train" "$work/t.ini" checkpoint.load="$work/imp" checkpoint.finetune=true train.steps=3 \
  > "$work/ft.log" 2>&1 || fail "finetune failed: $(tail -3 "$work/ft.log")"
grep -q "finetune: weights of $work/imp/step_00000000; fresh optimizer, step 0" "$work/ft.log" \
  || fail "no finetune line"
"$train" "$work/t.ini" checkpoint.load="$work/imp" > "$work/nf.log" 2>&1 \
  && fail "resuming from weights only succeeded"
grep -q "holds weights only (an import?): load it with \[checkpoint\] finetune = true" \
  "$work/nf.log" || fail "no weights-only message: $(tail -2 "$work/nf.log")"
# 5. The tokenizer travels with the model.
for i in $(seq 40); do printf 'In the beginning %d was the word, and the word was %d.\n\n' "$i" "$i"; done \
  > "$work/corpus.txt"
"$preprocess" --input "$work/corpus.txt" --output-prefix "$work/gpt2" --tokenizer-type GPT2BPE \
  --vocab-file data/gpt2/encoder.json --merge-file data/gpt2/vocab.bpe --append-eod --workers 1 \
  --no-progress > "$work/pre.log" 2>&1 || fail "preprocess: $(tail -2 "$work/pre.log")"
tok=(data.paths="$work/gpt2_text_document" tokenizer.type=GPT2BPE
     tokenizer.vocab_file=data/gpt2/encoder.json tokenizer.merge_file=data/gpt2/vocab.bpe)
"$train" "$work/t.ini" "${tok[@]}" > "$work/tok1.log" 2>&1 && fail "vocab_size 65535 accepted"
grep -q "vocab_size: 65535 differs from the tokenizer's 50257" "$work/tok1.log" \
  || fail "no vocab_size mismatch message: $(tail -1 "$work/tok1.log")"
sed '/^vocab_size/d; /^eod_token/d' "$work/t.ini" > "$work/tok.ini"
"$train" "$work/tok.ini" "${tok[@]}" train.steps=3 checkpoint.save="$work/tokck" \
  > "$work/tok2.log" 2>&1 || fail "training with a tokenizer: $(tail -2 "$work/tok2.log")"
"$convert" export "$work/tokck" "$work/tokhf" > "$work/conv2.log" 2>&1 || fail "$(cat "$work/conv2.log")"
cmp "$work/tokhf/vocab.json" data/gpt2/encoder.json || fail "vocab.json differs"
cmp "$work/tokhf/merges.txt" data/gpt2/vocab.bpe || fail "merges.txt differs"
grep -q '"eos_token": "<|endoftext|>"' "$work/tokhf/tokenizer_config.json" \
  || fail "no eos_token in tokenizer_config.json"
# 6. Two ranks (TP2) under mpirun: stopped by SIGUSR1 (mpirun forwards it), saved by both
#    ranks, resumed on one rank: the losses continue as the one-rank run's (4 decimals).
if [[ -n ${MPIRUN:-} ]]; then
  $MPIRUN -np 2 "$train" "$work/t.ini" parallel.tp=2 train.steps=300 checkpoint.save="$work/tp2" \
    > "$work/tp2.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -qE "step +3/" "$work/tp2.log" || ! kill -0 "$pid" && break; sleep 0.1; done
  kill -USR1 "$pid"
  wait "$pid" || fail "mpirun run exited with $?: $(tail -3 "$work/tp2.log")"
  grep -q "received SIGUSR1: stopping after step" "$work/tp2.log" || fail "no SIGUSR1 message"
  step=$(cat "$work/tp2/latest")
  # The same train.steps everywhere (it sets the data order and the schedule's decay).
  "$train" "$work/t.ini" train.steps=300 checkpoint.exit_interval=$((step + 2)) \
    checkpoint.load="$work/tp2" > "$work/tp2b.log" 2>&1 \
    || fail "resume of the TP2 checkpoint: $(tail -2 "$work/tp2b.log")"
  "$train" "$work/t.ini" train.steps=300 checkpoint.exit_interval=$((step + 2)) \
    > "$work/one.log" 2>&1
  diff <(losses "$work/one.log" | tail -2) <(losses "$work/tp2b.log") \
    || fail "TP2 -> 1 rank losses differ"
  # 6b. Ctrl-C of mpirun: OpenMPI turns SIGINT into SIGTERM of every rank; both ranks stop after
  #     the same step and save it (mpirun's own exit status reports the interrupt).
  $MPIRUN -np 2 "$train" "$work/t.ini" parallel.tp=2 train.steps=300 checkpoint.save="$work/int" \
    > "$work/int.log" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -qE "step +3/" "$work/int.log" || ! kill -0 "$pid" && break; sleep 0.1; done
  kill -INT "$pid"
  wait "$pid" || true
  grep -q "received SIGTERM: stopping after step" "$work/int.log" || fail "no stop after Ctrl-C"
  [[ -f "$work/int/step_$(printf %08d "$(cat "$work/int/latest")")/manifest.json" ]] \
    || fail "no checkpoint after Ctrl-C of mpirun"
fi
echo "PASS"
