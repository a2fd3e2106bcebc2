// Checkpoint directories (DESIGN.md §6), generic over what is stored: tensors by logical name,
// each saved as boxes (engine::HostSlice) by whichever ranks hold them, plus the run's state.
//
//   DIR/latest                        text: the step of the newest complete checkpoint
//   DIR/step_00000100/manifest.json   format version, step, config, model, trainer state,
//                                     layout, LR schedule, files (bytes, CRC-32C), tensors (logical
//                                     shape, pieces: file, key, offset, extent)
//   DIR/step_00000100/rank_00003.safetensors   the boxes rank 3 wrote, F32, keys "<tensor>@<k>"
//   DIR/step_00000100/tokenizer/...   attachments: files kept with the model (CheckpointInfo)
//
// Saving is atomic: every rank writes into DIR/step_X.tmp-<token>/ (its safetensors file and a
// small rank_N.json listing its pieces and checksum, both fsynced); rank 0 then merges the
// lists into manifest.json, fsyncs the directory, renames it to step_X and updates `latest`
// (tmp + rename) last. A crash at any point leaves the previous checkpoints and `latest` valid;
// a save that fails (disk full) removes its temporaries (io/checkpoint_cleanup.h removes those
// of killed ones).
// Loading verifies every file's size and checksum and every piece against its safetensors
// header before anything is used; a broken checkpoint is refused with a message naming the file
// and the newest complete earlier one is used instead.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/host_slice.h"
#include "io/safetensors.h"

namespace anvil::io {

inline constexpr int kCheckpointFormatVersion = 1;

// Everything besides tensors.
struct CheckpointInfo {
  int64_t step = 0;
  std::string config;                         // the effective configuration (ini text)
  std::map<std::string, int64_t> state;       // run counters (consumed samples, RNG offsets ...)
  std::map<std::string, int64_t> layout;      // the parallel layout it was saved from
  std::map<std::string, double> lr_schedule;  // the schedule's parameters and current lr
  std::map<std::string, double> grad_scaler;  // the loss scaler's state (empty: none, not saved)
  // The model's type and architecture ("type": "t5", "d_model": "512" ...), checked on load
  // (empty: not recorded, as in older checkpoints).
  std::map<std::string, std::string> model;
  // Files kept with the checkpoint (the tokenizer's): name inside the step directory (may hold
  // a '/': "tokenizer/vocab.json") -> source path, copied by finish_checkpoint, checksummed
  // like the tensor files. Checkpoint::info() maps each name to its path in the checkpoint.
  std::map<std::string, std::string> attachments;
};

// DIR/step_%08d.
std::string checkpoint_step_dir(const std::string& dir, int64_t step);
// DIR/step_%08d.tmp-<token>: where a save in progress writes (token: the same on every rank).
std::string checkpoint_tmp_dir(const std::string& dir, int64_t step, const std::string& token);

// Saving on `world` ranks, three phases separated by barriers:
//   rank 0:      begin_checkpoint  (creates DIR and an empty temporary directory)
//   every rank:  write_checkpoint_shard
//   rank 0:      finish_checkpoint (manifest, rename, `latest`, keep_last pruning)
absl::Status begin_checkpoint(const std::string& dir, int64_t step, const std::string& token);
// On failure a rank removes what it wrote, rank 0 the whole temporary directory.
absl::Status write_checkpoint_shard(const std::string& tmp_dir, int rank,
                                    const std::vector<engine::HostSlice>& slices);
// keep_last > 0: afterwards deletes complete checkpoints older than the newest keep_last.
// On failure before the rename the temporary directory is removed.
absl::Status finish_checkpoint(const std::string& dir, const std::string& tmp_dir, int world,
                               const CheckpointInfo& info, int64_t keep_last);
// The three phases on one rank.
absl::Status save_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const std::vector<engine::HostSlice>& slices, int64_t keep_last);

// A complete, verified checkpoint directory.
class Checkpoint {
 public:
  // Reads DIR/step_X/manifest.json and verifies every file (present, size, CRC-32C, header)
  // and every piece (its key in the file, F32, inside the logical shape). Errors name the file.
  static absl::StatusOr<Checkpoint> open(const std::string& step_dir);

  const std::string& dir() const { return dir_; }
  const CheckpointInfo& info() const { return info_; }
  std::vector<std::string> tensor_names() const;
  bool has_tensor(const std::string& name) const { return tensors_.count(name) > 0; }
  // NotFound naming the checkpoint when absent.
  absl::StatusOr<std::vector<int64_t>> shape(const std::string& name) const;
  // The whole logical tensor (offset 0, extent = shape), assembled from its pieces; DataLoss
  // when the pieces do not cover it exactly once.
  absl::StatusOr<engine::HostSlice> read(const std::string& name) const;

 private:
  struct Piece {
    std::string file, key;
    std::vector<int64_t> offset, extent;
  };
  struct Tensor {
    std::vector<int64_t> shape;
    std::vector<Piece> pieces;
  };
  std::string dir_;
  CheckpointInfo info_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, SafetensorsFile> files_;
};

// The checkpoint to resume from under `dir`.
// step >= 0 (the user named a step): exactly that one. InvalidArgument when it does not exist,
// DataLoss when it is broken, both naming the steps that exist; never another step.
// step < 0 ("latest"): the one `latest` names. When that one is missing, incomplete or corrupt,
// each refusal is reported through `warn` (naming the file and the problem) and the newest
// complete earlier checkpoint is used, which `warn` also announces. NotFound when there is no
// checkpoint at all; DataLoss when every one was refused.
absl::StatusOr<Checkpoint> open_newest_complete(
    const std::string& dir, int64_t step, const std::function<void(const std::string&)>& warn);

// The steps of the complete checkpoints (with a manifest) under `dir`, ascending.
std::vector<int64_t> list_checkpoint_steps(const std::string& dir);

}  // namespace anvil::io
