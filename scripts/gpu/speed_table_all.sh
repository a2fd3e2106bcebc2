#!/usr/bin/env bash
# Issue 26's whole side-by-side speed table from one device call: anvil and the PyTorch
# references on the same GPU, one markdown table of all seven rows (tokens/s, MFU, memory, the
# better PyTorch mode, the ratio, the target), printed by scripts/gpu/speed_table_format.py.
# Runs on the GPU machine from the repo root with the bundle in .gpu/:
#   scripts/gpu/bundle.sh .gpu build/bench/gpt_step_bench build/bin/train build/bin/preprocess
#   mkdir -p .gpu/data && cp data/demo/kjv.txt .gpu/data/corpus.txt   (the demo corpus's text)
# then, there:
#   COMMIT=$(git rev-parse --short HEAD) scripts/gpu/speed_table_all.sh
# The rows and what runs for each (the same shapes, steps and tools as the per-family scripts):
#   124M, 350M, 1.3B, BERT  .gpu/run gpt_step_bench --benchmark_filter=<row>   (speed_table.sh,
#                           bert_speed.sh) and bench/reference/gpt2_pytorch.py | hf_bert.py
#   T5                      .gpu/run train configs/t5_base.ini, 20 steps (t5_speed.sh), and
#                           bench/reference/hf_t5.py
#   llama_1b, bloom_560m    .gpu/run train configs/<row>.ini, 8 steps of B x 2048
#                           (variants_speed.sh), and bench/reference/hf_causal_lm.py
# Data it prepares itself (kept in $DATA between calls on a warm machine): the corpus
# (.gpu/data/corpus.txt, else .gpu/data/kjv.txt, else data/demo/kjv.txt, or CORPUS=file) as
# BERT WordPiece sentences with 100 sentinels for T5, and as Byte tokens (EOD 256) for the
# BLOOM/LLaMA configs. The GPT and BERT rows need no data (random tokens). PyTorch needs torch and
# transformers on the machine.
# Environment:
#   ROWS=124M,350M         a subset (124M 350M 1.3B BERT T5 llama_1b bloom_560m; default all)
#   MODES=eager,compile    PyTorch modes for every row (default: compile, and eager too for BERT,
#                          where eager was the better on the H100 of 2026-12-05)
#   BLOOM_B=4              bloom_560m's micro-batch (the issue's table: 4; variants_speed.sh: 8,
#                          where HF runs out of memory on 80 GB, eager and compile)
#   BUDGET_S=570           wall seconds for the whole call (the device allows 600 a call)
#   PART_MAX_S=300         wall seconds for any one part
#   LOGS=/tmp/anvil-speed-all  row logs (<row>.log) and table.md; a row's log is rewritten when
#                          the row runs, so calls with different ROWS on the same warm machine
#                          add up to one table (its provenance line says when rows differ)
#   OUT=dir                also copy the logs and the table there (the device tool's $OUT)
#   COMMIT, DATA, CORPUS   the commit to print, the prepared-data dir, the corpus file
# Order: the data and every anvil part first (about 2 minutes), then the PyTorch parts row by row.
# A part starts only while the budget's remaining seconds cover its estimate, else it is logged as
# skipped (the table says so) and the command that completes the table is printed at the end;
# a part runs under `timeout` (its share of what is left). A PyTorch process that dies in one
# mode (OOM) is started again for the modes after it.
# Measured on one H100 with a cold torch.compile cache (2026-12-07, the first full run: 594 s
# of the call's 600): data 1 s, anvil parts 1-4 s each (the bundle's steps are short), PyTorch
# (import + init + compile): 124M 38, 350M 53, 1.3B 85, BERT eager+compile 95, T5 113, llama_1b
# 80, bloom_560m 78 (OOM at 8 x 2048). The estimates below (the PyTorch ones from that run, the
# anvil ones generous) gate each part on the budget left, so a part starts only when it can
# finish; a slower machine can still run into a part's timeout. If parts get skipped, run the
# rest on the same warm machine (ROWS=...; the warm inductor cache cuts the compile parts).
set -uo pipefail

ALL_ROWS=(124M 350M 1.3B BERT T5 llama_1b bloom_560m)
declare -A DEFAULT_MODES=([124M]=compile [350M]=compile [1.3B]=compile [BERT]="eager,compile"
  [T5]=compile [llama_1b]=compile [bloom_560m]=compile)
