#!/usr/bin/python3
"""Writes tests/model/fixtures/prefix_lm.txt: prefix-LM batches as Megatron-DeepSpeed's
pretrain_prefix_lm.py builds them (get_batch: get_prefix_indices, then
get_ltor_masks_and_position_ids with prefix_indices and loss_on_targets_only, then
reweight_loss_mask_), transcribed from megatron/utils.py with lists instead of torch tensors,
and draws of CPython's random module. tests/model/prefix_lm_test.cc compares anvil's
model/train/prefix_lm and io/python_random with it exactly.

One difference from the fork, on purpose (see model/train/prefix_lm.h): the fork draws every
sample's prefix from the process-wide `random` stream; anvil draws sample k's from
random.Random((seed << 64) + k). This script seeds the module the same way before each sample,
so the draws themselves (randint over the Mersenne Twister) are the fork's.

Run with Debian's python3 (standard library only):
    /usr/bin/python3 scripts/make_prefix_lm_fixture.py [out_file]

Output, one record per line, fields separated by spaces:
    random SEED N v_1 .. v_N      getrandbits(32) of random.Random(SEED)
    randint SEED A B v_1 .. v_8   randint(A, B) of random.Random(SEED), 8 draws
    case NAME                     a new case; then its parameters:
    param KEY VALUE               seq_len, eod, seed, reset_attention_mask, reset_position_ids,
                                  eod_mask_loss, loss_on_targets_only, reweight (0/1 for bools)
    sample K                      sample index K; then its lines:
    record t_0 .. t_T             the T + 1 tokens (inputs [0, T), labels [1, T + 1))
    prefix p_1 ..                 the prefix indices (one per row, or one per document)
    loss_mask w_0 .. w_{T-1}      float32 values, repr of the float
    position_ids q_0 .. q_{T-1}
    mask r_0 .. r_{T-1}           row i: T characters, 1 where query i sees key j
    end
"""
import random
import struct
import sys

SEQ_LEN = 16
VOCAB = 12
EOD = 5
SEED = 1234
SAMPLES = 8


def f32(x):
    return struct.unpack('<f', struct.pack('<f', x))[0]


# --- megatron/utils.py get_prefix_indices (partial_prefix_indices=None), one row -------------
def get_prefix_indices(row, eod_token, reset_attention_mask):
    seq_length = len(row)
    if reset_attention_mask:
        prefix_indices = []
        eod_indices = [i for i, t in enumerate(row) if t == eod_token]
        if row[-1] != eod_token:
            eod_indices.append(len(row))
        prev_index = 0
        for eod_index in eod_indices:
            prefix_index = random.randint(prev_index + 1, eod_index)
            assert prev_index + 1 <= prefix_index <= eod_index
            prefix_indices.append(prefix_index)
            prev_index = eod_index + 1
        return prefix_indices
    prefix_index = random.randint(1, seq_length)
    assert 1 <= prefix_index <= seq_length
    return prefix_index


# --- megatron/utils.py get_ltor_masks_and_position_ids, one row ------------------------------
def get_ltor_masks_and_position_ids(row, eod_token, reset_position_ids, reset_attention_mask,
                                    eod_mask_loss, prefix_indices, loss_on_targets_only):
    seq_length = len(row)
    attention_mask = [[1.0 if j <= i else 0.0 for j in range(seq_length)]
                      for i in range(seq_length)]
    loss_mask = [1.0] * seq_length
    if eod_mask_loss:
        for t in range(seq_length):
            if row[t] == eod_token:
                loss_mask[t] = 0.0
    position_ids = list(range(seq_length))
    eod_index = [t for t in range(seq_length) if row[t] == eod_token]
    if row[-1] != eod_token:
        eod_index.append(len(row))
    prev_index = 0
    for j in range(len(eod_index)):
        i = eod_index[j]
        if reset_attention_mask:
            for r in range(i + 1, seq_length):
                for c in range(0, min(i + 1, seq_length)):
                    attention_mask[r][c] = 0.0
            if prefix_indices:
                p = prefix_indices[j]
                for r in range(prev_index, p):
                    for c in range(prev_index, p):
                        attention_mask[r][c] = 1.0
                if loss_on_targets_only:
                    for t in range(prev_index, max(prev_index, p - 1)):
                        loss_mask[t] = 0.0
        if reset_position_ids:
            for t in range(i + 1, seq_length):
                position_ids[t] -= (i + 1 - prev_index)
        prev_index = i + 1
    if prefix_indices is not None and reset_attention_mask is False:
        p = prefix_indices
        for r in range(p):
            for c in range(p):
                attention_mask[r][c] = 1.0
        if loss_on_targets_only:
            for t in range(0, max(0, p - 1)):
                loss_mask[t] = 0.0
    visible = [[attention_mask[r][c] >= 0.5 for c in range(seq_length)]
               for r in range(seq_length)]
    return visible, loss_mask, position_ids


