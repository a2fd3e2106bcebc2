#!/usr/bin/env bash
# Checkpoints that never load into the wrong model, and refusals at the door (ctest
# checkpoint_trust_test; issue 25). A tiny 2-layer, 4-head GPT saves steps 2, 4 and 6; then
#   1. resuming with another architecture whose tensor shapes still fit (1 layer of 16 heads,
#      gelu_erf, ln_eps, rotary, post-LN) is refused naming every differing key; finetune = true
#      may change dropout; bin/finetune checks the same record (and records it when it saves);
#   2. a step that does not exist (checkpoint.load_step, bin/eval --step, bin/convert export STEP)
#      is an error naming the steps there, never another step;
#   3. bin/convert import into a directory that holds checkpoints is refused, `latest` untouched;
#   4. bin/convert import refuses a config.json that disagrees with the tensors (n_layer larger or
#      smaller, a transposed tensor, a missing or an extra one, absurd sizes), a safetensors shape
#      whose size overflows, and an index shard outside the directory: rc != 0, nothing written;
#   5. a save that fails (files limited in size, as a full disk) leaves no temporaries, and the
#      leftovers of a killed save are removed when the next run starts and by the next save;
#   6. a .bin truncated while training reads it stops the run with rc 1 and the file's name.
# usage: checkpoint_trust_test.sh BUILD/bin/train BUILD/bin/convert BUILD/bin/eval BUILD/bin/finetune
set -euo pipefail
train=$1
convert=$2
eval_bin=$3
finetune=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
source "$(dirname "$0")/tiny_synth_ini.sh"
tiny_synth_ini "$work/t.ini" "$work" model.n_heads=4 model.hidden_dropout=0.1
# refused LOG WANT CMD...: CMD exits non-zero (not a crash) and LOG holds WANT.
refused() {
  local log=$1 want=$2 rc=0
  shift 2
  "$@" > "$log" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || fail "$* succeeded: $(tail -3 "$log")"
  [[ $rc -lt 128 ]] || fail "$* crashed (rc $rc): $(tail -3 "$log")"
  grep -qF -- "$want" "$log" || fail "$* did not say \"$want\": $(tail -3 "$log")"
}

"$train" "$work/t.ini" checkpoint.save="$work/ck" checkpoint.save_interval=2 > "$work/a.log" 2>&1 \
  || fail "training failed: $(tail -3 "$work/a.log")"
[[ $(cat "$work/ck/latest") == 6 ]] || fail "latest is not 6"

# 1. Another architecture with tensors of the same shapes.
resume=("$train" "$work/t.ini" checkpoint.load="$work/ck" train.steps=7)
refused "$work/arch.log" "[model] n_heads: checkpoint 4, config 16; [model] n_layers: checkpoint 2, config 1" \
  "${resume[@]}" model.n_layers=1 model.n_heads=16
for kv in "activation=gelu_erf|[model] activation: checkpoint gelu, config gelu_erf" \
          "ln_eps=1e-6|[model] ln_eps: checkpoint 1e-05, config 1e-06" \
          "position_embedding=rotary|[model] position_embedding: checkpoint learned, config rotary" \
          "norm_placement=post|[model] norm_placement: checkpoint pre, config post"; do
  refused "$work/arch.log" "${kv#*|}" "${resume[@]}" "model.${kv%%|*}"
done
refused "$work/arch.log" "[model] hidden_dropout: checkpoint 0.1, config 0" \
  "${resume[@]}" model.hidden_dropout=0
"${resume[@]}" checkpoint.finetune=true model.hidden_dropout=0 train.steps=3 > "$work/ft.log" 2>&1 \
  || fail "a finetune with another dropout was refused: $(tail -3 "$work/ft.log")"
# bin/finetune checks the same record: another architecture is refused, dropout may change.
for t in "Amen" "Selah" "Amen" "Selah"; do printf '{"text": "%s", "label": 0}\n' "$t"; done \
  > "$work/task.jsonl"
finetune_run=("$finetune" "$work/t.ini" checkpoint.load="$work/ck" tokenizer.type=Byte
              finetune.train_data="$work/task.jsonl" finetune.labels=O,N train.steps=1
              optim.warmup_steps=0)
