// The only translation unit that includes <sentencepiece_processor.h> (see spm_library.h): it
// must not include any Abseil header, directly or through ours.
#include "io/tokenizers/spm_library.h"

#include <sentencepiece_processor.h>

namespace anvil::io::spm {

Processor::Processor() : impl_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}
Processor::~Processor() = default;

std::string Processor::load(const std::string& path) {
  const auto status = impl_->Load(path);
  return status.ok() ? std::string() : std::string(status.message());
}

std::string Processor::encode(std::string_view text, std::vector<int>* ids) const {
  const auto status = impl_->Encode(text, ids);
  return status.ok() ? std::string() : std::string(status.message());
}

std::string Processor::decode(const std::vector<int>& ids, std::string* text) const {
  const auto status = impl_->Decode(ids, text);
  return status.ok() ? std::string() : std::string(status.message());
}

int Processor::piece_size() const { return impl_->GetPieceSize(); }
int Processor::pad_id() const { return impl_->pad_id(); }
int Processor::eos_id() const { return impl_->eos_id(); }
int Processor::unk_id() const { return impl_->unk_id(); }
int Processor::bos_id() const { return impl_->bos_id(); }
std::string Processor::id_to_piece(int id) const { return impl_->IdToPiece(id); }
int Processor::piece_to_id(std::string_view piece) const { return impl_->PieceToId(piece); }

}  // namespace anvil::io::spm
