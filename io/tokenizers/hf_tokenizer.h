// Hugging Face tokenizer.json (the `tokenizers` library's serialization), i.e. Megatron's
// PretrainedFromHF given a local directory. encode() follows tokenizers' Tokenizer::encode with
// add_special_tokens=False:
//   1. ill-formed UTF-8 is replaced as Python's errors="replace" does (what a Python caller
//      hands the library: tokenizers itself only takes str), so any byte string encodes;
//   2. added tokens with "normalized": false are cut out of the raw text (leftmost-longest
//      match, honouring single_word / lstrip / rstrip) and emit their id;
//   3. each remaining segment is normalized (hf_normalizers.h), then cut on the added tokens
//      with "normalized": true (matched against their normalized content);
//   4. the rest is pre-tokenized (hf_pre_tokenizers.h) and each piece run through the model
//      (hf_models.h: BPE, Unigram, WordPiece, WordLevel).
// encode_with_special_tokens() then applies the post-processor (hf_post_processors.h), as
// add_special_tokens=True does for one sequence. Truncation and padding are ignored.
// decode() turns every id (added tokens included, none skipped) into its token and runs the
// decoder (hf_decoders.h), as tokenizers' decode(ids, skip_special_tokens=False).
// Regex patterns run on Oniguruma, as in tokenizers (hf_pattern.h). A component or option that
// is not implemented is an Unimplemented error at load time naming it; nothing is ignored.
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
  // encode() followed by the file's post_processor (its special tokens for one sequence, e.g.
  // Llama's <s> or BERT's [CLS] ... [SEP]); the same as encode() when it has none.
  void encode_with_special_tokens(absl::string_view text, std::vector<int32_t>* out) const;
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
