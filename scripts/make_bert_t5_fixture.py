#!/usr/bin/python3
"""Writes tests/io/fixtures/bert_t5/: the expected Megatron BERT and T5 sample mappings and
training samples, computed by a transcription of Megatron-DeepSpeed's code (BigScience fork):
    megatron/data/helpers.cpp         build_mapping_impl, get_target_sample_len (std::mt19937 and
                                      std::mt19937_64, transcribed below in pure Python)
    megatron/data/dataset_utils.py    get_samples_mapping (file name), get_a_and_b_segments,
                                      truncate_segments, create_tokens_and_tokentypes,
                                      create_masked_lm_predictions (do_permutation=False)
    megatron/data/bert_dataset.py     BertDataset.__getitem__, build_training_sample,
                                      pad_and_convert_to_numpy
    megatron/data/t5_dataset.py       T5Dataset.__getitem__, build_training_sample,
                                      pad_and_convert_to_numpy, make_attention_mask
and, for anvil's optional T5 noise (not Megatron's), Hugging Face's random_spans_noise_mask
(transformers/examples/flax/language-modeling/run_t5_mlm_flax.py) drawn from
np.random.RandomState(seed + idx) instead of the unseeded global np.random.
The per-sample draws use real numpy (np.random.RandomState), as Megatron does.

Run with Debian's python3 + python3-numpy (no torch needed):
    /usr/bin/python3 scripts/make_bert_t5_fixture.py [out_dir]
    /usr/bin/python3 scripts/make_bert_t5_fixture.py --megatron DIR [out_dir]
The second form also runs Megatron's own functions, taken from the checkout DIR of
Megatron-DeepSpeed (megatron/data/{dataset_utils,bert_dataset,t5_dataset}.py, only the
functions named below, without importing torch or megatron), on every sample, and checks that
they give what the transcription gives.

Outputs (out_dir, default tests/io/fixtures/bert_t5):
    vocab.txt          a WordPiece vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK], words, ##pieces)
    synth.{bin,idx}    a sentence-split dataset (one sequence per sentence), u16
    cases.txt          one line per case, see main()
    expected/*.npy     mappings as Megatron's np.save writes them (<case>_mapping.npy), samples
                       (<case>_<field>.npy, one row per sample) and numpy draw streams
"""
import ast
import collections
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_idx_fixture  # noqa: E402  (Megatron's MMapIndexedDatasetBuilder in numpy)

LONG_SENTENCE_LEN = 512  # helpers.cpp


# --- std::mt19937 / std::mt19937_64 (C++11 [rand.eng.mers]) ---------------------------------------
class MersenneTwister:
    def __init__(self, w, n, m, r, a, u, d, s, b, t, c, l, f, seed):
        self.w, self.n, self.m, self.r = w, n, m, r
        self.a, self.u, self.d, self.s, self.b, self.t, self.c, self.l = a, u, d, s, b, t, c, l
        self.mask = (1 << w) - 1
        self.x = [seed & self.mask]
        for i in range(1, n):
            prev = self.x[-1]
            self.x.append((f * (prev ^ (prev >> (w - 2))) + i) & self.mask)
        self.i = 0

    def __call__(self):
        n, i = self.n, self.i
        upper = (self.mask << self.r) & self.mask
        lower = (1 << self.r) - 1
        y = (self.x[i] & upper) | (self.x[(i + 1) % n] & lower)
        v = self.x[(i + self.m) % n] ^ (y >> 1) ^ (self.a if y & 1 else 0)
        self.x[i] = v
        self.i = (i + 1) % n
        z = v ^ ((v >> self.u) & self.d)
        z ^= (z << self.s) & self.b
        z ^= (z << self.t) & self.c
        return z ^ (z >> self.l)


def mt19937(seed):
    return MersenneTwister(32, 624, 397, 31, 0x9908b0df, 11, 0xffffffff, 7, 0x9d2c5680, 15,
                           0xefc60000, 18, 1812433253, seed)


def mt19937_64(seed):
    return MersenneTwister(64, 312, 156, 31, 0xb5026f5aa96619e9, 29, 0x5555555555555555, 17,
                           0x71d67fffeda60000, 37, 0xfff7eee000000000, 43, 6364136223846793005,
                           seed)