declare -A EST_ANVIL=([124M]=10 [350M]=10 [1.3B]=15 [BERT]=12 [T5]=15 [llama_1b]=20
  [bloom_560m]=15)
declare -A EST_TORCH_BASE=([124M]=8 [350M]=8 [1.3B]=15 [BERT]=12 [T5]=10 [llama_1b]=20
  [bloom_560m]=15)
declare -A EST_EAGER=([124M]=3 [350M]=4 [1.3B]=6 [BERT]=3 [T5]=4 [llama_1b]=5 [bloom_560m]=5)
declare -A EST_COMPILE=([124M]=30 [350M]=45 [1.3B]=70 [BERT]=80 [T5]=100 [llama_1b]=60
  [bloom_560m]=60)

logs=${LOGS:-/tmp/anvil-speed-all}
data=${DATA:-/tmp/anvil-speed-data}
budget=${BUDGET_S:-570}
part_max=${PART_MAX_S:-300}
bloom_b=${BLOOM_B:-4}
runner=${ANVIL_RUN:-.gpu/run}   # `runner BIN args`: the bundle's launcher (tests swap in a stub)
python=${PYTHON:-python3}
start=$SECONDS
skipped_rows=()

die() { echo "speed_table_all: $*" >&2; exit 2; }
say() { printf 'speed_table_all [%4d s] %s\n' $((SECONDS - start)) "$*"; }
left() { echo $((budget - (SECONDS - start))); }

# The canonical row key of a ROWS entry (case and a few spellings forgiven), or nothing.
row_key() {
  case ${1,,} in
    124m) echo 124M ;;
    350m) echo 350M ;;
    1.3b | 1p3b) echo 1.3B ;;
    bert | bert-large | bert_large) echo BERT ;;
    t5 | t5-base | t5_base) echo T5 ;;
    llama | llama_1b) echo llama_1b ;;
    bloom | bloom_560m) echo bloom_560m ;;
  esac
}

parse_rows() {
  rows=()
  local r key list=${ROWS:-}
  for r in ${list//,/ }; do
    key=$(row_key "$r")
    [[ -n $key ]] || die "unknown row '$r' in ROWS (rows: ${ALL_ROWS[*]})"
    rows+=("$key")
  done
  [[ ${#rows[@]} -gt 0 ]] || rows=("${ALL_ROWS[@]}")
}

check_modes() {  # MODES
  local m
  for m in ${1//,/ }; do
    [[ $m == eager || $m == compile ]] || die "unknown PyTorch mode '$m' (modes: eager, compile)"
  done
}

row_shape() {  # ROW -> "B x T" as the row runs it
  case $1 in
    124M) echo "32 x 1024" ;;
    350M) echo "16 x 1024" ;;
    1.3B) echo "16 x 2048" ;;
    BERT) echo "32 x 512" ;;
    T5) echo "32 x 512/114" ;;
    llama_1b) echo "8 x 2048" ;;
    bloom_560m) echo "$bloom_b x 2048" ;;
  esac
}

device_name() {
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep . ||
    echo "unknown GPU"
}

commit_id() {
  [[ -n ${COMMIT:-} ]] && { echo "$COMMIT"; return; }
  git rev-parse --short HEAD 2>/dev/null || echo unknown
}

# run_part ROW PART EST CMD...: CMD's output into the row log between begin/end markers, under a
# timeout; skipped (a skip marker) when the budget's remaining seconds do not cover EST.
# Returns CMD's exit status (75 when skipped); the part's output is also left in $seg.
run_part() {
  local row=$1 part=$2 est=$3 log="$logs/$1.log" rem limit t0 rc
  shift 3
  rem=$(left)
  if ((rem < est)); then
    echo "=== speed_table_all: skip $part | time budget: ~$est s needed, $rem s left ===" >>"$log"
    say "$row $part: skipped (time budget: ~$est s needed, $rem s left)"
    skipped_rows+=("$row")
    return 75
  fi
  limit=$((rem - 3 < part_max ? rem - 3 : part_max))
  echo "=== speed_table_all: begin $part ===" >>"$log"
  t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$seg" 2>&1
  rc=$?
  cat "$seg" >>"$log"
  echo "=== speed_table_all: end $part | exit $rc | $((SECONDS - t0)) s ===" >>"$log"
  say "$row $part: exit $rc in $((SECONDS - t0)) s"
  return "$rc"
}

