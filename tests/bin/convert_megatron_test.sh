#!/usr/bin/env bash
# bin/convert import-megatron on the fork-layout fixture (TP2 x PP2 x DP2, ZeRO-1;
# scripts/make_megatron_ds_fixture.py): the anvil checkpoint holds the iteration, the counters
# and every master weight and Adam moment (their values: megatron_ds_test); a second import into
# the same directory and a folder that is not a DeepSpeed checkpoint are refused by name.
# usage: convert_megatron_test.sh CONVERT
set -euo pipefail
convert=$1
fx=tests/io/fixtures/megatron_ds
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$convert" import-megatron "$fx/ckpt" "$tmp/ck" > "$tmp/out.txt"
grep -q "TP2 x PP2 x DP2, iteration 3, 24 samples consumed" "$tmp/out.txt"
python3 - "$tmp/ck/step_00000003/manifest.json" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
s = m["state"]
assert s["step"] == 3 and s["consumed_samples"] == 24 and s["lr_samples"] == 24, s
assert s["lr_tokens"] == 192 and s["optimizer_steps"] == 2 and s["seed"] == 42, s
assert m["grad_scaler"]["scale"] == 2048.0, m["grad_scaler"]
names = set(m["tensors"])
assert len(names) == 3 * (3 + 4 * 12 + 2), len(names)
for st in ("master/", "exp_avg/", "exp_avg_sq/"):
    assert m["tensors"][st + "wte.weight"]["shape"] == [60, 16]
    assert m["tensors"][st + "h.3.attn.c_attn.weight"]["shape"] == [48, 16]
PY
if "$convert" import-megatron "$fx/ckpt" "$tmp/ck" 2> "$tmp/err.txt"; then
  echo "a second import into $tmp/ck was accepted"; exit 1
fi
grep -q "already holds checkpoints" "$tmp/err.txt"
if "$convert" import-megatron "$fx" "$tmp/ck2" 2> "$tmp/err.txt"; then
  echo "a folder without latest was accepted"; exit 1
fi
grep -q "latest: missing" "$tmp/err.txt"
echo "convert_megatron_test: OK"
