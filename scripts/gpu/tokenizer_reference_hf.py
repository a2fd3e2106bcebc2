#!/usr/bin/env python3
"""Authoritative tokenizer parity ids: Hugging Face tokenizers (the Rust library) on every
tokenizer.json of scripts/tokenizer_reference.js, over tests/io/fixtures/hf_parity/texts.json.

Run once on the device machine (which has the tokenizers package):
  python3 tokenizer_reference_hf.py DIR OUT
where DIR holds texts.json and <name>.json.gz for each tokenizer; writes OUT/hf_all.json:
{"reference": "tokenizers X.Y.Z", "tokenizers": {name: {"ids": [...], "ids_special": [...],
"decoded": [...], "mb_per_s": single-thread encode speed}}}. Texts are decoded from their
bytes with errors="replace", as a Python caller would. tests/io/fixtures/hf_parity/hf/ holds
the result split per tokenizer.
"""
import glob
import gzip
import json
import os
import sys
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")
import tokenizers  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402


def main():
    src, out = sys.argv[1], sys.argv[2]
    texts = [bytes.fromhex(t["hex"]).decode("utf-8", errors="replace")
             for t in json.load(open(os.path.join(src, "texts.json")))["texts"]]
    bench = gzip.open(os.path.join(src, "bench.txt.gz"), "rt", encoding="utf-8").read()
    result = {"reference": f"tokenizers {tokenizers.__version__}", "tokenizers": {}}
    for path in sorted(glob.glob(os.path.join(src, "*.json.gz"))):
        name = os.path.basename(path)[:-len(".json.gz")]
        entry = {}
        try:
            tok = Tokenizer.from_str(gzip.open(path, "rt", encoding="utf-8").read())
            entry["ids"] = [tok.encode(t, add_special_tokens=False).ids for t in texts]
            entry["ids_special"] = [tok.encode(t, add_special_tokens=True).ids for t in texts]
            entry["decoded"] = [tok.decode(ids, skip_special_tokens=False) for ids in entry["ids"]]
            start = time.process_time()
            n = len(tok.encode(bench, add_special_tokens=False).ids)
            seconds = time.process_time() - start
            entry["mb_per_s"] = len(bench.encode("utf-8")) / 1e6 / seconds
            entry["bench_tokens"] = n
        except Exception as e:  # recorded, so one bad file does not hide the others
            entry["error"] = repr(e)
        result["tokenizers"][name] = entry
        print(name, entry.get("error", "ok"), entry.get("mb_per_s"), flush=True)
    with open(os.path.join(out, "hf_all.json"), "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main()