skip_part() {  # ROW PART REASON
  echo "=== speed_table_all: skip $2 | $3 ===" >>"$logs/$1.log"
  say "$1 $2: skipped ($3)"
}

find_corpus() {
  local c
  for c in "${CORPUS:-}" .gpu/data/corpus.txt .gpu/data/kjv.txt data/demo/kjv.txt; do
    [[ -n $c && -s $c ]] && { echo "$c"; return 0; }
  done
  return 1
}

have_bin() {  # NAME: the bundle (or the stub runner) has it
  [[ -n ${ANVIL_RUN:-} || -x .gpu/bin/$1 ]]
}

# prepare ROW WHAT: $data/kjv_<WHAT> for the row (t5: WordPiece sentences, byte: Byte tokens),
# made once; returns non-zero (and logs why) when it cannot be made.
prepare() {
  local row=$1 what=$2 corpus prefix out args
  prefix=$data/kjv_$what
  if [[ $what == t5 ]]; then
    out=${prefix}_text_sentence
    args=(--tokenizer-type BertWordPieceLowerCase --vocab-file data/bert/vocab.txt
      --split-sentences --vocab-extra-ids 100)
  else
    out=${prefix}_text_document
    args=(--tokenizer-type Byte --append-eod)
  fi
  [[ -s $out.bin && -s $out.idx ]] && return 0
  if ! corpus=$(find_corpus); then
    skip_part "$row" "prepare $what" "no corpus: put the demo text in .gpu/data/corpus.txt"
    return 1
  fi
  if ! have_bin preprocess; then
    skip_part "$row" "prepare $what" "no preprocess in .gpu/: bundle build/bin/preprocess"
    return 1
  fi
  mkdir -p "$data"
  local est=10
  [[ $what == t5 ]] && est=15
  run_part "$row" "prepare $what" "$est" "$runner" preprocess --input "$corpus" \
    --output-prefix "$prefix" "${args[@]}" --workers 8 --no-progress
}

# anvil_cmd ROW: sets cmd to anvil's command for the row (after preparing its data), or returns
# non-zero when it cannot run (the reason is in the log).
anvil_cmd() {
  local row=$1 bin=gpt_step_bench
  case $row in
    T5 | llama_1b | bloom_560m) bin=train ;;
  esac
  if ! have_bin "$bin"; then
    skip_part "$row" anvil "no $bin in .gpu/: bundle it (see this script's header)"
    return 1
  fi
  local train=("$runner" train)
  local common=("data.cache_dir=$work" train.eval_iters=0 train.device=cuda)
  case $row in
    124M | 350M) cmd=("$runner" gpt_step_bench "--benchmark_filter=^gpt_step/${row}_") ;;
    1.3B) cmd=("$runner" gpt_step_bench --benchmark_filter=^gpt_step/1p3B_) ;;
    BERT) cmd=("$runner" gpt_step_bench --benchmark_filter=^gpt_step/BERT) ;;
    T5)
      prepare "$row" t5 || return 1
      cmd=("${train[@]}" configs/t5_base.ini "data.paths=$data/kjv_t5_text_sentence"
        "${common[@]}" train.steps=20 train.log_interval=5 optim.warmup_steps=2) ;;
    llama_1b | bloom_560m)
      prepare "$row" byte || return 1
      local b=8
      [[ $row == bloom_560m ]] && b=$bloom_b
      cmd=("${train[@]}" "configs/$row.ini" "data.paths=$data/kjv_byte_text_document"
        "${common[@]}" data.eod_token=256 train.steps=8 "train.micro_batch=$b"
        "train.global_batch=$b" train.log_interval=1 optim.warmup_steps=1) ;;
  esac
}

