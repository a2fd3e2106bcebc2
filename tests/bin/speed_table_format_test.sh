#!/usr/bin/env bash
# scripts/gpu/speed_table_all.sh and speed_table_format.py on the CPU (ctest speed_table_format_test;
# no GPU, no build). 1: the formatter on hand-written row logs whose result lines copy each tool's
# format string (gpt_step_bench through Google Benchmark 1.7's console reporter, bin/train's step
# line of model/train/trainer.cc, the print()s of bench/reference/*.py), with every way a value
# goes missing (OOM in anvil and in PyTorch, a timeout, a Python error, a budget skip, no log).
# 2: the whole script with a stub bundle runner (ANVIL_RUN) and a stub Python (PYTHON) printing
# the same lines: all seven rows, a PyTorch process dying in eager and started again for compile,
# a part timed out, then a call whose budget covers nothing, which must skip and say so.
# usage: speed_table_format_test.sh   (from the repo root)
set -euo pipefail
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fmt=scripts/gpu/speed_table_format.py
fails=0

expect() {  # FILE TEXT: FILE has a line containing TEXT
  if ! grep -qF -- "$2" "$1"; then
    echo "FAIL: no line with: $2" >&2
    fails=$((fails + 1))
  fi
}

reject() {  # FILE TEXT: FILE has no line containing TEXT
  if grep -qF -- "$2" "$1"; then
    echo "FAIL: unexpected line with: $2" >&2
    fails=$((fails + 1))
  fi
}

head_line() {  # ROW SHAPE [DATE [RUN]]
  echo "=== speed_table_all: row $1 | shape $2 | date ${3:-2026-12-07T10:00Z} | commit abc1234 | device NVIDIA H100 80GB HBM3 | run ${4:-r1} ==="
}

