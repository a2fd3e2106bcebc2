#!/usr/bin/env node
// The tokenizer parity reference (tests/io/hf_parity_test.cc, docs/data.md).
//
//   node scripts/tokenizer_reference.js derive   writes the derived tokenizer.json files into
//        data/npm/derived/<name>/ (scripts/fetch-tokenizers.sh runs this): bloom_style (BLOOM's
//        pre-tokenizer: an Oniguruma regex Split + ByteLevel without regex, over GPT-2's
//        vocabulary), t5_style (a T5 converter's pipeline - Precompiled charsmap, Metaspace,
//        Unigram - over data/t5/spm.model), and synth_* files that exercise the remaining
//        components (normalizers, pre-tokenizer behaviors, post-processors, added-token flags).
//   node scripts/tokenizer_reference.js ids      encodes tests/io/fixtures/hf_parity/texts.json
//        with @lenml/tokenizers (a port of transformers.js's tokenizers) for every file and
//        writes tests/io/fixtures/hf_parity/js/<name>.json.
//   node scripts/tokenizer_reference.js list     prints {name: path} of the files.
//
// The JS port runs JavaScript regexes, not Oniguruma, so where the two differ (BLOOM's nested
// class) it is not authoritative; scripts/gpu/tokenizer_reference_hf.py (Hugging Face tokenizers,
// the Rust library) made the authoritative fixtures in tests/io/fixtures/hf_parity/hf/.
"use strict";
const fs = require("fs");
const path = require("path");

const root = path.resolve(__dirname, "..");
const npm = path.join(root, "data/npm/node_modules/@lenml");
const derived = path.join(root, "data/npm/derived");
const fixtures = path.join(root, "tests/io/fixtures/hf_parity");

const files = {
  gpt2: path.join(npm, "tokenizer-gpt2/models/tokenizer.json"),
  llama2: path.join(npm, "tokenizer-llama2/models/tokenizer.json"),
  llama3: path.join(npm, "tokenizer-llama3/models/tokenizer.json"),
  llama3_1: path.join(npm, "tokenizer-llama3_1/models/tokenizer.json"),
  qwen2_5: path.join(npm, "tokenizer-qwen2_5/models/tokenizer.json"),
  qwen3: path.join(npm, "tokenizer-qwen3/models/tokenizer.json"),
  gemma: path.join(npm, "tokenizer-gemma/models/tokenizer.json"),
  gemma3: path.join(npm, "tokenizer-gemma3/models/tokenizer.json"),
  mistral_nemo: path.join(npm, "tokenizer-mistral_nemo/models/tokenizer.json"),
  bert_uncased: path.join(root, "tests/io/fixtures/tokenizers/bert_uncased_tokenizer.json"),
  bloom_style: path.join(derived, "bloom_style/tokenizer.json"),
  t5_style: path.join(derived, "t5_style/tokenizer.json"),
  synth_wordpiece: path.join(derived, "synth_wordpiece/tokenizer.json"),
  synth_bpe: path.join(derived, "synth_bpe/tokenizer.json"),
  synth_metaspace: path.join(derived, "synth_metaspace/tokenizer.json"),
};

const readJson = (p) => JSON.parse(fs.readFileSync(p, "utf8"));

function writeJson(p, value) {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, JSON.stringify(value));
}

// ---- SentencePiece .model (protobuf) -> the fields a T5 converter reads ----------------------

function varint(buf, pos) {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    const b = buf[pos++];
    v |= BigInt(b & 0x7f) << shift;
    if ((b & 0x80) === 0) return [v, pos];
    shift += 7n;
  }
}

// Calls visit(field, wireType, value) for each field of one message; length-delimited values
// are Buffers, fixed32 values are their 4 bytes.
function fields(buf, visit) {
  let pos = 0;
  while (pos < buf.length) {
    let key;
    [key, pos] = varint(buf, pos);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, pos] = varint(buf, pos);
      visit(field, wire, v);
    } else if (wire === 2) {
      let len;
      [len, pos] = varint(buf, pos);
      visit(field, wire, buf.subarray(pos, pos + Number(len)));
      pos += Number(len);
    } else if (wire === 5) {
      visit(field, wire, buf.subarray(pos, pos + 4));
      pos += 4;
    } else if (wire === 1) {
      pos += 8;
    } else {
      throw new Error(`unsupported protobuf wire type ${wire}`);
    }
  }
}

