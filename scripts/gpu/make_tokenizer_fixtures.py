#!/usr/bin/env python3
"""Generates tests/io/fixtures/tokenizers/: expected token ids from the reference tokenizers, on
the GPU machine (it has tiktoken, tokenizers, sentencepiece; this one does not). Run once from
the repo root; the outputs are committed and anvil's tests compare against them.

Every fixture needs two independent references that agree before it is written:
  GPT-2 BPE : tiktoken built from data/gpt2/r50k_base.tiktoken  ==  tokenizers.ByteLevelBPETokenizer
              (data/gpt2/encoder.json + vocab.bpe)
  WordPiece : tokenizers.BertWordPieceTokenizer(data/bert/vocab.txt)  ==  the plain-Python BERT
              basic + WordPiece tokenizer below (written from the BERT paper's reference rules)
  SentencePiece : python sentencepiece on data/t5/spm.model (encode twice: as ids and as pieces
              mapped through the vocabulary; same library, so only one real reference)
  HF tokenizer.json : tokenizers.Tokenizer.from_file on the tokenizer.json files written here,
              which must equal the GPT-2 and WordPiece ids above.
Inputs are bytes; invalid UTF-8 is first decoded with Python's errors="replace" (U+FFFD per
maximal invalid subsequence), which is what both references see and what anvil must do.

usage: make_tokenizer_fixtures.py OUT_DIR
"""
import base64
import json
import os
import random
import sys
import unicodedata

import sentencepiece as spm
import tiktoken
from tokenizers import BertWordPieceTokenizer, ByteLevelBPETokenizer, Tokenizer