# --- 1. the formatter on hand-written logs -------------------------------------------------------
logs=$work/logs
mkdir -p "$logs"
{
  head_line 124M "32 x 1024"
  echo "=== speed_table_all: begin anvil ==="
  echo "2026-12-07T10:00:01+00:00"
  echo "Running .gpu/bin/gpt_step_bench"
  echo "Run on (16 X 2000 MHz CPU s)"
  echo "---------------------------------------------------------------------------------------------------------"
  echo "Benchmark                                             Time             CPU   Iterations UserCounters..."
  echo "---------------------------------------------------------------------------------------------------------"
  echo "gpt_step/124M_B32_T1024/iterations:10/manual_time       64.2 ms         64.3 ms           10 GiB=30.4453 MFU%=44.9137/s TFLOP/s=444.197/s tokens/s=510.23k/s"
  echo "=== speed_table_all: end anvil | exit 0 | 9 s ==="
  echo "=== speed_table_all: begin pytorch eager,compile ==="
  echo "pytorch-eager: 80.3 ms/step  408,012 tokens/s  356.1 TFLOP/s  MFU 36.0%  peak mem 24.1 GiB  loss 10.987"
  echo "pytorch-compile: 66.1 ms/step  495,212 tokens/s  432.2 TFLOP/s  MFU 43.7%  peak mem 18.2 GiB  loss 10.991"
  echo "=== speed_table_all: end pytorch eager,compile | exit 0 | 51 s ==="
} >"$logs/124M.log"
{
  head_line 350M "16 x 1024"
  echo "=== speed_table_all: begin anvil ==="
  echo "gpt_step/350M_B16_T1024/iterations:5/manual_time        89.8 ms         89.9 ms            5 GiB=41.2 MFU%=47.0123/s TFLOP/s=464.95/s tokens/s=182.5k/s"
  echo "=== speed_table_all: end anvil | exit 0 | 8 s ==="
  echo "=== speed_table_all: begin pytorch compile ==="
  echo "pytorch-compile: 90.4 ms/step  181,300 tokens/s  462.0 TFLOP/s  MFU 46.7%  peak mem 30.5 GiB  loss 11.002"
  echo "=== speed_table_all: end pytorch compile | exit 0 | 60 s ==="
} >"$logs/350M.log"
{
  head_line 1.3B "16 x 2048"
  echo "=== speed_table_all: begin anvil ==="
  echo "gpt_step/1p3B_B16_T2048/iterations:3/manual_time ERROR OCCURRED: 'arena 'activations': cudaMalloc of 90194313216 bytes (84.00 GiB) failed: out of memory; device has 78.50 GiB free of 79.19 GiB'"
  echo "=== speed_table_all: end anvil | exit 0 | 4 s ==="
  echo "=== speed_table_all: begin pytorch compile ==="
  echo "Traceback (most recent call last):"
  echo '  File "bench/reference/gpt2_pytorch.py", line 3, in <module>'
  echo "ModuleNotFoundError: No module named 'torch'"
  echo "=== speed_table_all: end pytorch compile | exit 1 | 0 s ==="
} >"$logs/1.3B.log"
{
  head_line BERT "32 x 512"
  echo "=== speed_table_all: begin anvil ==="
  echo "gpt_step/BERT_large_B32_T512/iterations:5/manual_time       87.4 ms         87.5 ms            5 GiB=35.0391 MFU%=40.8775/s TFLOP/s=404.278/s tokens/s=187.4k/s"
  echo "=== speed_table_all: end anvil | exit 0 | 10 s ==="
  echo "=== speed_table_all: begin pytorch eager,compile ==="
  echo "hf-bert-eager: 119.9 ms/step  136,700 tokens/s  peak mem 22.9 GiB  loss 10.612"
  echo "Traceback (most recent call last):"
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.73 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free."
  echo "=== speed_table_all: end pytorch eager,compile | exit 1 | 40 s ==="
} >"$logs/BERT.log"
{
  head_line T5 "32 x 512/114"
  echo "=== speed_table_all: begin prepare t5 ==="
  echo "preprocess: 31.1K documents, 1.02M tokens in 3.2s"
  echo "=== speed_table_all: end prepare t5 | exit 0 | 4 s ==="
  echo "=== speed_table_all: begin anvil ==="
  echo "[anvil 10:01:02] step  5/20 | loss 10.3120 | lr 1.000e-04 | grad norm 3.210 | 150.2k tok/s | 55.1 TFLOP/s/GPU | MFU 5.6% | mem 9.87 GiB (GPU used 12.4 GiB of 79.1 GiB) | 3.1s elapsed, ETA 9.3s"
  echo "[anvil 10:01:04] step 20/20 | loss 9.8120 | lr 9.000e-05 | grad norm 2.110 | 209.9k tok/s | 77.0 TFLOP/s/GPU | MFU 7.8% | mem 9.87 GiB (GPU used 12.4 GiB of 79.1 GiB) | 5.0s elapsed, ETA 0.0s"
  echo "[anvil 10:01:04] done: 20 steps (0 skipped), 401k tokens in 5.0s (180.1k tok/s, 66.1 TFLOP/s/GPU) | train loss 10.3120 -> 9.8120 | mem 9.87 GiB (GPU used 12.4 GiB of 79.1 GiB)"
  echo "=== speed_table_all: end anvil | exit 0 | 12 s ==="
  echo "=== speed_table_all: begin pytorch compile ==="
  echo "=== speed_table_all: end pytorch compile | exit 124 | 300 s ==="
} >"$logs/T5.log"
{
  head_line llama_1b "8 x 2048"
  echo "=== speed_table_all: begin anvil ==="
  echo "[anvil 10:02:10] step 7/8 | loss 5.5120 | lr 4.000e-04 | grad norm 1.110 | 58.1k tok/s | 458 TFLOP/s/GPU | MFU 46.3% | mem 47.1 GiB (GPU used 52.3 GiB of 79.1 GiB) | 9.1s elapsed, ETA 1.3s"
  echo "[anvil 10:02:11] step 8/8 | loss 5.4120 | lr 4.000e-04 | grad norm 1.010 | 1.23M tok/s | 470 TFLOP/s/GPU | MFU 47.5% | mem 47.1 GiB (GPU used 512 MiB of 79.1 GiB) | 9.4s elapsed, ETA 0.0s"
  echo "=== speed_table_all: end anvil | exit 0 | 15 s ==="
  echo "=== speed_table_all: skip pytorch compile | time budget: ~65 s needed, 20 s left ==="
} >"$logs/llama_1b.log"
# bloom_560m: no log at all (the row never ran).

