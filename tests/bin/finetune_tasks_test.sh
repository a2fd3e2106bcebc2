#!/usr/bin/env bash
# bin/finetune end to end on Megatron's task formats (ctest finetune_tasks_test), on the small
# fixtures of tests/io/fixtures/tasks, with a byte-level GPT from scratch and a linear head:
#   - MNLI (3 classes): a few steps, the dev accuracy of dev_matched and dev_mismatched logged
#     each; the result (model + classifier) saved, then evaluated again by bin/finetune without
#     train_data: the same accuracy and loss as at the end of training (the head was saved and
#     loaded, not re-initialized);
#   - the same MNLI run on 2 data-parallel ranks (mpirun) logs the same losses (to 1e-4), and
#     so do TP2, PP2 and TP2 x PP2 (a BERT too); checkpoints load across these layouts;
#   - QQP (2 classes; the fixture's malformed rows are skipped with warnings, as Megatron does);
#   - RACE (multiple choice over 4 options);
#   - a BERT on MNLI ([CLS] pair layout, the pooler + classifier head), saved and reloaded;
#   - bad settings and files: exit 1 with a message naming the key or the file and line.
# usage: finetune_tasks_test.sh BUILD/bin/finetune (from the repository root); MPIRUN: the
# mpirun command line (skipped when unset); DEVICE: [train] device (default cpu; cuda on a GPU
# machine, then without MPIRUN: two ranks would share the one GPU).
set -euo pipefail
finetune=$1
fx=tests/io/fixtures/tasks
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}
cat > "$work/ft.ini" <<INI
[model]
vocab_size = 257
# (fixed: [model] vocab_multiple grows with tp, and a fresh init depends on the padded size)
padded_vocab = 512
max_seq_len = 96
d_model = 32
n_heads = 4
n_layers = 2
[data]
seq_len = 96
eod_token = 256
[tokenizer]
type = Byte
[finetune]
format = mnli
head = linear
train_data = $fx/MNLI/train.tsv
dev_data = $fx/MNLI/dev_matched.tsv, $fx/MNLI/dev_mismatched.tsv
[train]
micro_batch = 2
global_batch = 4
steps = 4
device = ${DEVICE:-cpu}
log_interval = 2
[optim]
lr = 1e-3
INI
run() {  # LOG ARGS...
  local log=$1
  shift
  "$finetune" "$work/ft.ini" "$@" > "$work/$log" 2>&1 || fail "finetune $*: $(tail -5 "$work/$log")"
}
# dev line of step S for dev set NAME: "accuracy loss"
dev() { grep -E "step +$2/[0-9]+ \| dev accuracy .* \| $3" "$work/$1" | head -1 |
  sed -E 's/.*dev accuracy ([0-9.]+) .*dev loss ([0-9.]+).*/\1 \2/'; }

run mnli.log checkpoint.save="$work/ck"
for name in dev_matched.tsv dev_mismatched.tsv; do
  [[ -n $(dev mnli.log 0 "$name") && -n $(dev mnli.log 4 "$name") ]] ||
    fail "no dev accuracy of $name: $(cat "$work/mnli.log")"
done
grep -q "12 training examples, dev sets 2, 3 classes (linear head)" "$work/mnli.log" ||
  fail "MNLI setup line: $(cat "$work/mnli.log")"
grep -q "step 3/4 | dev accuracy .* | dev_matched.tsv | epoch 1 done" "$work/mnli.log" || fail "no end-of-epoch evaluation: $(cat "$work/mnli.log")"
grep -q "saved $work/ck/step_00000004" "$work/mnli.log" || fail "not saved"
run mnli_eval.log finetune.train_data= checkpoint.load="$work/ck"
grep -q "and head tensors classifier.weight, classifier.bias" "$work/mnli_eval.log" || fail "classifier not loaded"
for name in dev_matched.tsv dev_mismatched.tsv; do
  [[ "$(dev mnli_eval.log 0 "$name")" == "$(dev mnli.log 4 "$name")" ]] ||
    fail "$name after loading: $(dev mnli_eval.log 0 "$name"), trained: $(dev mnli.log 4 "$name")"
