#!/usr/bin/env python3
"""Reference throughput for bench/tokenizer_bench.cc: GPT-2 BPE encoding of the same corpus
(data/demo/kjv.txt) on ONE thread of one core, with

  * HF tokenizers' ByteLevelBPETokenizer(data/gpt2/encoder.json, data/gpt2/vocab.bpe)
  * tiktoken built from data/gpt2/r50k_base.tiktoken (encode_ordinary)

in the two modes of the C++ bench: `file` (the whole file as one text) and `documents` (each
blank-line separated chapter separately, as bin/preprocess encodes documents). Prints MB/s
(10^6 input bytes per second of process CPU time, like the C++ bench's counters, and of wall
time) and the number of tokens, which must equal the C++ bench's `tokens` counter.

For the GPU machine (it has tokenizers and tiktoken). From the repository root:
  python3 bench/reference/tokenizer_hf.py [--file data/demo/kjv.txt] [--repeat 5]
"""
import argparse
import base64
import os
import sys
import time

# One thread: Rayon (HF tokenizers) reads these at import; the process is also pinned to one
# core so that nothing can run in parallel behind our back.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

GPT2_PAT = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def load_tiktoken(path):
    import tiktoken

    ranks = {}
    with open(path) as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return tiktoken.Encoding("r50k_base_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256})


def timed(fn, repeat):
    """Best (cpu seconds, wall seconds) over `repeat` runs after one warm-up, and fn's result."""
    result = fn()
    best_cpu, best_wall = float("inf"), float("inf")
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        result = fn()
        best_cpu = min(best_cpu, time.process_time() - c0)
        best_wall = min(best_wall, time.perf_counter() - w0)
    return best_cpu, best_wall, result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--file", default="data/demo/kjv.txt")
    ap.add_argument("--vocab", default="data/gpt2/encoder.json")
    ap.add_argument("--merges", default="data/gpt2/vocab.bpe")
    ap.add_argument("--tiktoken", default="data/gpt2/r50k_base.tiktoken")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    if not os.path.exists(args.file):
        sys.exit(f"tokenizer_hf: {args.file} is missing: run scripts/prepare-demo-data.sh")
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    from tokenizers import ByteLevelBPETokenizer

    with open(args.file, "rb") as f:
        raw = f.read()
    text = raw.decode("utf-8", errors="replace")
    docs = text.split("\n\n")
    n_bytes = len(raw)

    hf = ByteLevelBPETokenizer(args.vocab, args.merges)
    tk = load_tiktoken(args.tiktoken)
    encoders = {
        "hf_tokenizers": {
            "file": lambda: hf.encode(text).ids,
            "documents": lambda: [i for d in docs for i in hf.encode(d).ids],
        },
        "tiktoken": {
            "file": lambda: tk.encode_ordinary(text),
            "documents": lambda: [i for d in docs for i in tk.encode_ordinary(d)],
        },
    }
    print(f"{args.file}: {n_bytes / 1e6:.2f} MB, {len(docs)} documents, 1 thread, "
          f"best of {args.repeat}")
    ids = {}
    for name, modes in encoders.items():
        for mode, fn in modes.items():
            cpu, wall, out = timed(fn, args.repeat)
            ids[(name, mode)] = out
            print(f"  {name:14s} {mode:9s}  {n_bytes / 1e6 / cpu:8.2f} MB/s cpu  "
                  f"{n_bytes / 1e6 / wall:8.2f} MB/s wall  tokens={len(out)}")
    for mode in ("file", "documents"):
        same = ids[("hf_tokenizers", mode)] == ids[("tiktoken", mode)]
        print(f"  {mode}: hf_tokenizers and tiktoken ids {'agree' if same else 'DIFFER'}")


if __name__ == "__main__":
    main()