python3 "$fmt" "$logs" >"$work/table.md"
cat "$work/table.md"
t=$work/table.md
expect "$t" "| GPT-2 124M (32 x 1024) | 510.2K | 44.9% | 30.4 | 408.0K, 24.1 GiB | 495.2K, 18.2 GiB | compile 495.2K | 1.03 | >= 1.25 (short by 0.22) |"
expect "$t" "| GPT-2 350M (16 x 1024) | 182.5K | 47.0% | 41.2 | — (not run) | 181.3K, 30.5 GiB | compile 181.3K | 1.01 | >= 1.25 (short by 0.24) |"
expect "$t" "| GPT 1.3B, d 2048, 16 heads (16 x 2048) | — (OOM) | — | — | — (not run) | — (error, exit 1) | — | — | >= 1.15 |"
expect "$t" "1.3B anvil: arena 'activations': cudaMalloc of 90194313216 bytes"
expect "$t" "1.3B PyTorch compile: ModuleNotFoundError: No module named 'torch'"
expect "$t" "| BERT-large (32 x 512) | 187.4K | 40.9% | 35.0 | 136.7K, 22.9 GiB | — (OOM) | eager 136.7K | 1.37 | >= 1.25 (met) |"
expect "$t" "BERT PyTorch compile: torch.OutOfMemoryError: CUDA out of memory."
expect "$t" "| T5-base (32 x 512/114) | 209.9K | 7.8% | 12.4 |"
expect "$t" "| — (timed out after 300 s) | — | — | >= 1.25 |"
expect "$t" "| llama_1b (8 x 2048) | 1230.0K | 47.5% | 0.5 | — (not run) | — (skipped: time budget: ~65 s needed, 20 s left) | — | — | >= 1.2 |"
expect "$t" "| bloom_560m (4 x 2048) | — (not run) | — | — | — (not run) | — (not run) | — | — | >= 1.4 |"
expect "$t" "Measured 2026-12-07T10:00Z on NVIDIA H100 80GB HBM3, commit abc1234 (scripts/gpu/speed_table_all.sh)."
reject "$t" "Rows from different runs"
# A row of another call is flagged; one of the same call in a later minute is not.
cp -r "$logs" "$work/logs2"
sed -i '1s/date 2026-12-07T10:00Z/date 2026-12-07T10:03Z/' "$work/logs2/350M.log"
python3 "$fmt" "$work/logs2" >"$work/same_run.md"
reject "$work/same_run.md" "Rows from different runs"
sed -i '1s/| run r1/| run r2/' "$work/logs2/350M.log"
python3 "$fmt" "$work/logs2" >"$work/two_runs.md"
expect "$work/two_runs.md" "Rows from different runs"
expect "$work/two_runs.md" "2026-12-07T10:03Z on NVIDIA H100 80GB HBM3, commit abc1234"
[[ $(grep -c '^|' "$t") -eq 9 ]] || { echo "FAIL: expected a header, a rule and 7 rows" >&2; fails=$((fails + 1)); }

# Garbage and an empty directory must not crash it; a missing directory is a clear error.
mkdir -p "$work/empty" "$work/junk"
printf 'random\n=== speed_table_all: end anvil | exit x | ? ===\n\x1b[32mgpt_step/124M\n' >"$work/junk/124M.log"
python3 "$fmt" "$work/empty" >"$work/empty.md"
expect "$work/empty.md" "| GPT-2 124M (32 x 1024) | — (not run) |"
python3 "$fmt" "$work/junk" >"$work/junk.md"
expect "$work/junk.md" "| GPT-2 124M (32 x 1024) | — (not run) |"
if python3 "$fmt" "$work/nonexistent" 2>"$work/err.txt"; then
  echo "FAIL: a missing directory must fail" >&2
  fails=$((fails + 1))
fi
expect "$work/err.txt" "is no directory of row logs"