def check_engines():
    # The C++ standard's required 10000th outputs of default-seeded engines.
    g = mt19937(5489)
    for _ in range(9999):
        g()
    assert g() == 4123659995
    g = mt19937_64(5489)
    for _ in range(9999):
        g()
    assert g() == 9981545732273789042
    # std::mt19937(seed) is numpy's RandomState(seed) raw stream.
    g, r = mt19937(1234), np.random.RandomState(1234)
    assert [g() for _ in range(5)] == r.randint(0, 2**32, size=5, dtype=np.uint64).tolist()


# --- helpers.cpp build_mapping ------------------------------------------------------------------
def get_target_sample_len(short_seq_ratio, max_length, rand32_gen):
    if short_seq_ratio == 0:
        return max_length
    random_number = rand32_gen()
    if random_number % short_seq_ratio == 0:
        return 2 + random_number % (max_length - 1)
    return max_length


def build_mapping(docs, sizes, num_epochs, max_num_samples, max_seq_length, short_seq_prob, seed,
                  min_num_sent):
    assert num_epochs > 0 and max_seq_length > 1 and 0.0 <= short_seq_prob <= 1.0 and seed > 0
    short_seq_ratio = 0
    if short_seq_prob > 0:
        short_seq_ratio = int(round(1.0 / short_seq_prob))  # C round(): half away from zero
        if abs(1.0 / short_seq_prob - math.floor(1.0 / short_seq_prob) - 0.5) == 0.0:
            short_seq_ratio = int(math.floor(1.0 / short_seq_prob)) + 1
    rand32_gen = mt19937(seed)
    maps = []
    for epoch in range(num_epochs):
        if len(maps) >= max_num_samples:
            break
        for doc in range(len(docs) - 1):
            sent_index_first, sent_index_last = int(docs[doc]), int(docs[doc + 1])
            prev_start_index = sent_index_first
            num_remain_sent = sent_index_last - sent_index_first
            contains_long_sentence = False
            if num_remain_sent > 1:
                for sent_index in range(sent_index_first, sent_index_last):
                    if sizes[sent_index] > LONG_SENTENCE_LEN:
                        contains_long_sentence = True
                        break
            if num_remain_sent >= min_num_sent and not contains_long_sentence:
                seq_len = 0
                num_sent = 0
                target_seq_len = get_target_sample_len(short_seq_ratio, max_seq_length,
                                                       rand32_gen)
                for sent_index in range(sent_index_first, sent_index_last):
                    seq_len += int(sizes[sent_index])
                    num_sent += 1
                    num_remain_sent -= 1
                    if ((seq_len >= target_seq_len and num_remain_sent > 1 and
                         num_sent >= min_num_sent) or num_remain_sent == 0):
                        maps.append((prev_start_index, sent_index + 1, target_seq_len))
                        prev_start_index = sent_index + 1
                        target_seq_len = get_target_sample_len(short_seq_ratio, max_seq_length,
                                                               rand32_gen)
                        seq_len = 0
                        num_sent = 0
    rand64_gen = mt19937_64(seed + 1)
    for i in range(len(maps) - 1, 0, -1):
        j = rand64_gen() % (i + 1)
        maps[i], maps[j] = maps[j], maps[i]
    dtype = np.uint64 if len(sizes) > 0xffffffff else np.uint32
    return np.array(maps, dtype=dtype).reshape(len(maps), 3)


def get_samples_mapping(docs, sizes, max_num_samples, max_seq_length, short_seq_prob, seed,
                        min_num_sent):
    num_epochs = np.iinfo(np.int32).max - 1
    return build_mapping(docs, sizes, num_epochs, max_num_samples, max_seq_length, short_seq_prob,
                         seed, min_num_sent)


# --- dataset_utils.py ---------------------------------------------------------------------------
def get_a_and_b_segments(sample, np_rng):
    n_sentences = len(sample)
    assert n_sentences > 1
    a_end = 1
    if n_sentences >= 3:
        a_end = np_rng.randint(1, n_sentences)
    tokens_a = []
    for j in range(a_end):
        tokens_a.extend(sample[j])
    tokens_b = []
    for j in range(a_end, n_sentences):
        tokens_b.extend(sample[j])
    is_next_random = False
    if np_rng.random() < 0.5:
        is_next_random = True
        tokens_a, tokens_b = tokens_b, tokens_a
    return tokens_a, tokens_b, is_next_random