done

# A BERT (post-LN, token types, WordPiece) on MNLI: Megatron's [CLS] a [SEP] b [SEP], the
# head's pooler and classifier at [CLS]; saved and reloaded with every head tensor.
bert=(model.type=bert model.norm_placement=post model.activation=gelu_erf model.type_vocab_size=2
  model.embed_layernorm=true model.vocab_size=30522 model.padded_vocab=30720 tokenizer.type=BertWordPieceLowerCase
  tokenizer.vocab_file=data/bert/vocab.txt)
# BERT on CUDA runs through flash attention, which needs head_dim 64 or 128.
[[ ${DEVICE:-cpu} == cuda ]] && bert+=(model.d_model=128 model.n_heads=2)
run bert.log "${bert[@]}" checkpoint.save="$work/bert_ck"
[[ -n $(dev bert.log 4 dev_mismatched.tsv) ]] || fail "BERT dev accuracy: $(cat "$work/bert.log")"
run bert_eval.log "${bert[@]}" finetune.train_data= checkpoint.load="$work/bert_ck"
grep -q "head tensors pooler.dense.weight, pooler.dense.bias, classifier.weight, classifier.bias" \
  "$work/bert_eval.log" || fail "BERT head not loaded: $(cat "$work/bert_eval.log")"
[[ "$(dev bert_eval.log 0 dev_matched.tsv)" == "$(dev bert.log 4 dev_matched.tsv)" ]] ||
  fail "BERT after loading: $(dev bert_eval.log 0 dev_matched.tsv), trained: $(dev bert.log 4 dev_matched.tsv)"

if [[ -n ${MPIRUN:-} ]]; then
  # shellcheck disable=SC2086
  $MPIRUN -np 2 "$finetune" "$work/ft.ini" > "$work/dp.log" 2>&1 ||
    fail "mpirun -np 2: $(tail -5 "$work/dp.log")"
  grep -q "dp 2" "$work/dp.log" || fail "not 2 data-parallel ranks: $(cat "$work/dp.log")"
  for s in 2 4; do
    a=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/mnli.log" | awk '{print $NF}')
    b=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/dp.log" | awk '{print $NF}')
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-4 && d > -1e-4) }' ||
      fail "step $s loss on 2 ranks $b, on one $a"
  done
  # Tensor and pipeline parallelism: the same losses (model/tasks/finetune_cls.h) on TP2, PP2 and
  # TP2 x PP2; a checkpoint saved on one rank evaluates alike on TP2 x PP2 (any layout loads),
  # and one saved by TP2 x PP2 on one rank.
  same_losses() {  # LOG
    for s in 2 4; do
      a=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/mnli.log" | awk '{print $NF}')
      b=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/$1" | awk '{print $NF}')
      awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-4 && d > -1e-4) }' ||
        fail "$1: step $s loss $b, on one rank $a"
    done
  }
  for layout in "2 parallel.tp=2" "2 parallel.pp=2" "4 parallel.tp=2 parallel.pp=2"; do
    read -r np a b <<< "$layout"
    # shellcheck disable=SC2086
    $MPIRUN -np "$np" "$finetune" "$work/ft.ini" $a $b checkpoint.save="$work/mp$np" \
      > "$work/mp$np.log" 2>&1 || fail "mpirun -np $np $a $b: $(tail -5 "$work/mp$np.log")"
    same_losses "mp$np.log"
  done
  grep -q "tp 2, pp 2, dp 1" "$work/mp4.log" || fail "not TP2 x PP2: $(cat "$work/mp4.log")"
  # shellcheck disable=SC2086
  $MPIRUN -np 4 "$finetune" "$work/ft.ini" parallel.tp=2 parallel.pp=2 finetune.train_data= \
    checkpoint.load="$work/ck" > "$work/mp_eval.log" 2>&1 || fail "TP2 x PP2 evaluation: $(tail -5 "$work/mp_eval.log")"
  [[ "$(dev mp_eval.log 0 dev_matched.tsv)" == "$(dev mnli.log 4 dev_matched.tsv)" ]] ||
    fail "TP2 x PP2 from a one-rank checkpoint: $(dev mp_eval.log 0 dev_matched.tsv), one rank: $(dev mnli.log 4 dev_matched.tsv)"
  run mp_back.log finetune.train_data= checkpoint.load="$work/mp4"
  [[ "$(dev mp_back.log 0 dev_matched.tsv)" == "$(dev mp4.log 4 dev_matched.tsv)" ]] ||
    fail "one rank from a TP2 x PP2 checkpoint: $(dev mp_back.log 0 dev_matched.tsv), trained: $(dev mp4.log 4 dev_matched.tsv)"
  # A BERT on TP2 x PP2: the losses of one rank.
  run bert1.log "${bert[@]}"
  # shellcheck disable=SC2086
  $MPIRUN -np 4 "$finetune" "$work/ft.ini" "${bert[@]}" parallel.tp=2 parallel.pp=2 \
    > "$work/bert4.log" 2>&1 || fail "BERT TP2 x PP2: $(tail -5 "$work/bert4.log")"
  for s in 2 4; do
    a=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/bert1.log" | awk '{print $NF}')
    b=$(grep -oE "step +$s/4 \| loss [0-9.]+" "$work/bert4.log" | awk '{print $NF}')
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; exit !(a != "" && d < 1e-4 && d > -1e-4) }' ||
      fail "BERT step $s loss on TP2 x PP2 $b, on one rank $a"
  done
  # shellcheck disable=SC2086
  if $MPIRUN -np 2 "$finetune" "$work/ft.ini" parallel.pp=2 parallel.virtual_stages=2 \
    model.n_layers=4 > "$work/vs.log" 2>&1; then
    fail "virtual_stages 2 accepted"
  fi
  grep -q "virtual_stages 2 must be 1" "$work/vs.log" || fail "virtual_stages: $(cat "$work/vs.log")"
