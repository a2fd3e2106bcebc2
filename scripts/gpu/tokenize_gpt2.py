#!/usr/bin/env python3
"""Tokenizes a plain-text corpus with GPT-2's BPE into Megatron .bin/.idx, on a machine that has
Hugging Face `tokenizers` and numpy (the GPU machine), until anvil's own GPT-2 tokenizer lands.

usage: tokenize_gpt2.py CORPUS.txt OUTPUT_PREFIX
Documents are separated by blank lines; each gets EOD (50256) appended. Writes
OUTPUT_PREFIX.bin/.idx in the MMapIndexedDataset layout (u16 tokens, version 1).
"""
import os
import struct
import sys

import numpy as np
from tokenizers import ByteLevelBPETokenizer

EOD = 50256


def main():
    corpus, prefix = sys.argv[1], sys.argv[2]
    here = os.path.dirname(os.path.abspath(__file__))
    vocab = os.path.join(here, "..", "..", "data", "gpt2")
    tok = ByteLevelBPETokenizer(os.path.join(vocab, "encoder.json"),
                                os.path.join(vocab, "vocab.bpe"))
    with open(corpus, encoding="utf-8") as f:
        docs = [d.strip() for d in f.read().split("\n\n") if d.strip()]
    encoded = tok.encode_batch(docs)
    sizes = [len(e.ids) + 1 for e in encoded]
    tokens = np.concatenate([np.array(e.ids + [EOD], dtype=np.uint16) for e in encoded])
    tokens.tofile(prefix + ".bin")
    n = len(sizes)
    pointers = np.concatenate([[0], np.cumsum(np.array(sizes[:-1], dtype=np.int64) * 2)])
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00")
        f.write(struct.pack("<Q", 1))
        f.write(struct.pack("<B", 8))  # u16
        f.write(struct.pack("<Q", n))
        f.write(struct.pack("<Q", n + 1))
        f.write(np.array(sizes, dtype=np.int32).tobytes())
        f.write(pointers.astype(np.int64).tobytes())
        f.write(np.arange(n + 1, dtype=np.int64).tobytes())
    print(f"tokenize_gpt2: {n} documents, {tokens.size} tokens -> {prefix}.bin/.idx")


if __name__ == "__main__":
    main()
