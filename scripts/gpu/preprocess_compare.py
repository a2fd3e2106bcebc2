#!/usr/bin/env python3
"""Checks bin/preprocess against Megatron's tools/preprocess_data.py semantics, byte for byte, and
reports both throughputs. Runs anywhere python3 has `regex` (pure-Python GPT-2 BPE, slow) and
uses tiktoken when installed (the GPU machine; fast, the fair speed comparison). No numpy.

usage: preprocess_compare.py --input corpus.jsonl [--anvil build/bin/preprocess] [--workers N]
                             [--json-keys text ...] [--no-append-eod] [--skip-bad-lines]
                             [--out /tmp/preprocess_compare]

1. Runs `anvil preprocess --tokenizer-type GPT2BPE` (data/gpt2) on the input.
2. Re-does the work the way Megatron does (multiprocessing.Pool(N).imap(encode, lines, 25);
   per line json.loads, GPT-2 BPE of data[key], eod appended to the document's last sequence,
   empty documents skipped; MMapIndexedDataset builder layout, uint16 for vocab < 65500) and
   writes OUT/ref_{key}_document.{bin,idx}.
3. Compares the files byte for byte and, on a difference, names the first differing document.
Where Megatron would crash, the reference does what anvil does instead, so the rest can be
compared: invalid UTF-8 is decoded with errors='replace', blank lines are skipped, lone
surrogates from \\uD800-style escapes become U+FFFD, and with --skip-bad-lines malformed lines
(bad JSON, missing key, non-string value) are skipped. Lines are split on '\\n' only.
"""
import argparse
import base64
import json
import multiprocessing
import os
import struct
import subprocess
import sys
import time
from array import array

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
GPT2 = os.path.join(ROOT, "data", "gpt2")
EOD = 50256
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def make_encoder():
    """GPT-2 BPE: tiktoken (r50k_base from data/gpt2) when available, else OpenAI's encoder.py."""
    try:
        import tiktoken

        ranks = {}
        with open(os.path.join(GPT2, "r50k_base.tiktoken"), "rb") as f:
            for line in f:
                if line.strip():
                    tok, rank = line.split()
                    ranks[base64.b64decode(tok)] = int(rank)
        enc = tiktoken.Encoding(name="r50k_base_local", pat_str=PATTERN, mergeable_ranks=ranks,
                                special_tokens={"<|endoftext|>": EOD})
        return "tiktoken", enc.encode_ordinary
    except ImportError:
        pass
    import regex

    with open(os.path.join(GPT2, "encoder.json"), encoding="utf-8") as f:
        encoder = json.load(f)
    with open(os.path.join(GPT2, "vocab.bpe"), encoding="utf-8") as f:
        merges = [tuple(l.split()) for l in f.read().split("\n")[1:-1]]
    ranks = dict(zip(merges, range(len(merges))))
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    byte_encoder = dict(zip(bs, map(chr, cs)))
    pat = regex.compile(PATTERN)
    cache = {}

    def bpe(token):
        if token in cache:
            return cache[token]
        word = tuple(token)
        while len(word) > 1:
            pairs = set(zip(word, word[1:]))
            bigram = min(pairs, key=lambda p: ranks.get(p, float("inf")))
            if bigram not in ranks:
                break
            first, second = bigram
            new_word, i = [], 0
            while i < len(word):
                try:
                    j = word.index(first, i)
                except ValueError:
                    new_word.extend(word[i:])
                    break
                new_word.extend(word[i:j])
                i = j
                if word[i] == first and i < len(word) - 1 and word[i + 1] == second:
                    new_word.append(first + second)
                    i += 2
                else:
                    new_word.append(word[i])
                    i += 1
            word = tuple(new_word)
        cache[token] = word
        return word

    def encode(text):
        ids = []
        for piece in pat.findall(text):
            piece = "".join(byte_encoder[b] for b in piece.encode("utf-8"))
            ids.extend(encoder[t] for t in bpe(piece))
        return ids

    return "pure-python encoder.py", encode


class Encoder:
    """Megatron's preprocess_data.Encoder (IdentitySplitter), one per pool worker."""

    def __init__(self, keys, append_eod, skip_bad):
        self.keys, self.append_eod, self.skip_bad = keys, append_eod, skip_bad

    def initializer(self):
        Encoder.encode_text = make_encoder()[1]

    def encode(self, raw):
        line = raw.decode("utf-8", errors="replace")
        if not line.strip():
            return None, len(raw)
        try:
            data = json.loads(line)
            texts = [data[k] for k in self.keys]
            if not all(isinstance(t, str) for t in texts):
                raise TypeError("not a string")
        except (ValueError, KeyError, TypeError):
            if self.skip_bad:
                return None, len(raw)
            raise
        ids = {}
        for key, text in zip(self.keys, texts):
            # Lone surrogates (JSON \ud800 escapes) -> U+FFFD, as anvil's JSON reader does.
            text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
            doc_ids = []
            sentence_ids = Encoder.encode_text(text)
            if len(sentence_ids) > 0:
                doc_ids.append(sentence_ids)
            if len(doc_ids) > 0 and self.append_eod:
                doc_ids[-1].append(EOD)
            ids[key] = doc_ids
        return ids, len(raw)


