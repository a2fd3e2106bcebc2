// T5 parameter state <-> logical checkpoint tensors (see t5_checkpoint.h): T5Model seen as
// model/train/checkpoint.h's CheckpointModel.
#include "model/t5/t5_checkpoint.h"

namespace anvil::model {
namespace {

CheckpointModel t5_checkpoint_model(T5Model& model) {
  CheckpointModel c;
  c.table = &model.params();
  c.buffers = model.flat_buffers();
  c.vocab_size = model.config().loss_vocab();
  c.tp = model.shard().tp;
  c.tp_rank = model.shard().tp_rank;
  // A parameter several pipeline stages hold is written by the first; a load sets every copy.
  c.writes = [&model](const Param& p) { return model.first_copy(p); };
  c.zero = model.zero_partition();
  c.loaded = [&model](engine::Stream& s) { model.params_loaded(s); };  // ZeRO-3: regather
  return c;
}

}  // namespace

std::vector<engine::HostSlice> t5_checkpoint_slices(T5Model& model, int dp_rank,
                                                    engine::Stream& stream) {
  return checkpoint_slices(t5_checkpoint_model(model), dp_rank, stream);
}

absl::Status t5_load_checkpoint(T5Model& model, const TensorLookup& lookup, bool weights_only,
                                engine::Stream& stream) {
  return load_checkpoint_tensors(t5_checkpoint_model(model), lookup, weights_only, stream);
}

}  // namespace anvil::model