# --- 2. the whole script with stubs ---------------------------------------------------------------
stub_run=$work/run
cat >"$stub_run" <<'STUB'
#!/usr/bin/env bash
# Stub of .gpu/run: prints what gpt_step_bench, train and preprocess print.
b=$1; shift
case $b in
  gpt_step_bench)
    echo "Run on (16 X 2000 MHz CPU s)"
    case "$*" in
      *124M*) echo "gpt_step/124M_B32_T1024/iterations:10/manual_time       64.2 ms         64.3 ms           10 GiB=30.4453 MFU%=44.9137/s TFLOP/s=444.197/s tokens/s=510.23k/s" ;;
      *350M*) echo "gpt_step/350M_B16_T1024/iterations:5/manual_time       89.8 ms         89.9 ms            5 GiB=41.2 MFU%=47.0123/s TFLOP/s=464.95/s tokens/s=182.5k/s" ;;
      *1p3B*) echo "gpt_step/1p3B_B16_T2048/iterations:3/manual_time        566 ms          566 ms            3 GiB=70.1 MFU%=53.1/s TFLOP/s=525.2/s tokens/s=57.9k/s" ;;
      *BERT*) echo "gpt_step/BERT_large_B32_T512/iterations:5/manual_time       87.4 ms         87.5 ms            5 GiB=35.0391 MFU%=40.8775/s TFLOP/s=404.278/s tokens/s=187.4k/s" ;;
    esac ;;
  preprocess)
    while [[ $# -gt 0 ]]; do [[ $1 == --output-prefix ]] && prefix=$2; shift; done
    kind=text_document
    [[ $prefix == *t5 ]] && kind=text_sentence
    echo x >"${prefix}_$kind.bin"; echo x >"${prefix}_$kind.idx"
    echo "preprocess: done" ;;
  train)
    case $1 in
      *t5_base*) echo "[anvil 10:01:04] step 20/20 | loss 9.8120 | lr 9.000e-05 | grad norm 2.110 | 209.9k tok/s | 77.0 TFLOP/s/GPU | MFU 7.8% | mem 9.87 GiB (GPU used 12.4 GiB of 79.1 GiB) | 5.0s elapsed, ETA 0.0s" ;;
      *llama_1b*) echo "[anvil 10:02:11] step 8/8 | loss 5.4120 | lr 4.000e-04 | grad norm 1.010 | 59.6k tok/s | 470 TFLOP/s/GPU | MFU 47.5% | mem 47.1 GiB (GPU used 52.3 GiB of 79.1 GiB) | 9.4s elapsed, ETA 0.0s" ;;
      *bloom_560m*) [[ "$*" == *train.micro_batch=4* ]] || { echo "stub: expected BLOOM_B=4" >&2; exit 3; }
        echo "[anvil 10:03:11] step 8/8 | loss 5.9120 | lr 3.000e-04 | grad norm 1.510 | 111.4k tok/s | 300 TFLOP/s/GPU | MFU 30.3% | mem 30.1 GiB (GPU used 35.2 GiB of 79.1 GiB) | 3.4s elapsed, ETA 0.0s" ;;
    esac ;;
  *) echo "stub run: unknown binary $b" >&2; exit 127 ;;
esac
STUB
stub_py=$work/python
cat >"$stub_py" <<'STUB'
#!/usr/bin/env bash
# Stub of python3 for bench/reference/*.py: prints each mode's line in the script's format;
# hf_causal_lm.py --family bloom dies of OOM in eager, hf_t5.py compile hangs.
script=$(basename "$1"); shift
modes=eager,compile
family=
while [[ $# -gt 0 ]]; do
  [[ $1 == --modes ]] && modes=$2
  [[ $1 == --family ]] && family=$2
  shift
done
echo "$script $family $modes" >>"${STUB_CALLS:?}"
for m in ${modes//,/ }; do
  case $script in
    gpt2_pytorch.py) echo "pytorch-$m: 66.1 ms/step  495,212 tokens/s  432.2 TFLOP/s  MFU 43.7%  peak mem 18.2 GiB  loss 10.991" ;;
    hf_bert.py) echo "hf-bert-$m: 119.9 ms/step  136,700 tokens/s  peak mem 22.9 GiB  loss 10.612" ;;
    hf_t5.py) [[ $m == compile ]] && exec sleep 30
      echo "hf-t5-v1.0-$m: 264.3 ms/step  75,800 tokens/s  peak mem 30.1 GiB  loss 10.400" ;;
    hf_causal_lm.py)
      if [[ $family == bloom && $m == eager ]]; then
        echo "Traceback (most recent call last):" >&2
        echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.63 GiB." >&2
        exit 1
      fi
      echo "hf-$family-$m: 311.0 ms/step  52,700 tokens/s  420.1 TFLOP/s  MFU 42.5%  peak mem 60.2 GiB  loss 10.800" ;;
  esac
