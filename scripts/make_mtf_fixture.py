#!/usr/bin/python3
"""Writes tests/io/fixtures/mtf_packing.txt: Megatron-DeepSpeed's DecoderPackedMTFDataset index
and packed rows (megatron/data/decoder_packed_mtf_dataset.py: _build_index_mappings without its
file cache and torch barriers, _build_shuffle_idx, _build_sample_idx, pack_samples), on pair
sizes drawn here. tests/io/mtf_packing_test.cc compares io/mtf_packing with it exactly.

Run with Debian's python3 and python3-numpy:
    /usr/bin/python3 scripts/make_mtf_fixture.py [out_file]

Output, one record per line:
    case NAME                  a new case; then
    param KEY VALUE            seq_length, num_samples, seed, pad
    inputs s_0 .. s_{n-1}      input tokens of each pair
    targets s_0 .. s_{n-1}     target tokens of each pair
    shuffle d_0 ..             the concatenated shuffles
    samples a_0 b_0 a_1 b_1 .. the [start, end) rows
    row K                      row K packed (pair i's input token t = 1000 i + t, target token
    tokens ..                  t = 1000 i + 500 + t); its tokens, segment ids and is_inputs
    segment_ids ..
    is_inputs ..
    end
"""
import sys

import numpy as np


# --- megatron/data/decoder_packed_mtf_dataset.py ---------------------------------------------
def _build_shuffle_idx(nb_documents, np_rng):
    result = np.arange(start=0, stop=nb_documents, step=1, dtype=np.int64)
    np_rng.shuffle(result)
    return result


def _build_sample_idx(sizes, document_ids, seq_length, row_offset, old_sample_start, epoch):
    row_length = row_offset
    full_samples = []
    current_sample_start = old_sample_start
    epoch_offset = epoch * len(document_ids)
    assert epoch_offset >= current_sample_start
    for current_sample_end, document_id in enumerate(document_ids):
        current_sample_end = epoch_offset + current_sample_end
        sample_sizes = sizes[document_id]
        tok_len = sample_sizes["input_tokens"] + sample_sizes["target_tokens"]
        row_length = row_length + tok_len
        if row_length > seq_length:
            if current_sample_end > current_sample_start:
                full_samples.append(np.asarray([current_sample_start, current_sample_end]))
            current_sample_start = current_sample_end
            row_length = tok_len
            if tok_len > seq_length:
                current_sample_start = current_sample_end + 1
                row_length = 0
                continue
    return full_samples, row_length, current_sample_start


def _build_index_mappings(sizes, nb_documents, num_samples, seq_length, seed):
    np_rng = np.random.RandomState(seed=seed)
    row_offset = 0
    old_sample_start = 0
    epoch = 0
    shuffle_idx = []
    sample_idx = []
    while len(sample_idx) <= num_samples:
        new_document_ids = _build_shuffle_idx(nb_documents=nb_documents, np_rng=np_rng)
        shuffle_idx.append(new_document_ids)
        new_samples, row_offset, old_sample_start = _build_sample_idx(
            sizes, new_document_ids, seq_length, row_offset, old_sample_start, epoch)
        sample_idx.extend(new_samples)
        epoch += 1
    return np.stack(sample_idx, axis=0), np.concatenate(shuffle_idx, axis=0)


def pack_samples(items, seq_length, pad_token):
    decoder_tokens = np.full((seq_length,), pad_token, dtype=np.int64)
    decoder_segment_ids = np.zeros((seq_length,), dtype=np.int64)
    decoder_is_inputs = np.full((seq_length,), False, dtype=bool)
    item_num = 1
    cur_len = 0
    for token_dict in items:
        input_token_len = len(token_dict["input_tokens"])
        target_token_len = len(token_dict["target_tokens"])
        total_len = input_token_len + target_token_len
        assert cur_len + total_len <= seq_length
        decoder_tokens[cur_len: cur_len + input_token_len] = token_dict["input_tokens"]
        decoder_tokens[cur_len + input_token_len: cur_len + total_len] = token_dict["target_tokens"]
        decoder_segment_ids[cur_len: cur_len + total_len] = item_num
        decoder_is_inputs[cur_len: cur_len + input_token_len] = 1
        item_num += 1
        cur_len += total_len
    return decoder_tokens, decoder_segment_ids, decoder_is_inputs


def item(i, n_in, n_tg):
    return {"input_tokens": np.array([1000 * i + t for t in range(n_in)]),
            "target_tokens": np.array([1000 * i + 500 + t for t in range(n_tg)])}


CASES = [
    # name, documents, seq_length, num_samples, seed, max input, max target
    ('small', 7, 9, 10, 1234, 5, 3),
    ('long_rows', 40, 33, 25, 7, 12, 9),
    ('skips_long_pairs', 12, 10, 6, 42, 9, 6),  # some pairs exceed a row
]


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else 'tests/io/fixtures/mtf_packing.txt'
    lines = []
    for name, n, seq_length, num_samples, seed, max_in, max_tg in CASES:
        r = np.random.RandomState(seed + 1)
        n_in = r.randint(1, max_in + 1, size=n)
        n_tg = r.randint(1, max_tg + 1, size=n)
        sizes = [{"input_tokens": int(a), "target_tokens": int(b)} for a, b in zip(n_in, n_tg)]
        samples, shuffle = _build_index_mappings(sizes, n, num_samples, seq_length, seed)
        lines.append('case ' + name)
        for key, value in (('seq_length', seq_length), ('num_samples', num_samples),
                           ('seed', seed), ('pad', 3)):
            lines.append('param %s %d' % (key, value))
        lines.append('inputs ' + ' '.join(map(str, n_in)))
        lines.append('targets ' + ' '.join(map(str, n_tg)))
        lines.append('shuffle ' + ' '.join(map(str, shuffle)))
        lines.append('samples ' + ' '.join(map(str, samples.reshape(-1))))
        for k in (0, 1, len(samples) - 1):
            start, end = samples[k]
            items = [item(int(d), int(n_in[d]), int(n_tg[d])) for d in shuffle[start:end]]
            tokens, seg, is_in = pack_samples(items, seq_length, 3)
            lines.append('row %d' % k)
            lines.append('tokens ' + ' '.join(map(str, tokens)))
            lines.append('segment_ids ' + ' '.join(map(str, seg)))
            lines.append('is_inputs ' + ' '.join(str(int(v)) for v in is_in))
        lines.append('end')
    with open(out_path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
