#!/usr/bin/env bash
# Startup time of bin/train for the 1.3B model (speed issue target: config read to first step
# <= 5 s): a 2-step run on the demo corpus; prints the wall time of the whole process and the
# log's step lines (whose own timestamps show when each step ended).
#   scripts/gpu/startup_time.sh        (on the GPU machine, bundle in .gpu/, demo data present)
set -euo pipefail
cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
start=$(date +%s.%N)
.gpu/run train configs/gpt2_1.3b.ini data.paths=data/demo/kjv_gpt2_text_document \
  "data.cache_dir=$cache" train.steps=2 optim.warmup_steps=1 train.micro_batch=8 \
  train.global_batch=8 train.eval_iters=0 train.log_interval=1 train.device=cuda \
  >"$cache/log" 2>&1
end=$(date +%s.%N)
grep -E "config |model:|step [0-9]|done:" "$cache/log" | cut -c1-150
awk "BEGIN{printf \"process wall time (launch to exit, 2 steps): %.2f s\\n\", $end - $start}"
