#!/usr/bin/env bash
# make bench: the GPT step benchmark (needs a GPU), and the PyTorch reference beside it when
# python3 has torch (the GPU machine does).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD:-build}
"$build/bench/gpt_step_bench" "$@"
if python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  python3 bench/reference/gpt2_pytorch.py
fi
