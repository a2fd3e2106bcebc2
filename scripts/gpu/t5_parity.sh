#!/usr/bin/env bash
# Hugging Face T5ForConditionalGeneration parity of anvil's T5 (model/t5/t5.h), on the GPU machine
# from the repo root (needs torch, transformers, safetensors; the test binary through .gpu/run
# when the bundle is there, else from $BUILD/tests):
#   for T5 v1.0 (ReLU, tied head scaled by d^-1/2) and v1.1 (gated tanh GELU, untied head):
#   tests/parity/hf_t5_parity.py builds a small T5 (d 256, 4 heads of d_kv 64, d_ff 512, 2 + 2
#   layers, 32 buckets, max distance 128) with HF's random init, a batch of 4 with encoder
#   padding (lengths 64, 50, 33, 10) and ignored labels, and writes the model (save_pretrained),
#   the batch, HF's mean loss and gradient norm (float64); t5_parity_test loads the weights as
#   bin/convert import does (model/t5/hf_t5.cc) and compares: CPU f64 within 1e-5, CPU f32 within 1e-4, CUDA bf16 loss within 2% + 0.02 and
#   gradient norm within 5%.
#   scripts/gpu/t5_parity.sh
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
parity() { if [[ -x .gpu/run ]]; then .gpu/run t5_parity_test; else "${BUILD:-build}/tests/t5_parity_test"; fi; }
for v in 1.0 1.1; do
  python3 tests/parity/hf_t5_parity.py make "$work/v$v" --version "$v"
  if ANVIL_T5_PARITY_DIR="$work/v$v" parity >"$work/log" 2>&1; then
    grep -E '^anvil' "$work/log"
    grep -q 'SKIPPED' "$work/log" && { echo "FAIL t5 v$v: skipped"; exit 1; }
    echo "PASS t5 v$v"
  else
    grep -E 'anvil|Failure|Which|expected|evaluates' "$work/log"
    echo "FAIL t5 v$v"
    exit 1
  fi
done