function readSpm(file) {
  const pieces = [];
  let charsmap = Buffer.alloc(0);
  let unkId = 0;
  fields(fs.readFileSync(file), (f, w, v) => {
    if (f === 1 && w === 2) {
      const piece = { piece: "", score: 0, type: 1 };
      fields(v, (pf, pw, pv) => {
        if (pf === 1) piece.piece = pv.toString("utf8");
        if (pf === 2) piece.score = pv.readFloatLE(0);
        if (pf === 3) piece.type = Number(pv);
      });
      pieces.push(piece);
    } else if (f === 3 && w === 2) {
      fields(v, (nf, nw, nv) => {
        if (nf === 2) charsmap = Buffer.from(nv);
      });
    }
  });
  pieces.forEach((p, i) => {
    if (p.type === 2) unkId = i;
  });
  return { pieces, charsmap, unkId };
}

// ---- derived files ----------------------------------------------------------------------------

function special(id, content, extra = {}) {
  return Object.assign(
    { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false,
      special: true },
    extra);
}

function bloomStyle() {
  const t = readJson(files.gpt2);
  t.normalizer = null;
  t.pre_tokenizer = {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: " ?[^(\\s|[.,!?…。，、।۔،])]+" }, behavior: "Isolated",
        invert: false },
      { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
    ],
  };
  return t;
}

function t5Style() {
  const spm = readSpm(path.join(root, "data/t5/spm.model"));
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: spm.pieces
      .map((p, i) => [p, i])
      .filter(([p]) => p.type === 2 || p.type === 3)
      .map(([p, i]) => special(i, p.piece)),
    normalizer: {
      type: "Sequence",
      normalizers: [
        { type: "Precompiled", precompiled_charsmap: spm.charsmap.toString("base64") },
        { type: "Strip", strip_left: false, strip_right: true },
        { type: "Replace", pattern: { Regex: " {2,}" }, content: "▁" },
      ],
    },
    pre_tokenizer: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    post_processor: {
      type: "TemplateProcessing",
      single: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      pair: [{ Sequence: { id: "A", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } },
        { Sequence: { id: "B", type_id: 0 } }, { SpecialToken: { id: "</s>", type_id: 0 } }],
      special_tokens: { "</s>": { id: "</s>", ids: [1], tokens: ["</s>"] } },
    },
    decoder: { type: "Metaspace", replacement: "▁", prepend_scheme: "always", split: true },
    model: {
      type: "Unigram",
      unk_id: spm.unkId,
      vocab: spm.pieces.map((p) => [p.piece, p.score]),
      byte_fallback: false,
    },
  };
}

// BERT's vocabulary behind other normalizers and pre-tokenizers.
function synthWordpiece() {
  const t = readJson(files.bert_uncased);
  t.normalizer = {
    type: "Sequence",
    normalizers: [{ type: "NFKD" }, { type: "StripAccents" }, { type: "Lowercase" },
      { type: "Strip", strip_left: true, strip_right: true }],
  };
  t.pre_tokenizer = {
    type: "Sequence",
    pretokenizers: [{ type: "Whitespace" }, { type: "Digits", individual_digits: true }],
  };
  t.post_processor = { type: "BertProcessing", sep: ["[SEP]", 102], cls: ["[CLS]", 101] };
  t.decoder = { type: "WordPiece", prefix: "##", cleanup: true };
  return t;
}