# torch_cmd ROW MODES: sets cmd to the PyTorch reference's command for the row.
torch_cmd() {
  local row=$1 modes=$2 ref=bench/reference
  case $row in
    124M) cmd=("$python" "$ref/gpt2_pytorch.py" --modes "$modes") ;;
    350M) cmd=("$python" "$ref/gpt2_pytorch.py" --layers 24 --d 1024 --heads 16 --B 16
      --steps 10 --warmup 3 --modes "$modes") ;;
    1.3B) cmd=("$python" "$ref/gpt2_pytorch.py" --layers 24 --d 2048 --heads 16 --B 16
      --T 2048 --steps 5 --warmup 2 --modes "$modes") ;;
    BERT) cmd=("$python" "$ref/hf_bert.py" --modes "$modes") ;;
    T5) cmd=("$python" "$ref/hf_t5.py" --modes "$modes" --steps 10 --warmup 3) ;;
    llama_1b) cmd=("$python" "$ref/hf_causal_lm.py" --family llama --layers 22 --d 2048
      --heads 32 --ffn 5632 --vocab 32000 --B 8 --T 2048 --steps 8 --warmup 3 --modes "$modes") ;;
    bloom_560m) cmd=("$python" "$ref/hf_causal_lm.py" --family bloom --layers 24 --d 1024
      --heads 16 --vocab 250880 --B "$bloom_b" --T 2048 --steps 8 --warmup 3
      --modes "$modes") ;;
  esac
}

torch_estimate() {  # ROW MODES -> seconds
  local row=$1 est=${EST_TORCH_BASE[$1]} m
  for m in ${2//,/ }; do
    if [[ $m == compile ]]; then est=$((est + EST_COMPILE[$row])); else est=$((est + EST_EAGER[$row])); fi
  done
  echo "$est"
}

# The modes of MODES (comma list) after the first one without a result line in $seg.
modes_after_failure() {  # MODES
  local m rest=() failed=0
  for m in ${1//,/ }; do
    if ((failed)); then
      rest+=("$m")
    elif ! grep -Eq "^(pytorch|hf-.*)-$m: .* tokens/s" "$seg"; then
      failed=1
    fi
  done
  local IFS=,
  echo "${rest[*]}"
}

run_anvil_row() {  # ROW: the row log's header, its data and anvil's part
  local row=$1
  printf '=== speed_table_all: row %s | shape %s | date %s | commit %s | device %s | run %s ===\n' \
    "$row" "$(row_shape "$row")" "$(date -u +%Y-%m-%dT%H:%MZ)" "$commit" "$device" "$run_id" \
    >"$logs/$row.log"
  anvil_cmd "$row" || return 0
  run_part "$row" anvil "${EST_ANVIL[$row]}" "${cmd[@]}"
}

run_torch_row() {  # ROW: the PyTorch modes, again for those after a mode that died
  local row=$1 modes=${MODES:-${DEFAULT_MODES[$1]}}
  while [[ -n $modes ]]; do
    torch_cmd "$row" "$modes"
    run_part "$row" "pytorch $modes" "$(torch_estimate "$row" "$modes")" "${cmd[@]}"
    (($? == 75)) && return 0
    modes=$(modes_after_failure "$modes")
  done
}

print_table() {
  python3 scripts/gpu/speed_table_format.py "$logs" | tee "$logs/table.md"
  if ((${#skipped_rows[@]})); then
    local uniq
    uniq=$(printf '%s\n' "${skipped_rows[@]}" | awk '!seen[$0]++' | paste -sd,)
    echo
    echo "Out of time budget: to complete the table, run again on the same warm machine:"
    echo "  ROWS=$uniq${MODES:+ MODES=$MODES} scripts/gpu/speed_table_all.sh"
  fi
  if [[ -n ${OUT:-} && $OUT != "$logs" ]]; then
    mkdir -p "$OUT/speed_table_all" && cp "$logs"/*.log "$logs/table.md" "$OUT/speed_table_all/"
  fi
}

main() {
  [[ -f scripts/gpu/speed_table_format.py ]] || die "run me from the repo root"
  parse_rows
  check_modes "${MODES:-eager}"
  [[ -x ${runner%% *} ]] || echo "speed_table_all: no $runner (bundle: see this script's header);" \
    "anvil's parts will be skipped" >&2
  mkdir -p "$logs" || die "cannot create $logs"
  work=$(mktemp -d) || die "mktemp failed"
  seg=$work/segment.txt
  trap 'rm -rf "$work"' EXIT
  trap 'echo "speed_table_all: interrupted; the table so far:"; print_table; exit 130' INT TERM
  device=$(device_name)
  commit=$(commit_id)
  run_id=$(date -u +%Y%m%dT%H%M%SZ)-$$  # the rows of this call are one run (their dates may differ)
  say "rows ${rows[*]} on $device, commit $commit, budget $budget s; logs in $logs"
  local row
  for row in "${rows[@]}"; do run_anvil_row "$row"; done
  for row in "${rows[@]}"; do run_torch_row "$row"; done
  print_table
}

main "$@"