refused "$work/ft_arch.log" "[model] n_heads: checkpoint 4, config 16; [model] n_layers: checkpoint 2, config 1" \
  "${finetune_run[@]}" model.n_layers=1 model.n_heads=16
"${finetune_run[@]}" model.hidden_dropout=0 checkpoint.save="$work/ft_ck" > "$work/ft_ok.log" 2>&1 \
  || fail "bin/finetune with another dropout was refused: $(tail -3 "$work/ft_ok.log")"
grep -q '"n_heads": "4"' "$work"/ft_ck/step_*/manifest.json \
  || fail "bin/finetune's checkpoint records no model: $(head -c 600 "$work"/ft_ck/step_*/manifest.json)"

# 2. Asked for step 5: an error naming steps 2, 4, 6.
refused "$work/step.log" "at steps 2, 4, 6" "${resume[@]}" checkpoint.load_step=5
refused "$work/step.log" "at steps 2, 4, 6" "$eval_bin" "$work/ck" --step 77 \
  --data tests/io/fixtures/gpt_index/synth_a --seq-len 16
refused "$work/step.log" "at steps 2, 4, 6" "$convert" export "$work/ck" "$work/hf5" 5
[[ ! -e $work/hf5/model.safetensors ]] || fail "export of a missing step wrote a model"
"$convert" export "$work/ck" "$work/hf" 4 > "$work/exp.log" 2>&1 || fail "$(cat "$work/exp.log")"
grep -q "of $work/ck/step_00000004 to" "$work/exp.log" || fail "export did not take step 4"

# 3. Import into the training directory: refused, latest stays 6.
refused "$work/imp.log" "already holds checkpoints (steps 2, 4, 6; latest 6)" \
  "$convert" import "$work/hf" "$work/ck"
[[ $(cat "$work/ck/latest") == 6 ]] || fail "latest moved to $(cat "$work/ck/latest")"
[[ ! -e $work/ck/step_00000000 ]] || fail "the import wrote step 0 into the training directory"

