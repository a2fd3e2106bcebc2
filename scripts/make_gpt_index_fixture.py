#!/usr/bin/python3
"""Writes tests/io/fixtures/gpt_index/: the expected Megatron GPT index arrays, samples and
blending indices, computed by a numpy re-implementation of Megatron-DeepSpeed's code
(megatron/data/gpt_dataset.py _build_index_mappings / _build_doc_idx / _build_shuffle_idx /
GPTDataset.__getitem__, helpers.cpp build_sample_idx and build_blending_indices,
dataset_utils.get_train_valid_test_split_ and get_datasets_weights_and_num_samples,
blendable_dataset.BlendableDataset), as the reference for io/gpt_dataset, io/numpy_random and
io/blended_dataset (tests/io/*_test.cc).

Run with Debian's python3 + python3-numpy (no torch needed):
    /usr/bin/python3 scripts/make_gpt_index_fixture.py [out_dir]
    /usr/bin/python3 scripts/make_gpt_index_fixture.py --verify DIR
The second form np.load()s every *_idx.npy that anvil wrote into DIR (tests do this when
/usr/bin/python3 has numpy) and compares it with the expected array of the same name.

Outputs (out_dir, default tests/io/fixtures/gpt_index):
    synth_a.{bin,idx}, synth_b.{bin,idx}   small synthetic datasets (Megatron's mmap format)
    cases.txt                              one line per case, see write_manifest()
    expected/*.npy                         arrays named as Megatron names its caches, plus
                                           <case>_samples.npy, blend_*.npy, numpy_*.npy
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_idx_fixture  # noqa: E402  (Megatron's MMapIndexedDatasetBuilder in numpy)

CUTOFF_LAST_EPOCH = 0.95  # BigScience's _build_index_mappings(cutoff_last_epoch=0.95)


# --- megatron/data/dataset_utils.py ------------------------------------------------------------
def get_train_valid_test_split_(splits_string, size):
    if splits_string.find(',') != -1:
        splits = [float(s) for s in splits_string.split(',')]
    elif splits_string.find('/') != -1:
        splits = [float(s) for s in splits_string.split('/')]
    else:
        splits = [float(splits_string)]
    while len(splits) < 3:
        splits.append(0.)
    splits = splits[:3]
    splits_sum = sum(splits)
    assert splits_sum > 0.0
    splits = [split / splits_sum for split in splits]
    splits_index = [0]
    for index, split in enumerate(splits):
        splits_index.append(splits_index[index] + int(round(split * float(size))))
    diff = splits_index[-1] - size
    for index in range(1, len(splits_index)):
        splits_index[index] -= diff
    assert splits_index[-1] == size
    return splits_index


def get_datasets_weights_and_num_samples(data_prefix, train_valid_test_num_samples):
    assert len(data_prefix) % 2 == 0
    num_datasets = len(data_prefix) // 2
    weights = [0] * num_datasets
    prefixes = [0] * num_datasets
    for i in range(num_datasets):
        weights[i] = float(data_prefix[2 * i])
        prefixes[i] = (data_prefix[2 * i + 1]).strip()
    weight_sum = 0.0
    for weight in weights:
        weight_sum += weight
    assert weight_sum > 0.0
    weights = [weight / weight_sum for weight in weights]
    datasets_train_valid_test_num_samples = []
    for weight in weights:
        datasets_train_valid_test_num_samples.append(
            [int(math.ceil(val * weight * 1.005)) for val in train_valid_test_num_samples])
    return prefixes, weights, datasets_train_valid_test_num_samples


# --- megatron/data/helpers.cpp ---------------------------------------------------------------
def build_sample_idx(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch):
    num_samples = (num_epochs * tokens_per_epoch - 1) // seq_length
    sample_idx = np.zeros([num_samples + 1, 2], dtype=np.int32)
    sample_index = 0
    doc_idx_index = 0
    doc_offset = 0
    sample_idx[sample_index] = (doc_idx_index, doc_offset)
    sample_index += 1
    while sample_index <= num_samples:
        remaining_seq_length = seq_length + 1
        while remaining_seq_length != 0:
            doc_id = doc_idx[doc_idx_index]
            doc_length = int(sizes[doc_id]) - doc_offset
            remaining_seq_length -= doc_length
            if remaining_seq_length <= 0:
                doc_offset += (remaining_seq_length + doc_length - 1)
                remaining_seq_length = 0
            else:
                doc_idx_index += 1
                doc_offset = 0
        sample_idx[sample_index] = (doc_idx_index, doc_offset)
        sample_index += 1
    return sample_idx


def build_blending_indices(weights, num_datasets, size):
    dataset_index = np.zeros(size, dtype=np.uint8)
    dataset_sample_index = np.zeros(size, dtype=np.int64)
    current_samples = [0] * num_datasets
    w = [float(x) for x in weights]
    for sample_idx in range(size):
        sample_idx_double = max(float(sample_idx), 1.0)
        max_error_index = 0
        max_error = w[0] * sample_idx_double - float(current_samples[0])
        for dataset_idx in range(1, num_datasets):
            error = w[dataset_idx] * sample_idx_double - float(current_samples[dataset_idx])
            if error > max_error:
                max_error = error
                max_error_index = dataset_idx
        dataset_index[sample_idx] = max_error_index
        dataset_sample_index[sample_idx] = current_samples[max_error_index]
        current_samples[max_error_index] += 1
    return dataset_index, dataset_sample_index


# --- megatron/data/blendable_dataset.py -----------------------------------------------------------
def blendable_dataset_indices(weights, size):
    num_datasets = len(weights)
    weights = np.array(weights, dtype=np.float64)
    sum_weights = np.sum(weights)
    assert sum_weights > 0.0
    weights /= sum_weights
    assert num_datasets < 255
    return build_blending_indices(weights, num_datasets, size)


# --- megatron/data/gpt_dataset.py --------------------------------------------------------------
def _num_tokens(documents, sizes):
    return np.sum(sizes[documents])


def _num_epochs(tokens_per_epoch, seq_length, num_samples):
    num_epochs = 0
    total_tokens = 0
    while True:
        num_epochs += 1
        total_tokens += tokens_per_epoch
        if ((total_tokens - 1) // seq_length) >= num_samples:
            return num_epochs


def _build_doc_idx(documents, num_epochs, np_rng, separate_last_epoch):
    if not separate_last_epoch or num_epochs == 1:
        doc_idx = np.mgrid[0:num_epochs, 0:len(documents)][1]
        doc_idx[:] = documents
        doc_idx = doc_idx.reshape(-1)
        doc_idx = doc_idx.astype(np.int32)
        np_rng.shuffle(doc_idx)
        return doc_idx
    doc_idx_first = _build_doc_idx(documents, num_epochs - 1, np_rng, False)
    doc_idx_last = _build_doc_idx(documents, 1, np_rng, False)
    return np.concatenate((doc_idx_first, doc_idx_last))


def _build_shuffle_idx(num_samples, total_size, np_rng):
    dtype_ = np.uint32
    if total_size >= (np.iinfo(np.uint32).max - 1):
        dtype_ = np.int64
    shuffle_idx_first = np.arange(start=0, stop=num_samples, step=1, dtype=dtype_)
    np_rng.shuffle(shuffle_idx_first)
    if num_samples == total_size:
        return shuffle_idx_first
    shuffle_idx_last = np.arange(start=num_samples, stop=total_size, step=1, dtype=dtype_)
    np_rng.shuffle(shuffle_idx_last)
    return np.concatenate((shuffle_idx_first, shuffle_idx_last))


def index_file_prefix(out_dir, data_prefix, name, num_samples, seq_length, seed):
    return os.path.join(out_dir, '%s_%s_indexmap_%dns_%dsl_%ds' % (
        os.path.basename(data_prefix), name, num_samples, seq_length, seed))


def build_index_mappings(name, data_prefix, documents, sizes, num_samples, seq_length, seed,
                         out_dir):
    """_build_index_mappings (the rank-0 branch), saving into out_dir."""
    tokens_per_epoch = _num_tokens(documents, sizes)
    num_epochs = _num_epochs(tokens_per_epoch, seq_length, num_samples)
    np_rng = np.random.RandomState(seed=seed)
    _filename = index_file_prefix(out_dir, data_prefix, name, num_samples, seq_length, seed)
    if num_epochs == 1:
        separate_last_epoch = False
    else:
        num_samples_from_epochs_minus_one = (
            (num_epochs - 1) * tokens_per_epoch - 1) // seq_length
        last_epoch_num_samples = num_samples - num_samples_from_epochs_minus_one
        assert last_epoch_num_samples >= 0
        num_samples_per_epoch = (tokens_per_epoch - 1) // seq_length
        assert last_epoch_num_samples < (num_samples_per_epoch + 1)
        separate_last_epoch = (last_epoch_num_samples <
                               int(CUTOFF_LAST_EPOCH * num_samples_per_epoch))
    doc_idx = _build_doc_idx(documents, num_epochs, np_rng, separate_last_epoch)
    np.save(_filename + '_doc_idx.npy', doc_idx, allow_pickle=True)
    assert doc_idx.dtype == np.int32
    assert sizes.dtype == np.int32
    sample_idx = build_sample_idx(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch)
    np.save(_filename + '_sample_idx.npy', sample_idx, allow_pickle=True)
    if separate_last_epoch:
        num_samples_ = num_samples_from_epochs_minus_one
    else:
        num_samples_ = sample_idx.shape[0] - 1
    shuffle_idx = _build_shuffle_idx(num_samples_, sample_idx.shape[0] - 1, np_rng)
    np.save(_filename + '_shuffle_idx.npy', shuffle_idx, allow_pickle=True)
    return doc_idx, sample_idx, shuffle_idx, num_epochs, separate_last_epoch


class GPTDataset:
    """GPTDataset.__getitem__ over a list of sequences."""

    def __init__(self, seqs, doc_idx, sample_idx, shuffle_idx):
        self.seqs, self.doc_idx, self.sample_idx, self.shuffle_idx = (
            seqs, doc_idx, sample_idx, shuffle_idx)

    def __len__(self):
        return self.sample_idx.shape[0] - 1

    def get(self, idx, offset=0, length=None):
        s = self.seqs[idx]
        return np.array(s[offset:] if length is None else s[offset:offset + length])

    def __getitem__(self, idx):
        idx = self.shuffle_idx[idx]
        doc_index_f = self.sample_idx[idx][0]
        doc_index_l = self.sample_idx[idx + 1][0]
        offset_f = self.sample_idx[idx][1]
        offset_l = self.sample_idx[idx + 1][1]
        if doc_index_f == doc_index_l:
            sample = self.get(self.doc_idx[doc_index_f], offset=offset_f,
                              length=offset_l - offset_f + 1)
        else:
            sample_list = [self.get(self.doc_idx[doc_index_f], offset=offset_f)]
            for i in range(doc_index_f + 1, doc_index_l):
                sample_list.append(self.get(self.doc_idx[i]))
            sample_list.append(self.get(self.doc_idx[doc_index_l], length=offset_l + 1))
            sample = np.concatenate(sample_list)
        return np.array(sample, dtype=np.int64)


# --- fixture ------------------------------------------------------------------------------------
def write_dataset(prefix, num_docs, rng):
    """A synthetic u16 dataset: one sequence per document, lengths 1..80 with a few long ones."""
    builder = make_idx_fixture.Builder(prefix + '.bin', np.uint16)
    seqs = []
    for d in range(num_docs):
        n = int(rng.randint(1, 81)) if d % 17 else int(rng.randint(150, 400))
        toks = rng.randint(0, 65535, size=n).tolist()
        builder.add_item(toks)
        builder.end_document()
        seqs.append(toks)
    builder.finalize(prefix + '.idx')
    _, back, _ = make_idx_fixture.read_back(prefix)
    assert back == seqs
    return seqs


def gpt_case(lines, exp_dir, prefix, seqs, case, name, begin, end, num_samples, seq_len, seed):
    sizes = np.array([len(s) for s in seqs], dtype=np.int32)
    documents = np.arange(start=begin, stop=end, step=1, dtype=np.int32)
    doc_idx, sample_idx, shuffle_idx, epochs, separate = build_index_mappings(
        name, prefix, documents, sizes, num_samples, seq_len, seed, exp_dir)
    ds = GPTDataset(seqs, doc_idx, sample_idx, shuffle_idx)
    samples = np.stack([ds[i] for i in range(len(ds))])
    assert samples.shape == (len(ds), seq_len + 1)
    np.save(os.path.join(exp_dir, case + '_samples.npy'), samples.astype(np.int32))
    lines.append('gpt %s %s %s %d %d %d %d %d %d %d' % (
        case, os.path.basename(prefix), name, begin, end, num_samples, seq_len, seed, epochs,
        int(separate)))
    print('%s: %s [%d, %d) N=%d S=%d seed=%d: %d epochs%s, %d samples' % (
        case, name, begin, end, num_samples, seq_len, seed, epochs,
        ' (last separate)' if separate else '', len(ds)))
    return epochs, separate


def main(out_dir):
    exp_dir = os.path.join(out_dir, 'expected')
    os.makedirs(exp_dir, exist_ok=True)
    for f in os.listdir(exp_dir):
        os.remove(os.path.join(exp_dir, f))
    rng = np.random.RandomState(20240601)
    pa, pb = os.path.join(out_dir, 'synth_a'), os.path.join(out_dir, 'synth_b')
    seqs_a = write_dataset(pa, 120, rng)
    seqs_b = write_dataset(pb, 70, rng)
    lines = []

    # numpy's RandomState: consecutive shuffles of arange(n) on one generator, per seed; and
    # 64-bit bounded draws (randint with a range above 2^32 takes the same masked path as
    # random_interval's 64-bit branch).
    for seed in [0, 1, 42, 1234, 2**32 - 1]:
        shuffle_ns = [1, 2, 3, 5, 10, 100, 1000, 4097] + ([65537] if seed == 1234 else [])
        r = np.random.RandomState(seed)
        parts = []
        for n in shuffle_ns:
            a = np.arange(n, dtype=np.int32)
            r.shuffle(a)
            parts.append(a)
        np.save(os.path.join(exp_dir, 'numpy_shuffles_%d.npy' % seed), np.concatenate(parts))
        lines.append('shuffles %d %s' % (seed, ' '.join(str(n) for n in shuffle_ns)))
    for seed, mx in [(7, 2**40 - 2), (3, 2**33 + 5), (1234, 2**63 - 1)]:
        r = np.random.RandomState(seed)
        v = r.randint(0, mx + 1, size=64, dtype=np.uint64)
        np.save(os.path.join(exp_dir, 'numpy_interval_%d_%d.npy' % (seed, mx)), v)
        lines.append('interval %d %d 64' % (seed, mx))

    # GPT index cases over synth_a's default 969,30,1 split.
    split = get_train_valid_test_split_('969,30,1', len(seqs_a))
    tb, te = split[0], split[1]
    vb, ve = split[1], split[2]
    tokens = sum(len(s) for s in seqs_a[tb:te])
    S = 32
    per_epoch = (tokens - 1) // S
    gpt_case(lines, exp_dir, pa, seqs_a, 'one_epoch', 'train', tb, te, 50, S, 1234)
    e, sep = gpt_case(lines, exp_dir, pa, seqs_a, 'separate_last', 'train', tb, te,
                      per_epoch + 10, S, 1234)
    assert e == 2 and sep
    # Three epochs, the last one nearly full: one shuffle over all of them.
    n3 = ((2 * tokens - 1) // S) + int(0.97 * per_epoch)
    e, sep = gpt_case(lines, exp_dir, pa, seqs_a, 'joint_epochs', 'train', tb, te, n3, S, 99)
    assert e == 3 and not sep
    gpt_case(lines, exp_dir, pa, seqs_a, 'valid_many_epochs', 'valid', vb, ve, 200, 16, 7)
    gpt_case(lines, exp_dir, pa, seqs_a, 'long_samples', 'train', tb, te, 80, 100, 2**32 - 1)

    # Blending indices.
    blends = [('two', [0.7, 0.3], 4000), ('three', [5.0, 3.0, 2.0], 5003),
              ('ties', [1.0, 1.0, 1.0], 999),
              ('ten', [float(x) for x in np.random.RandomState(5).uniform(0.1, 3.0, 10)], 6000),
              ('many', [float(x) for x in np.random.RandomState(6).uniform(0.5, 2.0, 130)], 4000)]
    for bname, raw, size in blends:
        data_prefix = []
        for k, w in enumerate(raw):
            data_prefix += [repr(w), 'p%d' % k]
        _, weights, counts = get_datasets_weights_and_num_samples(data_prefix, [size, 7, 0])
        di, dsi = blendable_dataset_indices(weights, size)
        np.save(os.path.join(exp_dir, 'blend_%s_dataset_index.npy' % bname), di)
        np.save(os.path.join(exp_dir, 'blend_%s_dataset_sample_index.npy' % bname), dsi)
        np.save(os.path.join(exp_dir, 'blend_%s_num_samples.npy' % bname),
                np.array([c[0] for c in counts], dtype=np.int64))
        lines.append('blend %s %d %s' % (bname, size, ' '.join(repr(w) for w in raw)))

    # A blended corpus end to end: --data-path 0.7 synth_a 0.3 synth_b --split 969,30,1.
    n_train, S, seed = 300, 32, 1234
    prefixes, weights, counts = get_datasets_weights_and_num_samples(
        ['0.7', pa, '0.3', pb], [n_train, 0, 0])
    datasets = []
    for prefix, seqs, c in zip(prefixes, [seqs_a, seqs_b], counts):
        sp = get_train_valid_test_split_('969,30,1', len(seqs))
        sizes = np.array([len(s) for s in seqs], dtype=np.int32)
        d, s, q, _, _ = build_index_mappings('train', prefix, np.arange(sp[0], sp[1]), sizes,
                                             c[0], S, seed, exp_dir)
        datasets.append(GPTDataset(seqs, d, s, q))
    di, dsi = blendable_dataset_indices(weights, sum(len(d) for d in datasets))
    samples = np.stack([datasets[di[i]][dsi[i]] for i in range(n_train)])
    np.save(os.path.join(exp_dir, 'corpus_samples.npy'), samples.astype(np.int32))
    lines.append('corpus synth_a 0.7 synth_b 0.3 969,30,1 %d %d %d' % (n_train, S, seed))

    with open(os.path.join(out_dir, 'cases.txt'), 'w') as f:
        f.write('# Written by scripts/make_gpt_index_fixture.py; arrays are in expected/.\n')
        f.write('# shuffles SEED N...   | interval SEED MAX COUNT\n')
        f.write('# gpt CASE DATASET NAME BEGIN END NUM_SAMPLES SEQ_LEN SEED EPOCHS SEPARATE\n')
        f.write('# blend NAME SIZE WEIGHT...  | corpus P1 W1 P2 W2 SPLIT N SEQ_LEN SEED\n')
        for line in lines:
            f.write(line + '\n')
    print('wrote %s (%d cases)' % (out_dir, len(lines)))


def verify(dir_):
    """np.load every anvil-written *_idx.npy in dir_ and compare with expected/ of the fixture."""
    exp_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'io',
                           'fixtures', 'gpt_index', 'expected')
    checked = 0
    for f in sorted(os.listdir(dir_)):
        if not f.endswith('_idx.npy'):
            continue
        got = np.load(os.path.join(dir_, f), allow_pickle=False)
        want_path = os.path.join(exp_dir, f)
        if os.path.exists(want_path):
            want = np.load(want_path)
            if got.dtype != want.dtype or got.shape != want.shape or not (got == want).all():
                print('MISMATCH %s: %s %s vs expected %s %s' % (f, got.dtype, got.shape,
                                                               want.dtype, want.shape))
                return 1
        checked += 1
    print('numpy read %d index files from %s' % (checked, dir_))
    return 0 if checked > 0 else 1


if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--verify':
        sys.exit(verify(sys.argv[2]))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'io', 'fixtures', 'gpt_index')))
