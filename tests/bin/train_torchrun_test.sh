#!/usr/bin/env bash
# bin/train started the way torchrun and the deepspeed launcher start it (ctest
# train_torchrun_test, CPU): N copies with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,
# MASTER_ADDR=127.0.0.1 and a free MASTER_PORT, no MPI. On configs/tiny_cpu.ini shrunk to a few
# steps of a 2-layer model on the bundled index fixture:
#   1. 2 processes with dp=2, and 4 processes with tp=2 dp=2 and with pp=2 dp=2: every step
#      logs the same loss, learning rate and gradient norm as the same layout under mpirun
#      (with MPIRUN set: mpirun and its flags);
#   2. failures end every process with a clear message and a non-zero status, never a hang:
#      a rank killed mid-run (the other sees its dead socket), a rank stopped (SIGSTOP: the
#      watchdog of [parallel] timeout_s fires), a rank that never starts (the rendezvous times
#      out naming MASTER_ADDR and MASTER_PORT), and RANK outside [0, WORLD_SIZE).
#   3. --local_rank=N (appended by the deepspeed launcher) is accepted; beside torchrun's own
#      store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True) anvil's takes MASTER_PORT + 1.
# usage: train_torchrun_test.sh BUILD/bin/train   (from the repository root)
set -euo pipefail
train=$1
work=$(mktemp -d)
started=()  # pids of the ranks this script started
cleanup() {
  for p in "${started[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -c 0  # aborted ranks leave no core files
fail() { echo "FAIL: $*"; exit 1; }

# (synthetic ids, not GPT-2 tokens: no [tokenizer])
base=(configs/tiny_cpu.ini model.vocab_size=65535 data.eod_token=0 tokenizer.type=
      tokenizer.vocab_file= tokenizer.merge_file=
      data.paths=tests/io/fixtures/gpt_index/synth_a data.cache_dir="$work/cache"
      data.seq_len=16 model.max_seq_len=16 model.d_model=32 model.n_heads=2 model.n_layers=2
      train.steps=6 train.micro_batch=2 train.global_batch=4 train.eval_iters=0
      train.log_interval=1 train.device=cpu optim.warmup_steps=2)

# A TCP port nobody listens on now.
free_port() {
  local p
  while :; do
    p=$((20000 + RANDOM % 40000))
    (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
  done
}

# start N PREFIX ARGS...: ranks 0..N-1 in the background as torchrun would start them, rank r's
# output in PREFIX.r; their pids in `pids`. MASTER_PORT: $PORT when set, else a free port.
start() {
  local n=$1 prefix=$2 port
  shift 2
  port=${PORT:-$(free_port)}
  pids=()
  for ((r = 0; r < n; r++)); do
    RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 \
      MASTER_PORT=$port "$train" "${base[@]}" "$@" > "$prefix.$r" 2>&1 &
    pids+=($!)
    started+=($!)
  done
}

# wait_ranks SECONDS: waits for `pids`; a rank still running after SECONDS is a hang (killed,
# fail). Sets `codes` to the exit statuses.
wait_ranks() {
  local limit=$1 t=0 p
  while :; do
    local running=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && running=1; done
    ((running)) || break
    ((t++ < limit * 10)) || { kill -9 "${pids[@]}" 2>/dev/null; fail "ranks hang after ${limit} s"; }
    sleep 0.1
  done
  codes=()
  for p in "${pids[@]}"; do
    local rc=0
    wait "$p" || rc=$?
    codes+=("$rc")
  done
}

# The per-step numbers rank 0 logged.
steps() { grep -oE 'step +[0-9]+/[0-9]+ \| loss [0-9.]+ \| lr [0-9.e+-]+ \| grad norm [0-9.]+' "$1" \
  | sed -E 's/ +/ /g'; }

# 1. Equal losses under torchrun-style variables and under mpirun.
for layout in "2 parallel.dp=2" "4 parallel.tp=2 parallel.dp=2" "4 parallel.pp=2 parallel.dp=2"; do
  read -r n args <<< "$layout"
  name="np$n ${args}"
  # shellcheck disable=SC2086
  start "$n" "$work/tr" $args --local_rank=0
  wait_ranks 120
  for ((r = 0; r < n; r++)); do
    [[ ${codes[$r]} == 0 ]] || fail "$name: rank $r exited ${codes[$r]}: $(tail -3 "$work/tr.$r")"
  done
  grep -q "launcher torchrun" "$work/tr.0" || fail "$name: not run as torchrun"
  [[ $(steps "$work/tr.0" | wc -l) == 6 ]] || fail "$name: expected 6 step lines: $(steps "$work/tr.0")"
  echo "torchrun $name:"
  steps "$work/tr.0"
  if [[ -n ${MPIRUN:-} ]]; then
    # shellcheck disable=SC2086
    timeout 120 $MPIRUN -np "$n" "$train" "${base[@]}" $args > "$work/mpi.log" 2>&1 \
      || fail "$name: mpirun failed: $(tail -3 "$work/mpi.log")"
    grep -q "launcher openmpi" "$work/mpi.log" || fail "$name: mpirun run is not openmpi"
    echo "mpirun $name:"
    steps "$work/mpi.log"
    diff <(steps "$work/tr.0") <(steps "$work/mpi.log") \
      || fail "$name: torchrun and mpirun log different losses"
  fi
done

# 1b. torchrun's agent serves torch's own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True):
# anvil's store moves to MASTER_PORT + 1. A lone rank 0 of 2 (a store on port P, waiting for a
# rank that never comes) stands in for the agent's store.
agent_port=$(free_port)
RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$agent_port "$train" "${base[@]}" \
  parallel.dp=2 > "$work/agent.log" 2>&1 &
agent=$!
started+=($agent)
for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$agent_port") 2>/dev/null && break; sleep 0.1; done
(exec 3<>"/dev/tcp/127.0.0.1/$agent_port") 2>/dev/null || fail "the stand-in agent store did not start"
export TORCHELASTIC_USE_AGENT_STORE=True PORT=$agent_port
start 2 "$work/beside" parallel.dp=2
unset TORCHELASTIC_USE_AGENT_STORE PORT
wait_ranks 120
[[ ${codes[0]} == 0 && ${codes[1]} == 0 ]] \
  || fail "beside torchrun's store: exited ${codes[*]}: $(tail -3 "$work/beside.0")"
[[ $(steps "$work/beside.0" | wc -l) == 6 ]] || fail "beside torchrun's store: not 6 steps"
kill -9 "$agent"

# 2a. A rank killed mid-run: the other ends at once with the dead connection named.
start 2 "$work/kill" parallel.dp=2 train.steps=100000 parallel.timeout_s=120
for _ in $(seq 600); do grep -qE "step +2/" "$work/kill.0" && break; kill -0 "${pids[1]}" || break; sleep 0.1; done
kill -9 "${pids[1]}" || fail "rank 1 ended before it was killed: $(tail -3 "$work/kill.1")"
wait_ranks 30
[[ ${codes[0]} != 0 ]] || fail "rank 0 exited 0 after its peer was killed"
grep -q "failed on global rank 0: .*(that rank exited, crashed or aborted" "$work/kill.0" \
  || fail "no dead-peer message: $(tail -3 "$work/kill.0")"

# 2b. A rank that hangs (stopped): the watchdog ends rank 0, then rank 1 finds it gone.
# (timeout_s 10: enough for the steps of a loaded CI machine, not to wait long.)
start 2 "$work/stop" parallel.dp=2 train.steps=100000 parallel.timeout_s=10
for _ in $(seq 600); do grep -qE "step +2/" "$work/stop.0" && break; kill -0 "${pids[1]}" || break; sleep 0.1; done
kill -STOP "${pids[1]}" || fail "rank 1 ended before it was stopped: $(tail -3 "$work/stop.1")"
for _ in $(seq 600); do kill -0 "${pids[0]}" 2>/dev/null || break; sleep 0.1; done
kill -CONT "${pids[1]}" 2>/dev/null || true  # (checked below)
wait_ranks 30
[[ ${codes[0]} != 0 && ${codes[1]} != 0 ]] || fail "a stalled run exited ${codes[*]}"
grep -q "watchdog: .* has not finished after .* (timeout 10.0 s) on global rank 0" "$work/stop.0" \
  || fail "no watchdog message: $(tail -3 "$work/stop.0")"
grep -q "\[anvil rank 1\] TcpComm .* the connection to group rank 0" "$work/stop.1" \
  || fail "rank 1 did not report rank 0's end: $(tail -3 "$work/stop.1")"

# 2c. Rank 1 of 2 never starts: rank 0 gives up after timeout_s, naming the rendezvous.
port=$(free_port)
pids=()
RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$train" "${base[@]}" \
  parallel.dp=2 parallel.timeout_s=2 > "$work/alone.0" 2>&1 &
pids+=($!)
started+=($!)
wait_ranks 30
[[ ${codes[0]} != 0 ]] || fail "rank 0 without its peer exited 0"
grep -q "rendezvous store (MASTER_ADDR=127.0.0.1 port $port) get(.*) on rank 0: timed out" \
  "$work/alone.0" || fail "no rendezvous timeout message: $(tail -3 "$work/alone.0")"

# 2d. Inconsistent variables are refused before anything starts.
rc=0
RANK=2 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 timeout 30 "$train" "${base[@]}" \
  > "$work/bad.log" 2>&1 || rc=$?
[[ $rc != 0 ]] || fail "RANK=2 WORLD_SIZE=2 was accepted"
grep -q "torchrun launch: RANK=2 is outside \[0, WORLD_SIZE=2)" "$work/bad.log" \
  || fail "no RANK message: $(tail -3 "$work/bad.log")"
echo "PASS"