def truncate_segments(tokens_a, tokens_b, len_a, len_b, max_num_tokens, np_rng):
    assert len_a > 0
    if len_a + len_b <= max_num_tokens:
        return False
    while len_a + len_b > max_num_tokens:
        if len_a > len_b:
            len_a -= 1
            tokens = tokens_a
        else:
            len_b -= 1
            tokens = tokens_b
        if np_rng.random() < 0.5:
            del tokens[0]
        else:
            tokens.pop()
    return True


def create_tokens_and_tokentypes(tokens_a, tokens_b, cls_id, sep_id):
    tokens = [cls_id] + list(tokens_a) + [sep_id]
    tokentypes = [0] * (len(tokens_a) + 2)
    for token in tokens_b:
        tokens.append(token)
        tokentypes.append(1)
    if tokens_b:
        tokens.append(sep_id)
        tokentypes.append(1)
    return tokens, tokentypes


MaskedLmInstance = collections.namedtuple("MaskedLmInstance", ["index", "label"])


def is_start_piece(piece):
    return not piece.startswith("##")


def create_masked_lm_predictions(tokens, vocab_id_list, vocab_id_to_token_dict, masked_lm_prob,
                                 cls_id, sep_id, mask_id, max_predictions_per_seq, np_rng,
                                 max_ngrams=3, do_whole_word_mask=True, favor_longer_ngram=False,
                                 geometric_dist=False, masking_style="bert"):
    cand_indexes = []
    for (i, token) in enumerate(tokens):
        if token == cls_id or token == sep_id:
            continue
        if (do_whole_word_mask and len(cand_indexes) >= 1 and
                not is_start_piece(vocab_id_to_token_dict[token])):
            cand_indexes[-1].append(i)
        else:
            cand_indexes.append([i])
    output_tokens = list(tokens)
    if masked_lm_prob == 0:
        return output_tokens, [], [], []
    num_to_predict = min(max_predictions_per_seq,
                         max(1, int(round(len(tokens) * masked_lm_prob))))
    ngrams = np.arange(1, max_ngrams + 1, dtype=np.int64)
    if not geometric_dist:
        pvals = 1. / np.arange(1, max_ngrams + 1)
        pvals /= pvals.sum(keepdims=True)
        if favor_longer_ngram:
            pvals = pvals[::-1]
    ngram_indexes = []
    for idx in range(len(cand_indexes)):
        ngram_index = []
        for n in ngrams:
            ngram_index.append(cand_indexes[idx:idx + n])
        ngram_indexes.append(ngram_index)
    np_rng.shuffle(ngram_indexes)

    (masked_lms, masked_spans) = ([], [])
    covered_indexes = set()
    for cand_index_set in ngram_indexes:
        if len(masked_lms) >= num_to_predict:
            break
        if not cand_index_set:
            continue
        if not geometric_dist:
            n = np_rng.choice(ngrams[:len(cand_index_set)],
                              p=pvals[:len(cand_index_set)] /
                              pvals[:len(cand_index_set)].sum(keepdims=True))
        else:
            n = min(np_rng.geometric(0.2), max_ngrams)
        index_set = sum(cand_index_set[n - 1], [])
        n -= 1
        while len(masked_lms) + len(index_set) > num_to_predict:
            if n == 0:
                break
            index_set = sum(cand_index_set[n - 1], [])
            n -= 1
        if len(masked_lms) + len(index_set) > num_to_predict:
            continue
        is_any_index_covered = False
        for index in index_set:
            if index in covered_indexes:
                is_any_index_covered = True
                break
        if is_any_index_covered:
            continue
        for index in index_set:
            covered_indexes.add(index)
            if masking_style == "bert":
                if np_rng.random() < 0.8:
                    masked_token = mask_id
                else:
                    if np_rng.random() < 0.5:
                        masked_token = tokens[index]
                    else:
                        masked_token = vocab_id_list[np_rng.randint(0, len(vocab_id_list))]
            elif masking_style == "t5":
                masked_token = mask_id
            else:
                raise ValueError("invalid value of masking style")
            output_tokens[index] = masked_token
            masked_lms.append(MaskedLmInstance(index=index, label=tokens[index]))
        masked_spans.append(MaskedLmInstance(index=index_set,
                                             label=[tokens[index] for index in index_set]))
    assert len(masked_lms) <= num_to_predict
    np_rng.shuffle(ngram_indexes)  # do_permutation=False: drawn, unused

    masked_lms = sorted(masked_lms, key=lambda x: x.index)
    masked_spans = sorted(masked_spans, key=lambda x: x.index[0])
    masked_lm_positions = [p.index for p in masked_lms]
    masked_lm_labels = [p.label for p in masked_lms]
    return output_tokens, masked_lm_positions, masked_lm_labels, masked_spans


