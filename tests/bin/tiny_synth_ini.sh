# Sourced by bin/train's shell tests. tiny_synth_ini FILE WORK [SECTION.KEY=VALUE...] writes the
# config they train on the CPU: a 2-layer GPT (d 32, 2 heads, seq_len 16) on the bundled
# tests/io/fixtures/gpt_index/synth_a (ids < 65535, eod 0; index caches in WORK/cache), 6 steps
# of global batch 4 in micro-batches of 2, lr 1e-2 after 2 warmup steps, no evaluation, a log
# line per step. Each SECTION.KEY=VALUE replaces KEY's line in [SECTION], or adds it there (and
# the section, when missing).
tiny_synth_ini() {
  local file=$1 work=$2
  shift 2
  cat > "$file" <<INI
[model]
vocab_size = 65535
max_seq_len = 16
d_model = 32
n_heads = 2
n_layers = 2
[data]
paths = tests/io/fixtures/gpt_index/synth_a
seq_len = 16
eod_token = 0
cache_dir = $work/cache
[train]
micro_batch = 2
global_batch = 4
steps = 6
device = cpu
eval_iters = 0
log_interval = 1
[optim]
lr = 1e-2
warmup_steps = 2
INI
  local kv section key
  for kv in "$@"; do
    section=${kv%%.*}
    key=${kv#*.}
    key=${key%%=*}
    awk -v s="[$section]" -v k="$key" -v v="${kv#*=}" '
      function add() { if (in_s && !done) { print k " = " v; done = 1 } }
      /^\[/ { add(); in_s = ($0 == s); seen = seen || in_s }
      in_s && index($0, k " = ") == 1 { print k " = " v; done = 1; next }
      { print }
      END { add(); if (!seen) { print s; print k " = " v } }
    ' "$file" > "$file.tmp" && mv "$file.tmp" "$file"
  done
}