// GPT-2's vocabulary behind split behaviors and a byte-level step with a prefix space.
function synthBpe() {
  const t = readJson(files.gpt2);
  t.normalizer = {
    type: "Sequence",
    normalizers: [{ type: "NFC" }, { type: "Replace", pattern: { String: "\t" }, content: "    " }],
  };
  t.pre_tokenizer = {
    type: "Sequence",
    pretokenizers: [
      { type: "Split", pattern: { Regex: "\\p{N}+" }, behavior: "Contiguous", invert: true },
      { type: "Punctuation", behavior: "MergedWithPrevious" },
      { type: "Split", pattern: { String: "-" }, behavior: "MergedWithNext", invert: false },
      { type: "WhitespaceSplit" },
      { type: "Digits", individual_digits: false },
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true },
    ],
  };
  t.post_processor = {
    type: "Sequence",
    processors: [
      { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
      { type: "RobertaProcessing", sep: ["<|endoftext|>", 50256], cls: ["<|endoftext|>", 50256],
        trim_offsets: true, add_prefix_space: true },
    ],
  };
  return t;
}

// A SentencePiece-style BPE with a Metaspace pre-tokenizer (prepend_scheme "first", as newer
// Llama/Mistral files) and added tokens with lstrip / rstrip / single_word / normalized.
function synthMetaspace() {
  const t = readJson(files.llama2);
  t.normalizer = null;
  t.pre_tokenizer = { type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false };
  t.decoder = {
    type: "Sequence",
    decoders: [{ type: "Metaspace", replacement: "▁", prepend_scheme: "first", split: false },
      { type: "ByteFallback" }, { type: "Fuse" }],
  };
  const n = Object.keys(t.model.vocab).length;
  t.added_tokens.push(special(n, "<mask>", { lstrip: true }));
  t.added_tokens.push(special(n + 1, "[rs]", { rstrip: true }));
  t.added_tokens.push(special(n + 2, "wordx", { single_word: true, normalized: true,
    special: false }));
  return t;
}

function derive() {
  const makers = { bloom_style: bloomStyle, t5_style: t5Style, synth_wordpiece: synthWordpiece,
    synth_bpe: synthBpe, synth_metaspace: synthMetaspace };
  for (const [name, make] of Object.entries(makers)) writeJson(files[name], make());
}

// ---- reference ids ----------------------------------------------------------------------------

function texts() {
  return readJson(path.join(fixtures, "texts.json")).texts.map((t) => ({
    name: t.name,
    // WHATWG decoding = one U+FFFD per maximal ill-formed subpart, as Python's errors="replace".
    text: new TextDecoder("utf-8").decode(Buffer.from(t.hex, "hex")),
  }));
}

function jsIds() {
  const { TokenizerLoader } = require(path.join(npm, "tokenizers"));
  const version = readJson(path.join(npm, "tokenizers/package.json")).version;
  for (const [name, file] of Object.entries(files)) {
    const config = path.join(path.dirname(file), "tokenizer_config.json");
    let tok;
    try {
      tok = TokenizerLoader.fromPreTrained({
        tokenizerJSON: readJson(file),
        tokenizerConfig: fs.existsSync(config) ? readJson(config) : {},
      });
    } catch (e) {
      console.error(`${name}: the JS reference cannot load it: ${e.message}`);
      continue;
    }
    const out = { reference: `@lenml/tokenizers ${version}`, ids: [], ids_special: [],
      decoded: [] };
    for (const t of texts()) {
      const ids = tok.encode(t.text, { add_special_tokens: false });
      out.ids.push(ids);
      out.ids_special.push(tok.encode(t.text, { add_special_tokens: true }));
      // As tokenizers' decode(ids, skip_special_tokens=False): no clean-up of spaces (that is
      // Python transformers' step, which a tokenizer_config.json may switch on).
      out.decoded.push(ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: false,
        clean_up_tokenization_spaces: false }));
    }
    writeJson(path.join(fixtures, "js", `${name}.json`), out);
    console.log(`${name}: ${out.ids.length} texts`);
  }
}

const mode = process.argv[2];
if (mode === "derive") {
  derive();
} else if (mode === "ids") {
  jsIds();
} else if (mode === "list") {
  console.log(JSON.stringify(files, null, 1));
} else {
  console.error("usage: tokenizer_reference.js derive | ids | list");
  process.exit(2);
}