# --- bert_dataset.py ----------------------------------------------------------------------------
def bert_training_sample(sample, target_seq_length, max_seq_length, vocab, masked_lm_prob,
                         np_rng, binary_head):
    if binary_head:
        assert len(sample) > 1
    assert target_seq_length <= max_seq_length
    if binary_head:
        tokens_a, tokens_b, is_next_random = get_a_and_b_segments(sample, np_rng)
    else:
        tokens_a = []
        for j in range(len(sample)):
            tokens_a.extend(sample[j])
        tokens_b = []
        is_next_random = False
    max_num_tokens = target_seq_length
    truncated = truncate_segments(tokens_a, tokens_b, len(tokens_a), len(tokens_b),
                                  max_num_tokens, np_rng)
    tokens, tokentypes = create_tokens_and_tokentypes(tokens_a, tokens_b, vocab.cls, vocab.sep)
    max_predictions_per_seq = masked_lm_prob * max_num_tokens
    tokens, masked_positions, masked_labels, _ = create_masked_lm_predictions(
        tokens, vocab.id_list, vocab.inv_vocab, masked_lm_prob, vocab.cls, vocab.sep,
        vocab.mask, max_predictions_per_seq, np_rng)
    # pad_and_convert_to_numpy
    num_tokens = len(tokens)
    padding_length = max_seq_length - num_tokens
    assert padding_length >= 0
    filler = [vocab.pad] * padding_length
    labels = [-1] * max_seq_length
    loss_mask = [0] * max_seq_length
    for i in range(len(masked_positions)):
        assert masked_positions[i] < num_tokens
        labels[masked_positions[i]] = masked_labels[i]
        loss_mask[masked_positions[i]] = 1
    return {
        'text': tokens + filler,
        'types': tokentypes + filler,
        'labels': labels,
        'is_random': [int(is_next_random)],
        'loss_mask': loss_mask,
        'padding_mask': [1] * num_tokens + [0] * padding_length,
        'truncated': [int(truncated)],
    }


# --- t5_dataset.py ------------------------------------------------------------------------------
def t5_assemble(tokens, masked_spans, vocab, max_seq_length, max_seq_length_dec, sentinels):
    """pad_and_convert_to_numpy; masks as the 1-D factors of make_attention_mask (token >= 1)."""
    sentinel_tokens = collections.deque(sentinels)
    t5_input = []
    t5_decoder_in, t5_decoder_out = [vocab.bos], []
    start_index = 0
    for span in masked_spans:
        flag = sentinel_tokens.popleft()
        t5_decoder_in.append(flag)
        t5_decoder_in.extend(span.label)
        t5_decoder_out.append(flag)
        t5_decoder_out.extend(span.label)
        end_index = span.index[0]
        t5_input.extend(tokens[start_index:end_index])
        t5_input.append(flag)
        start_index = span.index[-1] + 1
    t5_decoder_out.append(vocab.eos)
    t5_input.extend(tokens[start_index:])
    num_tokens = len(t5_input)
    padding_length = max_seq_length - num_tokens
    assert padding_length >= 0
    tokens_enc = np.array(t5_input + [vocab.pad] * padding_length, dtype=np.int64)
    num_tokens_dec = len(t5_decoder_in)
    padding_length_dec = max_seq_length_dec - num_tokens_dec
    assert padding_length_dec >= 0
    tokens_dec_in = np.array(t5_decoder_in + [vocab.pad] * padding_length_dec, dtype=np.int64)
    enc_mask = (tokens_enc[None, :] >= 1) * (tokens_enc[:, None] >= 1)
    dec_mask = (tokens_dec_in[None, :] >= 1) * (tokens_dec_in[:, None] >= 1)
    # The 2-D masks are outer products of these vectors (checked here, compared in C++).
    enc_valid, dec_valid = (tokens_enc >= 1).astype(np.int64), (tokens_dec_in >= 1).astype(np.int64)
    assert (enc_mask == np.outer(enc_valid, enc_valid)).all()
    assert (dec_mask == np.outer(dec_valid, dec_valid)).all()
    return {
        'enc': tokens_enc.tolist(),
        'dec_in': tokens_dec_in.tolist(),
        'labels': t5_decoder_out + [-1] * padding_length_dec,
        'loss_mask': [1] * num_tokens_dec + [0] * padding_length_dec,
        'enc_valid': enc_valid.tolist(),
        'dec_valid': dec_valid.tolist(),
    }