fi

run qqp.log finetune.format=qqp finetune.train_data="$fx/QQP/train.tsv" \
  finetune.dev_data="$fx/QQP/dev.tsv"
grep -q "train.tsv:4: skipped: 7 columns" "$work/qqp.log" || fail "QQP warning: $(cat "$work/qqp.log")"
[[ -n $(dev qqp.log 4 dev.tsv) ]] || fail "QQP dev accuracy: $(cat "$work/qqp.log")"

run race.log finetune.format=race finetune.task=multiple_choice \
  finetune.train_data="$fx/RACE/train/middle" finetune.dev_data="$fx/RACE/dev/middle"
grep -q "4 training examples, dev sets 1, 4 choices (linear head)" "$work/race.log" ||
  fail "RACE setup line: $(cat "$work/race.log")"
[[ -n $(dev race.log 4 middle) ]] || fail "RACE dev accuracy: $(cat "$work/race.log")"

expect_error() {  # PATTERN ARGS...
  local pattern=$1 rc=0
  shift
  "$finetune" "$work/ft.ini" "$@" > "$work/err.log" 2>&1 || rc=$?
  ((rc == 1)) || fail "$*: exit status $rc, expected 1: $(cat "$work/err.log")"
  grep -qE -e "$pattern" "$work/err.log" || fail "$*: no '$pattern' in: $(cat "$work/err.log")"
}
expect_error "task: classification does not fit format race" finetune.format=race \
  finetune.train_data="$fx/RACE/train/middle"
expect_error "head: multiple_choice needs head = linear" finetune.format=race \
  finetune.task=multiple_choice finetune.head=label_words
expect_error "labels: format mnli has fixed labels" finetune.labels=a,b,c
expect_error "head: format qqp needs head = linear" finetune.format=qqp finetune.head=label_words
printf 'h\n0\tp\tq\tg\ta\tb\tc\td\tx\ty\tl\tunsure\n' > "$work/bad.tsv"
expect_error "bad.tsv:2: label \"unsure\"" finetune.train_data="$work/bad.tsv"
expect_error "QQP header of 12 columns" finetune.format=qqp
expect_error "tp: 1 launched ranks are not divisible by tp 2" parallel.tp=2
echo "finetune_tasks_test: all passed"
