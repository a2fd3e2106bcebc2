#!/usr/bin/env bash
# Runs on the GPU machine from the repo root with the bundle in .gpu/ (as check.sh): the torchrun
# / deepspeed-launcher path on one GPU, without MPI. Logs go to $OUT.
#   1. tcp_bootstrap_test: an NcclComm whose unique id goes through the TCP rendezvous store.
#   2. bin/train, 8 steps of a tiny GPT on the bundled index fixture, as `torchrun
#      --nproc-per-node 1` starts it (RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1,
#      a free MASTER_PORT) with parallel.reduce_single_rank=true, so the DP gradient reduction's
#      NcclComm is bootstrapped through the store; then the same under mpirun -np 1 (NCCL
#      bootstrapped over MPI), and the two runs' logged losses compared.
#   scripts/gpu/torchrun.sh
set -uo pipefail
out=${OUT:-/tmp/anvil-gpu}
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
[[ -n ${ANVIL_BUILT_FROM:-} ]] && ln -sfn "$PWD" "$ANVIL_BUILT_FROM"
.gpu/run tcp_bootstrap_test 2>&1 | tee "$out/tcp_bootstrap_test.log" | tail -4

work=$(mktemp -d)
args=(configs/tiny_cpu.ini model.vocab_size=65535 data.eod_token=0
      data.paths=tests/io/fixtures/gpt_index/synth_a data.cache_dir="$work/cache"
      data.seq_len=64 model.max_seq_len=64 train.steps=8 train.micro_batch=4 train.global_batch=4
      train.eval_iters=0 train.log_interval=1 train.device=cuda optim.warmup_steps=2
      parallel.reduce_single_rank=true parallel.timeout_s=60)
port=$((20000 + RANDOM % 40000))
RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
  .gpu/run train "${args[@]}" > "$out/train_torchrun.log" 2>&1
echo "torchrun-style run: exit $?"
grep -E "launcher|step +[0-9]+/|error" "$out/train_torchrun.log" | cut -c1-160
mpirun --allow-run-as-root -np 1 -x NCCL_NVLS_ENABLE=0 .gpu/run train "${args[@]}" \
  > "$out/train_mpirun.log" 2>&1
echo "mpirun run: exit $?"
steps() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+' "$1"; }
if [[ $(steps "$out/train_torchrun.log" | wc -l) == 8 ]] &&
  diff <(steps "$out/train_torchrun.log") <(steps "$out/train_mpirun.log"); then
  echo "PASS torchrun: 8 steps, the same losses as under mpirun"
else
  echo "FAIL torchrun: see $out/train_torchrun.log and $out/train_mpirun.log"
fi
rm -rf "$work"