# 4. HF directories that disagree with themselves. edit_hf NAME PYTHON: a copy of $work/hf
# changed by PYTHON, which sees cfg (config.json), tensors (name -> [dtype, shape, bytes]) and
# index (None, or a weight_map to write as model.safetensors.index.json).
edit_hf() {
  local dir=$work/bad_$1
  cp -r "$work/hf" "$dir"
  python3 - "$dir" "$2" <<'PY'
import json, struct, sys
d, code = sys.argv[1], sys.argv[2]
cfg = json.load(open(d + "/config.json"))
raw = open(d + "/model.safetensors", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
head = json.loads(raw[8:8 + n])
head.pop("__metadata__", None)
data = raw[8 + n:]
tensors = {k: [v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]]
           for k, v in head.items()}
index = None
exec(code)
out, at, blob = {}, 0, b""
for k, (dt, shape, b) in tensors.items():
    out[k] = {"dtype": dt, "shape": shape, "data_offsets": [at, at + len(b)]}
    at += len(b)
    blob += b
h = json.dumps(out).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(d + "/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + blob)
json.dump(cfg, open(d + "/config.json", "w"))
if index is not None:
    json.dump({"weight_map": index}, open(d + "/model.safetensors.index.json", "w"))
PY
}
# import_refused NAME WANT: import of bad_NAME fails naming WANT and writes nothing.
import_refused() {
  refused "$work/bad_$1.log" "$2" "$convert" import "$work/bad_$1" "$work/imp_$1"
  [[ ! -e $work/imp_$1/step_00000000 && ! -e $work/imp_$1/latest ]] \
    || fail "the refused import of bad_$1 wrote a checkpoint"
}
edit_hf more_layers 'cfg["n_layer"] = 3'
import_refused more_layers "missing tensor h.2.attn.c_attn.bias [96]: the model of 3 layers"
edit_hf fewer_layers 'cfg["n_layer"] = 1'
import_refused fewer_layers "is not part of the model of 1 layer that"
edit_hf transposed '
dt, s, b = tensors["transformer.h.0.attn.c_attn.weight"]
rows, cols = s
f = struct.unpack("<%df" % (rows * cols), b)
t = [f[i * cols + j] for j in range(cols) for i in range(rows)]
tensors["transformer.h.0.attn.c_attn.weight"] = [dt, [cols, rows], struct.pack("<%df" % len(t), *t)]'
import_refused transposed "tensor h.0.attn.c_attn.weight has shape [32, 96], the model"
edit_hf missing 'del tensors["transformer.h.1.ln_2.weight"]'
import_refused missing "missing tensor h.1.ln_2.weight"
edit_hf extra 'tensors["transformer.h.99.mlp.c_fc.weight"] = tensors["transformer.h.0.mlp.c_fc.weight"]'
import_refused extra "tensor h.99.mlp.c_fc.weight"
edit_hf huge 'cfg["n_embd"] = 2 ** 62'
import_refused huge "n_embd = 4611686018427387904 gives [model] d_model"
edit_hf negative 'cfg["n_layer"] = -2'
import_refused negative "n_layer = -2 gives [model] n_layers"
edit_hf overflow 'tensors["transformer.h.0.ln_1.bias"] = ["F32", [4611686018427387952, 4], b"\0" * 768]'
import_refused overflow "shape [4611686018427387952,4] has more than"
edit_hf escape 'index = {k: "model.safetensors" for k in tensors}; index["transformer.wte.weight"] = "../../../etc/passwd"'
import_refused escape "the shard \"../../../etc/passwd\" of tensor transformer.wte.weight is outside"

# 5. A save that fails leaves no temporaries, twice in a row; the leftovers of a killed save
# (step_X.tmp-<pid>, latest.tmp-<pid>) go when the next run starts, before it saves anything (here
# every save of that run fails), and at the next completed save.
dead=$(bash -c 'echo $$')
mkdir -p "$work/full/step_00000002.tmp-$dead" && echo partial > "$work/full/latest.tmp-$dead"
head -c 1000000 /dev/zero > "$work/full/step_00000002.tmp-$dead/rank_00000.safetensors"
for attempt in 1 2; do
  rc=0
  (trap '' XFSZ; ulimit -f 2048; exec "$train" "$work/t.ini" train.steps=3 \
    checkpoint.save="$work/full") > "$work/full.log" 2>&1 || rc=$?
  [[ $rc -ne 0 ]] || fail "a save larger than the file size limit succeeded"
  grep -q "File too large" "$work/full.log" || fail "the save did not fail: $(tail -2 "$work/full.log")"
  leftovers=$(find "$work/full" -name '*.tmp-*')
  [[ -z $leftovers ]] || fail "attempt $attempt left $leftovers: $(tail -2 "$work/full.log")"
  [[ $attempt == 2 ]] || grep -q "removed $work/full/step_00000002.tmp-$dead, the leftover" \
    "$work/full.log" || fail "the start's removal was not logged: $(head -5 "$work/full.log")"
done
echo 3 > "$work/ck/latest.tmp-$dead"
"$train" "$work/t.ini" checkpoint.load="$work/ck" checkpoint.save="$work/ck" train.steps=7 \
  checkpoint.override_lr_scheduler=true > "$work/b.log" 2>&1 \
  || fail "resume failed: $(tail -3 "$work/b.log")"
[[ ! -e $work/ck/latest.tmp-$dead ]] || fail "latest.tmp-$dead survived a completed save"
[[ $(cat "$work/ck/latest") == 7 ]] || fail "latest is not 7"

# 6. The .bin truncated under a running job.
cp tests/io/fixtures/gpt_index/synth_a.bin tests/io/fixtures/gpt_index/synth_a.idx "$work/"
"$train" "$work/t.ini" data.paths="$work/synth_a" train.steps=5000 > "$work/trunc.log" 2>&1 &
pid=$!
for _ in $(seq 600); do grep -qE "step +2/" "$work/trunc.log" || ! kill -0 "$pid" && break; sleep 0.1; done
truncate -s 64 "$work/synth_a.bin"
rc=0
wait "$pid" || rc=$?
[[ $rc -eq 1 ]] || fail "the run on a truncated .bin exited with $rc: $(tail -3 "$work/trunc.log")"
grep -q "synth_a.bin: the file shrank to 64 bytes" "$work/trunc.log" \
  || fail "no message naming the truncated file: $(tail -3 "$work/trunc.log")"
echo PASS