done
STUB
chmod +x "$stub_run" "$stub_py"
echo "corpus text" >"$work/corpus.txt"
calls=$work/calls.txt
: >"$calls"
run_all() {  # OUTPUT_FILE ENV...: speed_table_all.sh with the stubs
  local out=$1
  shift
  env ANVIL_RUN="$stub_run" PYTHON="$stub_py" STUB_CALLS="$calls" CORPUS="$work/corpus.txt" \
    DATA="$work/data" LOGS="$work/all" OUT="$work/out" COMMIT=def5678 "$@" \
    bash scripts/gpu/speed_table_all.sh >"$out" 2>&1 || {
    echo "FAIL: speed_table_all.sh exited $?" >&2
    fails=$((fails + 1))
  }
}
run_all "$work/all.txt" MODES=eager,compile BLOOM_B=4 PART_MAX_S=3
cat "$work/all.txt"
a=$work/all.txt
expect "$a" "| GPT-2 124M (32 x 1024) | 510.2K | 44.9% | 30.4 | 495.2K, 18.2 GiB | 495.2K, 18.2 GiB |"
expect "$a" "| GPT 1.3B, d 2048, 16 heads (16 x 2048) | 57.9K | 53.1% | 70.1 |"
expect "$a" "| BERT-large (32 x 512) | 187.4K | 40.9% | 35.0 | 136.7K, 22.9 GiB | 136.7K, 22.9 GiB | eager 136.7K | 1.37 | >= 1.25 (met) |"
expect "$a" "| T5-base (32 x 512/114) | 209.9K | 7.8% | 12.4 | 75.8K, 30.1 GiB | — (timed out after "
expect "$a" "s) | eager 75.8K | 2.77 | >= 1.25 (met) |"
expect "$a" "| llama_1b (8 x 2048) | 59.6K | 47.5% | 52.3 | 52.7K, 60.2 GiB | 52.7K, 60.2 GiB | eager 52.7K | 1.13 | >= 1.2 (short by 0.07) |"
expect "$a" "| bloom_560m (4 x 2048) | 111.4K | 30.3% | 35.2 | — (OOM) | 52.7K, 60.2 GiB | compile 52.7K | 2.11 | >= 1.4 (met) |"
expect "$a" "bloom_560m PyTorch eager: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.63 GiB."
expect "$a" "on unknown GPU, commit def5678"
reject "$a" "Out of time budget"
# bloom: eager,compile died in eager, then compile alone; the others once each.
expect "$calls" "hf_causal_lm.py bloom eager,compile"
expect "$calls" "hf_causal_lm.py bloom compile"
[[ $(wc -l <"$calls") -eq 8 ]] || { echo "FAIL: expected 8 PyTorch processes" >&2; fails=$((fails + 1)); }
[[ -s $work/out/speed_table_all/table.md && -s $work/out/speed_table_all/bloom_560m.log ]] ||
  { echo "FAIL: logs and table not copied to \$OUT" >&2; fails=$((fails + 1)); }

# A budget that covers no part: everything skipped for the budget, the rest of the table kept.
run_all "$work/budget.txt" ROWS=350m,bloom BUDGET_S=5 DATA="$work/data2"
cat "$work/budget.txt"
b=$work/budget.txt
expect "$b" "| GPT-2 350M (16 x 1024) | — (skipped: time budget: ~10 s needed, "
expect "$b" "| bloom_560m (4 x 2048) | — (data not prepared (skipped: time budget: ~10 s needed, "
expect "$b" "| GPT-2 124M (32 x 1024) | 510.2K |"
expect "$b" "ROWS=350M,bloom_560m scripts/gpu/speed_table_all.sh"

# A row that does not exist is refused by name.
if env ROWS=gpt9 bash scripts/gpu/speed_table_all.sh >"$work/bad.txt" 2>&1; then
  echo "FAIL: an unknown row must fail" >&2
  fails=$((fails + 1))
fi
expect "$work/bad.txt" "unknown row 'gpt9' in ROWS"

if ((fails)); then
  echo "speed_table_format_test: $fails failed" >&2
  exit 1
fi
echo "speed_table_format_test: all passed"