def t5_training_sample(sample, target_seq_length, max_seq_length, max_seq_length_dec, vocab,
                       masked_lm_prob, np_rng, sentinels):
    assert target_seq_length <= max_seq_length
    tokens = [token for sentence in sample for token in sentence]
    max_num_tokens = target_seq_length
    truncated = len(tokens) > max_num_tokens
    tokens = tokens[:max_num_tokens]
    max_predictions_per_seq = masked_lm_prob * max_num_tokens
    tokens, _, _, masked_spans = create_masked_lm_predictions(
        tokens, vocab.id_list, vocab.inv_vocab, masked_lm_prob, vocab.cls, vocab.sep, vocab.mask,
        max_predictions_per_seq, np_rng, max_ngrams=10, geometric_dist=True, masking_style="t5")
    out = t5_assemble(tokens, masked_spans, vocab, max_seq_length, max_seq_length_dec, sentinels)
    out['truncated'] = [int(truncated)]
    return out


# --- Hugging Face random_spans_noise_mask (anvil's optional T5 noise) ---------------------------
def random_spans_noise_mask(length, noise_density, mean_noise_span_length, np_rng):
    orig_length = length
    num_noise_tokens = int(np.round(length * noise_density))
    num_nonnoise_tokens = length - num_noise_tokens
    num_noise_tokens = min(max(num_noise_tokens, 1), length - 1)
    num_noise_spans = int(np.round(min(num_noise_tokens, num_nonnoise_tokens) /
                                   mean_noise_span_length))
    num_noise_spans = max(num_noise_spans, 1)
    num_nonnoise_tokens = length - num_noise_tokens

    def _random_segmentation(num_items, num_segments):
        mask_indices = np.arange(num_items - 1) < (num_segments - 1)
        np_rng.shuffle(mask_indices)
        first_in_segment = np.pad(mask_indices, [[1, 0]])
        segment_id = np.cumsum(first_in_segment)
        _, segment_length = np.unique(segment_id, return_counts=True)
        return segment_length

    noise_span_lengths = _random_segmentation(num_noise_tokens, num_noise_spans)
    nonnoise_span_lengths = _random_segmentation(num_nonnoise_tokens, num_noise_spans)
    interleaved_span_lengths = np.reshape(
        np.stack([nonnoise_span_lengths, noise_span_lengths], axis=1), [num_noise_spans * 2])
    span_starts = np.cumsum(interleaved_span_lengths)[:-1]
    span_start_indicator = np.zeros((length,), dtype=np.int8)
    span_start_indicator[span_starts] = True
    span_num = np.cumsum(span_start_indicator)
    is_noise = np.equal(span_num % 2, 1)
    return is_noise[:orig_length]


def t5_random_spans_sample(sample, target_seq_length, max_seq_length, max_seq_length_dec, vocab,
                           noise_density, mean_span, np_rng, sentinels):
    tokens = [token for sentence in sample for token in sentence]
    truncated = len(tokens) > target_seq_length
    tokens = tokens[:target_seq_length]
    spans = []
    if len(tokens) >= 2:
        noise = random_spans_noise_mask(len(tokens), noise_density, mean_span, np_rng)
        i = 0
        while i < len(tokens):
            if noise[i]:
                j = i
                while j < len(tokens) and noise[j]:
                    j += 1
                spans.append(MaskedLmInstance(index=list(range(i, j)), label=tokens[i:j]))
                i = j
            else:
                i += 1
    out = t5_assemble(tokens, spans, vocab, max_seq_length, max_seq_length_dec, sentinels)
    out['truncated'] = [int(truncated)]
    return out


# --- Megatron's own code, for --megatron ----------------------------------------------------------
MEGATRON_FUNCTIONS = {
    'dataset_utils': ['get_a_and_b_segments', 'truncate_segments', 'create_tokens_and_tokentypes',
                      'MaskedLmInstance', 'is_start_piece', 'create_masked_lm_predictions'],
    'bert_dataset': ['build_training_sample', 'pad_and_convert_to_numpy'],
    't5_dataset': ['build_training_sample', 'pad_and_convert_to_numpy', 'make_attention_mask',
                   'make_history_mask'],
}