def write_megatron(prefix, docs):
    """MMapIndexedDataset builder: uint16 (code 8), pointers = exclusive cumsum of sizes*2."""
    sizes, doc_idx = array("i"), array("q", [0])
    with open(prefix + ".bin", "wb") as f:
        for doc in docs:
            for seq in doc:
                array("H", seq).tofile(f)
                sizes.append(len(seq))
            doc_idx.append(len(sizes))
    pointers, p = array("q"), 0
    for s in sizes:
        pointers.append(p)
        p += 2 * s
    with open(prefix + ".idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))
        f.write(struct.pack("<Q", len(sizes)) + struct.pack("<Q", len(doc_idx)))
        f.write(sizes.tobytes() + pointers.tobytes() + doc_idx.tobytes())


def read_megatron(prefix):
    """Documents as lists of sequences, MMapIndexedDataset.Index semantics."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", prefix + ".idx: bad magic"
    (version,) = struct.unpack_from("<Q", idx, 9)
    code = idx[17]
    n, d = struct.unpack_from("<QQ", idx, 18)
    assert version == 1 and code in (4, 8), (version, code)
    off = 34
    sizes = array("i", idx[off:off + 4 * n])
    pointers = array("q", idx[off + 4 * n:off + 12 * n])
    doc_idx = array("q", idx[off + 12 * n:off + 12 * n + 8 * d])
    tokens = array("H" if code == 8 else "i")
    with open(prefix + ".bin", "rb") as f:
        tokens.frombytes(f.read())
    item = tokens.itemsize
    seqs = [tokens[pointers[i] // item:pointers[i] // item + sizes[i]].tolist() for i in range(n)]
    return [seqs[doc_idx[i]:doc_idx[i + 1]] for i in range(d - 1)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--anvil", default=os.path.join(ROOT, "build", "bin", "preprocess"))
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--json-keys", nargs="+", default=["text"])
    ap.add_argument("--no-append-eod", action="store_true")
    ap.add_argument("--skip-bad-lines", action="store_true")
    ap.add_argument("--out", default="/tmp/preprocess_compare")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    size = os.path.getsize(args.input)

    cmd = [args.anvil, "--input", args.input, "--input-format", "jsonl", "--json-keys",
           *args.json_keys, "--tokenizer-type", "GPT2BPE",
           "--vocab-file", os.path.join(GPT2, "encoder.json"),
           "--merge-file", os.path.join(GPT2, "vocab.bpe"), "--workers", str(args.workers),
           "--output-prefix", os.path.join(args.out, "anvil"), "--no-progress"]
    if not args.no_append_eod:
        cmd.append("--append-eod")
    if args.skip_bad_lines:
        cmd.append("--skip-bad-lines")
    t0 = time.time()
    run = subprocess.run(cmd, capture_output=True, text=True)
    anvil_s = time.time() - t0
    print(run.stdout + run.stderr, end="")
    if run.returncode != 0:
        sys.exit("anvil preprocess failed")

    name, _ = make_encoder()
    encoder = Encoder(args.json_keys, not args.no_append_eod, args.skip_bad_lines)
    docs = {k: [] for k in args.json_keys}
    t0 = time.time()
    with open(args.input, "rb") as fin, multiprocessing.Pool(
            args.workers, initializer=encoder.initializer) as pool:
        for doc, _ in pool.imap(encoder.encode, fin, 25):
            for key, sentences in (doc or {}).items():
                if sentences:
                    docs[key].append(sentences)
    ref_s = time.time() - t0

    ok = True
    for key in args.json_keys:
        ref = os.path.join(args.out, f"ref_{key}_document")
        ours = os.path.join(args.out, f"anvil_{key}_document")
        write_megatron(ref, docs[key])
        same = all(open(ref + e, "rb").read() == open(ours + e, "rb").read()
                   for e in (".bin", ".idx"))
        if not same:
            ok = False
            a, b = read_megatron(ours), read_megatron(ref)
            first = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), None)
            print(f"DIFFER {key}: {len(a)} vs {len(b)} documents; first differing document: "
                  f"{first}" + (f"\n  anvil: {a[first]}\n  ref:   {b[first]}" if first is not None
                                else ""))
        else:
            print(f"IDENTICAL {key}: {ours}.{{bin,idx}} == Megatron-style reference "
                  f"({len(docs[key])} documents)")
    mb = size / 1e6
    print(f"throughput, {args.workers} worker(s), {mb:.1f} MB of JSONL: anvil {mb / anvil_s:.1f} "
          f"MB/s (incl. tokenizer load), Megatron-style Python with {name} {mb / ref_s:.1f} MB/s")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