GPT2_PAT = (r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def inputs():
    fixed = [
        "Hello world", "Hello, world!", "", " ", "  ", "\n", "\n\n\n", "\t tab\tand  spaces   ",
        "trailing space ", " leading space", "a  b   c    d", "line1\nline2\r\nline3",
        "I'm you're we've they'll he'd it's don't CAN'T She'S", "'s 's ' s''", "o'clock rock'n'roll",
        "123 4567 89012 3.14159 -42 1,000,000 0x1F 1e10 ١٢٣ ４５",
        "日本語のテキストです。中文文本。한국어 텍스트", "emoji 🤖🚀👍🏽 👨‍👩‍👧‍👦 flags 🇺🇸🇯🇵",
        "combining: e\u0301 a\u0308 n\u0303 \u1e9b\u0323 Å Å", "café naïve résumé Ångström",
        "RTL: שלום עולם مرحبا بالعالم", "mixed العربية and English and עברית 123",
        "Ελληνικά Русский язык Українська", "math ∑∫∂√∞ ≠ ≤ ≥ → ⇒ ∀∃",
        "zero\u200bwidth\u200djoiner\ufeffbom", "control \x00\x01\x07\x1b chars", "\u00a0nbsp\u3000ideo",
        "ALLCAPS lowercase MiXeD", "hyphen-ated under_score dot.separated slash/path",
        "email@example.com https://example.org/a?b=c&d=e#f", "<html><body>tags</body></html>",
        "!!!???...,,,;;;:::", "((([[[{{{}}}]]])))", "$100 €50 £30 ¥1000 ₹",
        "a" * 120, "supercalifragilisticexpialidocious" * 4, "x" + "é" * 60,
        "In the beginning God created the heaven and the earth.",
        "And the earth was without form, and void; and darkness was upon the face of the deep.",
    ]
    out = [s.encode("utf-8") for s in fixed]
    out += [b"invalid \xff\xfe bytes", b"truncated \xe6\x97", b"lone cont \x80\x80 x",
            b"overlong \xc0\xaf", b"surrogate \xed\xa0\x80 y", b"\xf5\x80\x80\x80 beyond",
            b"mixed \xe6\x97\xa5 ok \xe6 bad"]
    rng = random.Random(1234)
    pools = ["abcdefghijklmnopqrstuvwxyz", "ABCXYZ", "0123456789", " \t\n", ".,;:!?'\"-()[]",
             "éèüößñçÅØ", "日本語中文한국", "🤖🚀👍", "שלוםمرحبا", "\u0301\u0308"]
    for _ in range(60):
        s = "".join(rng.choice(rng.choice(pools)) for _ in range(rng.randint(1, 40)))
        out.append(s.encode("utf-8"))
    kjv = "data/demo/kjv.txt"
    if os.path.exists(kjv):
        with open(kjv, encoding="utf-8") as f:
            text = f.read(20000)
        out += [p.encode("utf-8") for p in text.split("\n\n")[:20]]
    return out


# --- plain-Python BERT tokenizer (second reference for WordPiece) ---------------------------
def _is_ws(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def _is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf")


def _is_punct(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def _is_cjk(cp):
    return any(a <= cp <= b for a, b in [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF),
                                         (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
                                         (0x2B820, 0x2CEAF), (0xF900, 0xFAFF),
                                         (0x2F800, 0x2FA1F)])


def bert_reference(text, vocab, lower):
    cleaned = []
    for c in text:
        cp = ord(c)
        if cp == 0 or cp == 0xFFFD or _is_control(c):
            continue
        cleaned.append(" " if _is_ws(c) else c)
    text = "".join(cleaned)
    text = "".join(f" {c} " if _is_cjk(ord(c)) else c for c in text)
    words = []
    for tok in text.split():
        if lower:
            tok = tok.lower()
            tok = "".join(c for c in unicodedata.normalize("NFD", tok)
                          if unicodedata.category(c) != "Mn")
        cur = ""
        for c in tok:
            if _is_punct(c):
                if cur:
                    words.append(cur)
                words.append(c)
                cur = ""
            else:
                cur += c
        if cur:
            words.append(cur)
    ids = []
    for w in words:
        if len(w) > 100:
            ids.append(vocab["[UNK]"])
            continue
        start, pieces = 0, []
        while start < len(w):
            end, found = len(w), None
            while start < end:
                sub = ("##" if start > 0 else "") + w[start:end]
                if sub in vocab:
                    found = sub
                    break
                end -= 1
            if found is None:
                pieces = None
                break
            pieces.append(vocab[found])
            start = end
        ids += pieces if pieces is not None else [vocab["[UNK]"]]
    return ids


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    ranks = {}
    with open("data/gpt2/r50k_base.tiktoken") as f:
        for line in f:
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    tk = tiktoken.Encoding("r50k_base_local", pat_str=GPT2_PAT, mergeable_ranks=ranks,
                           special_tokens={"<|endoftext|>": 50256})
    bl = ByteLevelBPETokenizer("data/gpt2/encoder.json", "data/gpt2/vocab.bpe")
    bl.add_special_tokens(["<|endoftext|>"])
    bl.save(os.path.join(out_dir, "gpt2_tokenizer.json"))
    vocab = {}
    with open("data/bert/vocab.txt", encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab[line.rstrip("\n")] = i
    wp = {lower: BertWordPieceTokenizer("data/bert/vocab.txt", lowercase=lower,
                                        strip_accents=lower, clean_text=True,
                                        handle_chinese_chars=True) for lower in (True, False)}
    wp[True].save(os.path.join(out_dir, "bert_uncased_tokenizer.json"))
    hf_gpt2 = Tokenizer.from_file(os.path.join(out_dir, "gpt2_tokenizer.json"))
    hf_bert = Tokenizer.from_file(os.path.join(out_dir, "bert_uncased_tokenizer.json"))
    sp = spm.SentencePieceProcessor(model_file="data/t5/spm.model")

    cases = []
    for raw in inputs():
        text = raw.decode("utf-8", errors="replace")
        g1 = tk.encode_ordinary(text)
        g2 = bl.encode(text).ids
        assert g1 == g2, ("gpt2 references disagree", raw, g1, g2)
        assert hf_gpt2.encode(text, add_special_tokens=False).ids == g1, ("hf gpt2", raw)
        case = {"hex": raw.hex(), "gpt2": g1}
        for lower, key in ((True, "bert_uncased"), (False, "bert_cased")):
            a = wp[lower].encode(text, add_special_tokens=False).ids
            b = bert_reference(text, vocab, lower)
            assert a == b, (key, raw, a, b)
            case[key] = a
        assert hf_bert.encode(text, add_special_tokens=False).ids == case["bert_uncased"]
        ids = sp.encode(text, out_type=int)
        pieces = sp.encode(text, out_type=str)
        assert ids == [sp.piece_to_id(p) for p in pieces], ("spm", raw)
        case["spm"] = ids
        cases.append(case)
    with open(os.path.join(out_dir, "expected_ids.jsonl"), "w") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=True) + "\n")
    print(f"make_tokenizer_fixtures: {len(cases)} inputs, all references agree -> {out_dir}")


if __name__ == "__main__":
    main()