# --- megatron/utils.py reweight_loss_mask_ (float32 as torch) --------------------------------
def reweight_loss_mask_(loss_mask):
    seq_length = len(loss_mask)
    for t in range(seq_length):
        w = f32(f32(f32(seq_length - t) / f32(seq_length + 1)) * f32(2.0))
        loss_mask[t] = f32(loss_mask[t] * w)


# --- megatron/model/gpt_model.py get_cross_entropy(is_prefix=True): GPTModelPipe's divisor is
# micro_batch_size * average_tokens_per_sample (float32 as torch) --------------------------------
def pipe_tokens_per_sample(targets_only, reweight):
    T = SEQ_LEN
    if not targets_only:
        return float(T)
    if not reweight:
        return (T + 1) / 2
    # reweight.flip(-1).cumsum(-1).mean(): the weights ascending, running sums, their mean.
    w = [f32(f32(f32(T - t) / f32(T + 1)) * f32(2.0)) for t in range(T)]
    acc, total = f32(0.0), f32(0.0)
    for v in reversed(w):
        acc = f32(acc + v)
        total = f32(total + acc)
    return f32(total / f32(T))


def record(index):
    # T + 1 tokens; no eod first and no two eods in a row (the fork's randint would raise on
    # a document of its eod alone). Eods are frequent, so rows hold several documents.
    r = random.Random(99 + index)
    out = []
    for t in range(SEQ_LEN + 1):
        tok = r.randrange(VOCAB)
        while tok == EOD and (t == 0 or out[-1] == EOD):
            tok = r.randrange(VOCAB)
        if t > 0 and out[-1] != EOD and r.random() < 0.15:
            tok = EOD
        out.append(tok)
    return out


CASES = [
    # name, reset_attention_mask, reset_position_ids, eod_mask_loss, loss_on_targets_only, reweight
    ('row_targets', False, False, False, True, False),
    ('row_all_reweight', False, False, True, False, True),
    ('doc_targets', True, True, True, True, False),
    ('doc_all', True, False, False, False, False),
    ('row_targets_reweight', False, False, False, True, True),
]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else 'tests/model/fixtures/prefix_lm.txt'
    lines = []
    for seed in (0, 1, 1234, (5 << 64) + 7, (2 ** 32) + 3):
        r = random.Random(seed)
        lines.append('random %d 8 %s' % (seed, ' '.join(str(r.getrandbits(32)) for _ in range(8))))
    for seed, a, b in ((1234, 1, 16), (7, 3, 3), ((1 << 64) + 2, 1, 1000), (9, 0, 2 ** 31)):
        r = random.Random(seed)
        lines.append('randint %d %d %d %s' % (seed, a, b,
                                               ' '.join(str(r.randint(a, b)) for _ in range(8))))
    for name, reset_mask, reset_pos, eod_mask, targets_only, reweight in CASES:
        lines.append('case ' + name)
        for key, value in (('seq_len', SEQ_LEN), ('eod', EOD), ('seed', SEED),
                           ('reset_attention_mask', int(reset_mask)),
                           ('reset_position_ids', int(reset_pos)),
                           ('eod_mask_loss', int(eod_mask)),
                           ('loss_on_targets_only', int(targets_only)),
                           ('reweight', int(reweight))):
            lines.append('param %s %d' % (key, value))
        lines.append('pipe_tokens_per_sample %r' % pipe_tokens_per_sample(targets_only, reweight))
        for k in range(SAMPLES):
            rec = record(k)
            tokens = rec[:-1]
            random.seed((SEED << 64) + k)
            prefix = get_prefix_indices(tokens, EOD, reset_mask)
            visible, loss_mask, pos = get_ltor_masks_and_position_ids(
                tokens, EOD, reset_pos, reset_mask, eod_mask, prefix, targets_only)
            if reweight:
                reweight_loss_mask_(loss_mask)
            prefixes = prefix if isinstance(prefix, list) else [prefix]
            lines.append('sample %d' % k)
            lines.append('record ' + ' '.join(map(str, rec)))
            lines.append('prefix ' + ' '.join(map(str, prefixes)))
            lines.append('loss_mask ' + ' '.join(repr(w) for w in loss_mask))
            lines.append('position_ids ' + ' '.join(map(str, pos)))
            lines.append('mask ' + ' '.join(''.join('1' if v else '0' for v in row)
                                            for row in visible))
        lines.append('end')
    with open(out_path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
