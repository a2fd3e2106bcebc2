// SentencePiece tokenizer over a .model file, through Debian's libsentencepiece (spm_library.h),
// so ids equal the library's (Python's `sp.encode(text)`: the model's own normalizer, no BOS/EOS
// added). Ill-formed UTF-8 is first replaced as Python's errors="replace" does, which is the
// text a Python caller hands the library.
//
// Special tokens come from the model: pad, eos, unk, bos (-1 where the model disables one); eod
// = eos (Megatron-core's GPTSentencePieceTokenizer), for --append-eod.
//
// T5 sentinels (vocab_extra_ids = n > 0) follow Hugging Face's T5Tokenizer: n ids appended after
// the model's pieces, <extra_id_0> being the LAST one: id(<extra_id_k>) = pieces + n - 1 - k
// (t5-base: 32000 pieces, <extra_id_0> = 32099). Megatron-DeepSpeed's SentencePieceTokenizer
// instead appends them in increasing order (and adds <CLS> <SEP> <EOD> <MASK>); checkpoints and
// datasets made with one convention do not match the other. sentinels[k] is the id of
// <extra_id_k>. A sentinel's text in the input ("<extra_id_3>") encodes to its id; the text
// between sentinels is encoded piecewise, as both references do.
//
// decode(): the library's decoding of each run of model ids, with the sentinels' text inserted
// verbatim between runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tokenizer.h"
#include "io/tokenizers/spm_library.h"

namespace anvil::io {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  // NotFound for a missing file, InvalidArgument (naming the file) for one the library rejects.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> load(const std::string& model_file,
                                                                      int vocab_extra_ids = 0);

  using Tokenizer::encode;
  void encode(absl::string_view text, std::vector<int32_t>* out) const override;
  absl::StatusOr<std::string> decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return pieces_ + extra_ids_; }
  const SpecialTokens& special() const override { return special_; }
  std::string name() const override { return "SentencePiece"; }

  // The model's piece for `id` or the sentinel's text; empty for an id out of range.
  std::string piece(int32_t id) const;

 private:
  SentencePieceTokenizer() = default;
  // Encodes well-formed UTF-8 without sentinel parsing.
  void encode_plain(absl::string_view text, std::vector<int32_t>* out) const;

  spm::Processor processor_;
  int32_t pieces_ = 0;
  int32_t extra_ids_ = 0;
  SpecialTokens special_;
};

}  // namespace anvil::io
