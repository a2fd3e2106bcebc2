#!/usr/bin/env bash
# The attention table of docs/performance.md, on the GPU machine from the repo root with the
# bundle in .gpu/ (scripts/gpu-bundle .gpu build/bench/attention_bench ...): anvil's
# attention_bench and PyTorch SDPA (bench/reference/attention_sdpa.py) on the same GPU in the
# same call, then one markdown row per shape with TFLOP/s and the fwd+bwd ratio.
#   scripts/gpu/attention_table.sh [BENCH]      (BENCH: a bundled binary, default attention_bench)
# Logs go to $OUT (default /tmp/anvil-attention).
set -uo pipefail
out=${OUT:-/tmp/anvil-attention}
mkdir -p "$out"
bench=${1:-attention_bench}
.gpu/run "$bench" 2>&1 | grep -E '^BM_' | tee "$out/$bench.txt"
python3 bench/reference/attention_sdpa.py 2>&1 | grep '^sdpa' | tee "$out/sdpa.txt"
python3 - "$out/$bench.txt" "$out/sdpa.txt" <<'PY'
import re, sys
anvil = {}
for line in open(sys.argv[1]):
    m = re.match(r"BM_Flash(Forward|ForwardBackward)(Causal)?/(\d+)/(\d+)/(\d+)/(\d+).*TFLOP/s=([\d.]+)", line)
    if m:
        kind, causal, t, dh = m.group(1), m.group(2) is not None, int(m.group(4)), int(m.group(6))
        anvil[(causal, t, dh, kind)] = float(m.group(7))
print("| shape | anvil fwd | SDPA fwd | anvil fwd+bwd | SDPA fwd+bwd | anvil / SDPA (fwd+bwd) |")
print("|---|---|---|---|---|---|")
for line in open(sys.argv[2]):
    m = re.match(r"sdpa causal=(\d) B=\d+ T=(\d+) H=\d+ Dh=(\d+): .*? ([\d.]+) TFLOP/s \| .*? ([\d.]+) TFLOP/s", line)
    if not m:
        continue
    causal, t, dh = m.group(1) == "1", int(m.group(2)), int(m.group(3))
    sf, sfb = float(m.group(4)), float(m.group(5))
    af, afb = anvil.get((causal, t, dh, "Forward"), 0), anvil.get((causal, t, dh, "ForwardBackward"), 0)
    name = ("causal " if causal else "") + f"T {t}, Dh {dh}"
    print(f"| {name} | {af:.0f} | {sf:.0f} | {afb:.0f} | {sfb:.0f} | {afb / sfb:.2f} |")
PY