def load_megatron(checkout):
    """The functions of MEGATRON_FUNCTIONS, executed from Megatron's sources without imports."""
    modules = {}
    shared = {}
    for module, names in MEGATRON_FUNCTIONS.items():
        path = os.path.join(checkout, 'megatron', 'data', module + '.py')
        tree = ast.parse(open(path).read(), path)
        keep = []
        for node in tree.body:
            name = getattr(node, 'name', None)
            if isinstance(node, ast.Assign):
                name = getattr(node.targets[0], 'id', None)
            if name in names:
                keep.append(node)
        namespace = {'np': np, 'collections': collections}
        namespace.update(shared)
        exec(compile(ast.Module(body=keep, type_ignores=[]), path, 'exec'), namespace)
        missing = [n for n in names if n not in namespace]
        assert not missing, '%s lacks %s' % (path, missing)
        if module == 'dataset_utils':
            shared = {n: namespace[n] for n in names}
        modules[module] = namespace
    return modules


def megatron_bert_sample(meg, sample, target, max_len, vocab, prob, np_rng, binary):
    s = meg['bert_dataset']['build_training_sample'](
        [np.array(x, dtype=np.uint16) for x in sample], target, max_len, vocab.id_list,
        vocab.inv_vocab, vocab.cls, vocab.sep, vocab.mask, vocab.pad, prob, np_rng, binary)
    return {'text': s['text'].tolist(), 'types': s['types'].tolist(),
            'labels': s['labels'].tolist(), 'is_random': [s['is_random']],
            'loss_mask': s['loss_mask'].tolist(), 'padding_mask': s['padding_mask'].tolist(),
            'truncated': [s['truncated']]}


def megatron_t5_sample(meg, sample, target, max_len, dec_len, vocab, prob, np_rng):
    s = meg['t5_dataset']['build_training_sample'](
        [np.array(x, dtype=np.uint16) for x in sample], target, max_len, dec_len, vocab.id_list,
        vocab.inv_vocab, vocab.cls, vocab.sep, vocab.mask, vocab.pad, prob, np_rng, vocab.bos,
        vocab.eos, vocab.sentinels)
    enc_valid = (s['text_enc'] >= 1).astype(np.int64)
    dec_valid = (s['text_dec'] >= 1).astype(np.int64)
    causal = np.tril(np.ones((dec_len, dec_len), dtype=np.int64))
    assert (s['enc_mask'] == np.outer(enc_valid, enc_valid)).all()
    assert (s['enc_dec_mask'] == np.outer(dec_valid, enc_valid)).all()
    assert (s['dec_mask'] == np.outer(dec_valid, dec_valid) * causal).all()
    return {'enc': s['text_enc'].tolist(), 'dec_in': s['text_dec'].tolist(),
            'labels': s['labels'].tolist(), 'loss_mask': s['loss_mask'].tolist(),
            'enc_valid': enc_valid.tolist(), 'dec_valid': dec_valid.tolist(),
            'truncated': [s['truncated']]}


# --- fixture ------------------------------------------------------------------------------------
class Vocab:
    """Megatron's _BertWordPieceTokenizer vocabulary: vocab.txt + [BOS] [EOS] + sentinels."""

    def __init__(self, lines, extra_ids):
        vocab = collections.OrderedDict()
        for index, token in enumerate(lines):
            vocab[token] = index
        for t in ['[BOS]', '[EOS]'] + ['<extra_id_%d>' % k for k in range(extra_ids)]:
            if t not in vocab:  # add_token: the next id is len(vocab)
                vocab[t] = len(vocab)
        self.vocab = vocab
        self.inv_vocab = {v: k for k, v in vocab.items()}
        self.id_list = list(self.inv_vocab.keys())
        self.cls, self.sep, self.mask, self.pad = (vocab['[CLS]'], vocab['[SEP]'],
                                                   vocab['[MASK]'], vocab['[PAD]'])
        self.bos, self.eos = vocab['[BOS]'], vocab['[EOS]']
        self.sentinels = [vocab['<extra_id_%d>' % k] for k in range(extra_ids)]


def make_vocab_lines():
    lines = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]']
    lines += ['w%d' % k for k in range(120)]
    lines += ['##p%d' % k for k in range(60)]
    return lines


