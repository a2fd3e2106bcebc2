#!/usr/bin/env bash
# bin/train with Megatron's run-length, batch, lr and held-out options end to end on the CPU
# (ctest train_megatron_schedule_test):
#   1. train_samples 120 with rampup_batch_size 2 2 24 (19 steps), skip_iterations 4-5,
#      warmup_samples and decay_tokens: the index caches sized as Megatron sizes the splits
#      (train 120, validation (19 // 5 + 1) * 2 * 8 = 64, test 2 * 8 = 16 samples), the data-only
#      steps logged, the lr of step 1 is 0, the test split evaluated at the end;
#   2. with MPIRUN set (mpirun and its flags) on the CPU: the same run on two data-parallel ranks
#      logs the same losses (4 decimals);
#   3. [data] *_weighted_split_paths: named training, validation and test groups, each group's
#      loss logged under its name, caches named after the groups;
#   4. [data] last_epoch_cutoff = 0.8: the cache names carry it.
# usage: train_megatron_schedule_test.sh BUILD/bin/train (from the repository root; DEVICE=cuda
#        runs parts 1, 3 and 4 on a GPU)
set -euo pipefail
train=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
data=tests/io/fixtures/gpt_index
cat > "$work/t.ini" <<INI
[model]
vocab_size = 65535
max_seq_len = 16
d_model = 32
n_heads = 2
n_layers = 2
[data]
paths = $data/synth_a
seq_len = 16
eod_token = 0
split = 80,15,5
cache_dir = $work/cache
[train]
micro_batch = 1
global_batch = 8
train_samples = 120
rampup_batch_size = 2 2 24
skip_iterations = 4-5
device = ${DEVICE:-cpu}
eval_interval = 5
eval_iters = 2
log_interval = 1
[optim]
lr = 1e-2
warmup_samples = 16
decay_tokens = 1500
INI
fail() { echo "FAIL: $*"; exit 1; }
losses() { grep -oE 'step +[0-9]+/[0-9]+ \| (loss|val loss|test loss) [0-9.na]+' "$1" | sed -E 's/ +/ /g'; }

# 1. One rank.
"$train" "$work/t.ini" > "$work/one.log" 2>&1 || fail "run failed: $(tail -3 "$work/one.log")"
for f in synth_a_train_indexmap_120ns_16sl_1234s synth_a_valid_indexmap_64ns_16sl_1234s \
         synth_a_test_indexmap_16ns_16sl_1234s; do
  [[ -f "$work/cache/${f}_shuffle_idx.npy" ]] || fail "no cache $f: $(ls "$work/cache")"
done
grep -qE "step +19/19 \| loss" "$work/one.log" || fail "not 19 steps"
grep -qE "step +1/19 \| loss [0-9.]+ \| lr 0.000e\+00" "$work/one.log" || fail "step 1 not at lr 0"
grep -qE "step +4/19 .*data only" "$work/one.log" || fail "step 4 not data only"
grep -qE "step +19/19 \| test loss" "$work/one.log" || fail "no test loss"
[[ $(grep -cE "step +[0-9]+/19 \| val loss" "$work/one.log") == 5 ]] \
  || fail "not 5 evaluations (0, 5, 10, 15, end)"

# 2. Two data-parallel ranks: the same losses.
if [[ -n ${MPIRUN:-} && ${DEVICE:-cpu} == cpu ]]; then
  $MPIRUN -np 2 "$train" "$work/t.ini" > "$work/two.log" 2>&1 \
    || fail "dp=2 run failed: $(tail -3 "$work/two.log")"
  diff <(losses "$work/one.log") <(losses "$work/two.log") || fail "dp=2 losses differ"
fi

# 3. Named groups.
"$train" "$work/t.ini" data.paths= data.split=969,30,1 data.train_weighted_split_paths="TR: 1 0:0.8 $data/synth_a" \
  data.valid_weighted_split_paths="A: 1 0.8:0.9 $data/synth_a; B: 0.5 0.9:1 $data/synth_a, 0.5 0.8:1 $data/synth_b" \
  data.test_weighted_split_paths="T: 1 0.9:1 $data/synth_b" > "$work/groups.log" 2>&1 \
  && fail "split set with train_weighted_split_paths was accepted"
grep -q "excludes \[data\] paths and split" "$work/groups.log" || fail "no mode error: $(tail -1 "$work/groups.log")"
sed -i '/^paths = /d; /^split = /d' "$work/t.ini"
"$train" "$work/t.ini" data.train_weighted_split_paths="TR: 1 0:0.8 $data/synth_a" \
  data.valid_weighted_split_paths="A: 1 0.8:0.9 $data/synth_a; B: 0.5 0.9:1 $data/synth_a, 0.5 0.8:1 $data/synth_b" \
  data.test_weighted_split_paths="T: 1 0.9:1 $data/synth_b" > "$work/groups.log" 2>&1 \
  || fail "groups run failed: $(tail -3 "$work/groups.log")"
[[ $(grep -cE "\| A loss [0-9.]+ \(ppl [0-9.]+\) \| B loss" "$work/groups.log") == 5 ]] \
  || fail "A and B not evaluated 5 times"
grep -qE "step +19/19 \| T loss" "$work/groups.log" || fail "no T loss"
for f in synth_a_TR_indexmap_120ns synth_a_A_indexmap_64ns synth_b_B_indexmap_33ns synth_b_T_indexmap_16ns; do
  ls "$work/cache/${f}"_16sl_1234s_shuffle_idx.npy > /dev/null 2>&1 || fail "no cache $f: $(ls "$work/cache")"
done

# 4. Another last-epoch cutoff names the caches.
"$train" "$work/t.ini" data.train_weighted_split_paths="TR: 1 0:0.8 $data/synth_a" train.eval_iters=0 \
  data.last_epoch_cutoff=0.8 > "$work/cutoff.log" 2>&1 || fail "cutoff run failed: $(tail -3 "$work/cutoff.log")"
[[ -f "$work/cache/synth_a_TR_indexmap_120ns_16sl_1234s_0.8lec_shuffle_idx.npy" ]] \
  || fail "no cutoff in the cache name: $(ls "$work/cache")"
echo PASS
