#!/usr/bin/env bash
# bin/convert import-megatron on the fork-layout fixture (TP2 x PP2 x DP2, ZeRO-1;
# scripts/make_megatron_ds_fixture.py): the anvil checkpoint holds the iteration, the counters
# and every master weight and Adam moment (their values: megatron_ds_test); the same checkpoint's
# universal folder (ds_to_universal.py) and the BF16_Optimizer folder of the same state
# (TP1 x PP2 x DP3) import to a byte-identical tensor file, their manifests differing in what
# those layouts record differently (no loss scaler; bf16's Adam step and degrees); a second
# import into the same directory and a folder that is not a DeepSpeed checkpoint are refused by
# name; the RNG states the fork saved are named as not carried over; bin/train resumes the import at step 4 on one rank and at TP2 under mpirun with the same
# losses.
# (That step 4 equals the fork's own step: megatron_first_step_test.sh.)
# usage: convert_megatron_test.sh CONVERT TRAIN PREPROCESS
set -euo pipefail
convert=$1
train=$2
preprocess=$3
fx=tests/io/fixtures/megatron_ds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$convert" import-megatron "$fx/ckpt" "$tmp/ck" > "$tmp/out.txt"
grep -q "TP2 x PP2 x DP2, iteration 3, 24 samples consumed" "$tmp/out.txt"
# The fixture's model states hold the fork's RNG states: the import says it leaves them.
grep -q "not carried over: the fork's RNG states (torch_rng_state, cuda_rng_state, rng_tracker_states)" \
  "$tmp/out.txt"
python3 - "$tmp/ck/step_00000003/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
s = m["state"]
assert s["step"] == 3 and s["consumed_samples"] == 24 and s["lr_samples"] == 24, s
assert s["lr_tokens"] == 192 and s["optimizer_steps"] == 3 and s["seed"] == 42, s
assert m["grad_scaler"]["scale"] == 2048.0, m["grad_scaler"]
names = set(m["tensors"])
assert len(names) == 3 * (3 + 4 * 12 + 2), len(names)
for st in ("master/", "exp_avg/", "exp_avg_sq/"):
    assert m["tensors"][st + "wte.weight"]["shape"] == [120, 16]
    assert m["tensors"][st + "h.3.attn.c_attn.weight"]["shape"] == [48, 16]
PY
"$convert" import-megatron "$fx/ckpt/global_step3_universal" "$tmp/cku" > "$tmp/outu.txt"
grep -q "(universal checkpoint, TP2 x PP2 x DP2, iteration 3, 24 samples consumed)" "$tmp/outu.txt"
"$convert" import-megatron "$fx/ckpt_bf16" "$tmp/ckb" > "$tmp/outb.txt"
grep -q "(BF16_Optimizer, TP1 x PP2 x DP3, iteration 3, 24 samples consumed)" "$tmp/outb.txt"
s=step_00000003
cmp "$tmp/ck/$s/rank_00000.safetensors" "$tmp/cku/$s/rank_00000.safetensors"
cmp "$tmp/ck/$s/rank_00000.safetensors" "$tmp/ckb/$s/rank_00000.safetensors"
python3 - "$tmp/ck/$s/manifest.json" "$tmp/cku/$s/manifest.json" "$tmp/ckb/$s/manifest.json" <<'PY'
import json, sys
z, u, b = (json.load(open(p)) for p in sys.argv[1:])
assert "grad_scaler" in z and not u.get("grad_scaler") and not b.get("grad_scaler"), (z, u, b)
for m in (z, u, b):
    m.pop("grad_scaler", None)
assert z == u, "universal import: manifests differ"
assert b["state"]["optimizer_steps"] == 4, b["state"]
assert b["layout"] == {"tp": 1, "pp": 2, "dp": 3, "zero_stage": 1}, b["layout"]
b["state"]["optimizer_steps"] = z["state"]["optimizer_steps"]
b["layout"] = z["layout"]
assert z == b, "bf16 import: manifests differ beyond the Adam step and layout"
PY
if "$convert" import-megatron "$fx/ckpt" "$tmp/ck" 2> "$tmp/err.txt"; then
  echo "a second import into $tmp/ck was accepted"; exit 1
fi
grep -q "already holds checkpoints" "$tmp/err.txt"
if "$convert" import-megatron "$fx" "$tmp/ck2" 2> "$tmp/err.txt"; then
  echo "a folder without latest was accepted"; exit 1
fi
grep -q "latest: missing" "$tmp/err.txt"
# Resume with the settings import-megatron printed plus data (Byte tokens < 120).
for i in $(seq 0 49); do printf '{"text": "abc def ghi %s"}\n' "$i"; done > "$tmp/d.jsonl"
"$preprocess" --no-progress --input "$tmp/d.jsonl" --tokenizer-type Byte \
  --output-prefix "$tmp/d" > "$tmp/pre.log" 2>&1
model=$(sed -n '/^\[model\]/,/^\[train\]/p' "$tmp/out.txt" | sed '$d')
ini() {
  cat <<INI
$model
[train]
global_batch = 8
seed = 42
micro_batch = 2
steps = 5
device = cpu
eval_iters = 0
log_interval = 1
[data]
seed = 42
seq_len = 8
paths = $tmp/d_text_document
eod_token = 0
cache_dir = $tmp/cache
[checkpoint]
load = $tmp/ck
[parallel]
tp = $1
INI
}
grep -q "^global_batch = 8$" "$tmp/out.txt"
ini 1 > "$tmp/t1.ini"
ini 2 > "$tmp/t2.ini"
"$train" "$tmp/t1.ini" > "$tmp/r1.log" 2>&1 || { cat "$tmp/r1.log"; exit 1; }
grep -q "resuming from $tmp/ck/step_00000003: step 3, 24 samples consumed" "$tmp/r1.log"
mpirun --allow-run-as-root --oversubscribe -np 2 "$train" "$tmp/t2.ini" > "$tmp/r2.log" 2>&1 \
  || { cat "$tmp/r2.log"; exit 1; }
losses() { grep -oE 'step [45]/5 \| loss [0-9.]+' "$1"; }
[[ $(losses "$tmp/r1.log" | wc -l) == 2 ]] || { cat "$tmp/r1.log"; exit 1; }
[[ "$(losses "$tmp/r1.log")" == "$(losses "$tmp/r2.log")" ]] \
  || { echo "TP2 resume differs:"; losses "$tmp/r1.log"; losses "$tmp/r2.log"; exit 1; }
echo "convert_megatron_test: OK"