def write_dataset(prefix, vocab, rng):
    """Sentence-split documents; words are a start token and 0-3 '##' continuation pieces."""
    words = [i for t, i in vocab.vocab.items() if t.startswith('w')]
    pieces = [i for t, i in vocab.vocab.items() if t.startswith('##')]
    builder = make_idx_fixture.Builder(prefix + '.bin', np.uint16)
    docs = []
    for d in range(48):
        n_sent = [1, 2, 2, 3, 4, 5, 6, 9][rng.randint(0, 8)]
        doc = []
        for s in range(n_sent):
            if d == 5 and s == 1:
                length = 600  # a long sentence: the document is skipped when it has 2+
            elif d == 6:
                length = 530  # a one-sentence document with a long sentence
            else:
                length = int(rng.randint(2, 30 if rng.randint(0, 4) else 70))
            sent = []
            if rng.randint(0, 10) == 0:
                sent.append(int(pieces[rng.randint(0, len(pieces))]))  # starts mid-word
            while len(sent) < length:
                sent.append(1 if rng.randint(0, 40) == 0 else int(words[rng.randint(0, len(words))]))
                for _ in range(rng.choice([0, 0, 0, 1, 1, 2, 3])):
                    sent.append(int(pieces[rng.randint(0, len(pieces))]))
            sent = sent[:length]
            builder.add_item(sent)
            doc.append(sent)
        builder.end_document()
        docs.append(doc)
    builder.finalize(prefix + '.idx')
    _, back, doc_idx = make_idx_fixture.read_back(prefix)
    assert back == [s for doc in docs for s in doc]
    sizes = np.array([len(s) for s in back], dtype=np.int32)
    return back, np.array(doc_idx, dtype=np.int64), sizes


def save(exp_dir, name, rows, dtype=np.int32):
    np.save(os.path.join(exp_dir, name + '.npy'), np.array(rows, dtype=dtype), allow_pickle=True)


def save_fields(exp_dir, case, samples):
    for field in samples[0]:
        save(exp_dir, '%s_%s' % (case, field), [s[field] for s in samples])


