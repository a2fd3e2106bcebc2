#!/usr/bin/env bash
# The side-by-side speed table of docs/performance.md, on the GPU machine from the repo root
# with the bundle in .gpu/ (scripts/gpu-bundle ... build/bench/gpt_step_bench): anvil's step
# benchmark and the PyTorch reference (bench/reference/gpt2_pytorch.py) on the same GPU in the
# same call, then one markdown row per shape with tokens/s and the ratios.
#   scripts/gpu/speed_table.sh [MODES_SMALL] [MODES_LARGE]
# MODES_SMALL: PyTorch modes for 124M (default eager,compile); MODES_LARGE: for 350M and 1.3B
# (default compile). Logs go to $OUT (default /tmp/anvil-speed).
set -uo pipefail
out=${OUT:-/tmp/anvil-speed}
mkdir -p "$out"
small=${1:-eager,compile}
large=${2:-compile}
ref=bench/reference/gpt2_pytorch.py
[[ -f $ref ]] || ref=.gpu/gpt2_pytorch.py
.gpu/run gpt_step_bench 2>&1 | grep gpt_step | tee "$out/anvil.txt"
python3 "$ref" --modes "$small" 2>&1 | grep pytorch- | sed 's/^/124M /' | tee "$out/torch.txt"
python3 "$ref" --layers 24 --d 1024 --heads 16 --B 16 --steps 10 --warmup 3 --modes "$large" \
  2>&1 | grep pytorch- | sed 's/^/350M /' | tee -a "$out/torch.txt"
python3 "$ref" --layers 24 --d 2048 --heads 16 --B 16 --T 2048 --steps 5 --warmup 2 \
  --modes "$large" 2>&1 | grep pytorch- | sed 's/^/1p3B /' | tee -a "$out/torch.txt"
python3 - "$out/anvil.txt" "$out/torch.txt" <<'PY'
import re, sys
anvil = {}
for line in open(sys.argv[1]):
    m = re.search(r"gpt_step/(\w+?)_B.*GiB=([\d.]+).*MFU%=([\d.]+).*tokens/s=([\d.]+)k", line)
    if m:
        anvil[m.group(1)] = (float(m.group(4)) * 1e3, float(m.group(3)), float(m.group(2)))
torch = {}
for line in open(sys.argv[2]):
    m = re.match(r"(\w+) pytorch-(\w+): .*?([\d,]+) tokens/s.*peak mem ([\d.]+) GiB", line)
    if m:
        torch[(m.group(1), m.group(2))] = (float(m.group(3).replace(",", "")), float(m.group(4)))
print("| model | anvil tokens/s (MFU, GiB) | PyTorch eager | torch.compile (GiB) | anvil/eager | anvil/compile |")
print("|---|---|---|---|---|---|")
for key in ("124M", "350M", "1p3B"):
    if key not in anvil:
        continue
    tok, mfu, gib = anvil[key]
    e, c = torch.get((key, "eager")), torch.get((key, "compile"))
    cell = lambda r: f"{r[0] / 1e3:.1f}K" if r else "-"
    ratio = lambda r: f"{tok / r[0]:.2f}" if r else "-"
    print(f"| {key} | {tok / 1e3:.1f}K ({mfu:.1f}%, {gib:.1f}) | {cell(e)} | "
          f"{cell(c)}{f' ({c[1]:.1f})' if c else ''} | {ratio(e)} | {ratio(c)} |")
PY
