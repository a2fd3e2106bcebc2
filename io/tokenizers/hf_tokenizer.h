// Hugging Face tokenizer.json (the `tokenizers` library's serialization), i.e. Megatron's
// PretrainedFromHF given a local directory. encode() follows tokenizers' Tokenizer::encode with
// add_special_tokens=False:
//   1. ill-formed UTF-8 is replaced as Python's errors="replace" does (what a Python caller
//      hands the library);
//   2. added tokens with "normalized": false are cut out of the raw text (leftmost-longest
//      match, honouring single_word / lstrip / rstrip) and emit their id;
//   3. each remaining segment is normalized, then cut on the added tokens with
//      "normalized": true (matched against their normalized content);
//   4. the rest is pre-tokenized and run through the model.
// Supported components (anything else is an Unimplemented error naming the component):
//   normalizer:    null, BertNormalizer (bert_normalizer.h, tokenizers' rules), NFC, NFD, NFKC,
//                  NFKD, Lowercase, Sequence of these;
//   pre_tokenizer: null, BertPreTokenizer, ByteLevel (GPT-2's regex when use_regex; an added
//                  space when add_prefix_space);
//   model:         BPE over GPT-2's byte alphabet with a ByteLevel pre-tokenizer (merges run by
//                  Gpt2BpeTokenizer, io/tokenizers/gpt2_bpe.h; ignore_merges supported; dropout
//                  and subword prefixes/suffixes are not), WordPiece (wordpiece.h, greedy
//                  longest-match-first with the file's prefix, unk token and length limit);
//   decoder:       null (tokens joined by ' '), ByteLevel, WordPiece (with cleanup). Another
//                  decoder does not prevent loading; decode() then returns Unimplemented.
//   post_processor, truncation and padding are ignored: encode() adds no special tokens.
// decode() turns every id (added tokens included, none skipped) into its token and runs the
// decoder, as tokenizers' decode(ids, skip_special_tokens=False); ByteLevel output that is
// ill-formed UTF-8 gets U+FFFD as tokenizers' from_utf8_lossy does.
//
// Special tokens: the directory's special_tokens_map.json / tokenizer_config.json (keys
// bos_token, eos_token, unk_token, sep_token, pad_token, cls_token, mask_token) when present,
// else by name among the tokens: [PAD]/<pad>, [UNK]/<unk> or the model's unk_token, [CLS],
// [SEP], [MASK]/<mask>, <s>, </s>, and "<|endoftext|>" as bos and eos when neither is found
// (GPT-2's convention in transformers). eod = eos (Megatron's _AutoTokenizer), else
// "<|endoftext|>". sentinels = the ids of <extra_id_0>, <extra_id_1>, ... present in the file;
// vocab_extra_ids > 0 appends the missing ones as special added tokens in increasing order
// after the vocabulary (transformers' add_special_tokens, as Megatron-DeepSpeed does).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizer.h"

namespace anvil::io {

namespace hf_internal {
struct State;  // the parsed pipeline (hf_tokenizer.cc)
}  // namespace hf_internal

class HfTokenizer final : public Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one. NotFound for a missing file;
  // InvalidArgument naming the file (and line:column for malformed JSON) for a bad one;
  // Unimplemented naming an unsupported component.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> load(const std::string& path,
                                                           int vocab_extra_ids = 0);
  // From the contents of tokenizer.json; `name` is used in messages. No side files.
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> from_json(absl::string_view json,
                                                                const std::string& name,
                                                                int vocab_extra_ids = 0);
  ~HfTokenizer() override;

  using Tokenizer::encode;
  void encode(absl::string_view text, std::vector<int32_t>* out) const override;
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override;
  // Largest id (model or added) + 1.
  int64_t vocab_size() const override;
  const SpecialTokens& special() const override;
  std::string name() const override { return "HF"; }

  // The token string of `id` as tokenizers' id_to_token gives it (an added token's content, or
  // the model's vocabulary entry, in GPT-2's byte alphabet for byte-level BPE); empty for an
  // unknown id.
  std::string token(int32_t id) const;
  // The id of `token` (added tokens first, then the model's vocabulary), or -1.
  int32_t token_to_id(absl::string_view token) const;

 private:
  explicit HfTokenizer(std::unique_ptr<hf_internal::State> state);
  std::unique_ptr<hf_internal::State> state_;
};

}  // namespace anvil::io