def main(out_dir, megatron_dir=None):
    check_engines()
    meg = load_megatron(megatron_dir) if megatron_dir else None
    checked = 0
    exp_dir = os.path.join(out_dir, 'expected')
    os.makedirs(exp_dir, exist_ok=True)
    for f in os.listdir(exp_dir):
        os.remove(os.path.join(exp_dir, f))
    lines_txt = make_vocab_lines()
    with open(os.path.join(out_dir, 'vocab.txt'), 'w') as f:
        f.write('\n'.join(lines_txt) + '\n')
    vocab = Vocab(lines_txt, extra_ids=0)
    vocab_t5 = Vocab(lines_txt, extra_ids=100)
    prefix = os.path.join(out_dir, 'synth')
    seqs, doc_idx, sizes = write_dataset(prefix, vocab, np.random.RandomState(20240611))
    cases = []

    # Mappings: (case, doc range, num_samples, target length, short_seq_prob, seed, min_num_sent).
    mappings = [('bert_train', 0, 40, 150, 61, 0.1, 1234, 2),
                ('bert_epochs', 40, 48, 200, 29, 0.1, 7, 2),
                ('bert_nobin', 0, 48, 120, 125, 0.1, 1234, 1),
                ('ssp0', 0, 48, 50, 125, 0.0, 99, 2),
                ('ssp1', 0, 48, 60, 45, 1.0, 5, 2),
                ('ssp_third', 3, 30, 70, 40, 0.3, 11, 2),
                ('t5_train', 0, 48, 150, 62, 0.1, 1234, 1)]
    maps = {}
    for case, b, e, n, msl, ssp, seed, mins in mappings:
        docs = doc_idx[b:e + 1]
        m = get_samples_mapping(docs, sizes, n, msl, ssp, seed, mins)
        maps[case] = m
        np.save(os.path.join(exp_dir, case + '_mapping.npy'), m, allow_pickle=True)
        cases.append('mapping %s %d %d %d %d %r %d %d %d' % (case, b, e, n, msl, ssp, seed, mins,
                                                          len(m)))
        print('%s: %d rows' % (case, len(m)))

    # BERT samples: (case, mapping, max_seq_length, masked_lm_prob, seed, binary_head).
    for case, mcase, max_len, prob, seed, binary in [('bert64', 'bert_train', 64, 0.15, 1234, 1),
                                                     ('bert32', 'bert_epochs', 32, 0.15, 7, 1),
                                                     ('bert_p30', 'bert_train', 64, 0.3, 1234, 1),
                                                     ('bert_nobin', 'bert_nobin', 128, 0.15, 1234,
                                                      0)]:
        m = maps[mcase]
        samples = []
        for idx in range(len(m)):
            start, end, target = (int(x) for x in m[idx])
            sample = [seqs[i] for i in range(start, end)]
            np_rng = np.random.RandomState(seed=((seed + idx) % 2**32))
            samples.append(bert_training_sample(sample, target, max_len, vocab, prob, np_rng,
                                                bool(binary)))
            if meg:
                np_rng = np.random.RandomState(seed=((seed + idx) % 2**32))
                assert megatron_bert_sample(meg, sample, target, max_len, vocab, prob, np_rng,
                                            bool(binary)) == samples[-1], (case, idx)
                checked += 1
        save_fields(exp_dir, case, samples)
        cases.append('bert %s %s %d %r %d %d %d' % (case, mcase, max_len, prob, seed, binary,
                                                    len(samples)))

    # T5 samples: (case, mapping, max_seq_length, max_seq_length_dec, masked_lm_prob, seed).
    for case, mcase, max_len, dec_len, prob, seed in [('t5', 't5_train', 64, 40, 0.15, 1234),
                                                      ('t5_p30', 't5_train', 64, 60, 0.3, 1234)]:
        m = maps[mcase]
        samples = []
        for idx in range(len(m)):
            start, end, target = (int(x) for x in m[idx])
            sample = [seqs[i] for i in range(start, end)]
            np_rng = np.random.RandomState(seed=(seed + idx))
            samples.append(t5_training_sample(sample, target, max_len, dec_len, vocab_t5, prob,
                                              np_rng, vocab_t5.sentinels))
            if meg:
                np_rng = np.random.RandomState(seed=(seed + idx))
                assert megatron_t5_sample(meg, sample, target, max_len, dec_len, vocab_t5, prob,
                                          np_rng) == samples[-1], (case, idx)
                checked += 1
        save_fields(exp_dir, case, samples)
        cases.append('t5 %s %s %d %d %r %d %d' % (case, mcase, max_len, dec_len, prob, seed,
                                                  len(samples)))

    # anvil's optional noise: HF random spans (density, mean span) over the same mapping.
    m = maps['t5_train']
    samples = []
    for idx in range(len(m)):
        start, end, target = (int(x) for x in m[idx])
        np_rng = np.random.RandomState(seed=(1234 + idx))
        samples.append(t5_random_spans_sample([seqs[i] for i in range(start, end)], target, 64,
                                              40, vocab_t5, 0.15, 3.0, np_rng,
                                              vocab_t5.sentinels))
    save_fields(exp_dir, 't5_spans', samples)
    cases.append('t5_spans t5_spans t5_train 64 40 0.15 3.0 1234 %d' % len(samples))

    # numpy draw streams behind the samples.
    r = np.random.RandomState(3)
    save(exp_dir, 'numpy_random_sample',
         np.array([r.random_sample() for _ in range(2000)]).view(np.uint64), np.uint64)
    r = np.random.RandomState(4)
    save(exp_dir, 'numpy_randint', [r.randint(1, 2 + k % 37) for k in range(2000)], np.int64)
    r = np.random.RandomState(5)
    save(exp_dir, 'numpy_geometric', [r.geometric(0.2) for _ in range(2000)], np.int64)
    r = np.random.RandomState(6)
    pvals = 1. / np.arange(1, 4)
    pvals /= pvals.sum(keepdims=True)
    save(exp_dir, 'numpy_choice3', [r.choice(np.arange(1, 4), p=pvals / pvals.sum(keepdims=True))
                                    for _ in range(2000)], np.int64)

    with open(os.path.join(out_dir, 'cases.txt'), 'w') as f:
        f.write('\n'.join(cases) + '\n')
    if meg:
        print('Megatron\'s own functions agree on all %d samples' % checked)


if __name__ == '__main__':
    args = sys.argv[1:]
    megatron = None
    if args[:1] == ['--megatron']:
        megatron, args = args[1], args[2:]
    main(args[0] if args else
         os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'tests', 'io', 'fixtures',
                      'bert_t5'), megatron)
