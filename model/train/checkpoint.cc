// GPT parameter state <-> logical checkpoint tensors (see checkpoint.h). The TP mapping is
// tp_global_index's (model/param_table.h); the ZeRO pieces are parallel::ZeroPartition's.
#include "model/train/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/checked_math.h"
#include "engine/dtype.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/stack/gpt_layout.h"
#include "model/train/batch_schedule.h"
#include "model/train/family.h"
#include "model/train/lr_schedule.h"
#include "parallel/zero.h"

namespace anvil::model {
namespace {

// A box of a parameter shard seen as [R, C] (1-D: [N, 1]): local rows/cols [lrow, lrow + rows)
// x [lcol, lcol + cols) are the whole tensor's [grow, ...) x [gcol, ...).
struct Box {
  int64_t lrow, lcol, grow, gcol, rows, cols;
};

int64_t cols_of(const Param& p) { return p.shape.size() == 2 ? p.shape[1] : 1; }

// The boxes covering local flat elements [lo, hi) of shard p (TP rank tp_rank of tp), clipped
// to `logical_rows` rows of the whole tensor (the embedding's padding rows are not stored).
std::vector<Box> boxes_of(const Param& p, int64_t lo, int64_t hi, int tp, int tp_rank,
                          int64_t logical_rows) {
  const int64_t R = p.shape[0], C = cols_of(p);
  const int split = tp > 1 ? p.tp_split_dim : -1;
  const int64_t rpiece = split == 0 ? R / p.tp_parts : R;
  const int64_t cpiece = split == 1 ? C / p.tp_parts : C;
  auto map_row = [&](int64_t r) {
    return split == 0 ? r / rpiece * rpiece * tp + tp_rank * rpiece + r % rpiece : r;
  };
  auto map_col = [&](int64_t c) {
    return split == 1 ? c / cpiece * cpiece * tp + tp_rank * cpiece + c % cpiece : c;
  };
  std::vector<Box> out;
  // Each row segment [r0, r1) x [c0, c1), cut where a TP piece ends.
  auto add = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t r = r0; r < r1;) {
      const int64_t rend = std::min(r1, (r / rpiece + 1) * rpiece);
      for (int64_t c = c0; c < c1;) {
        const int64_t cend = std::min(c1, (c / cpiece + 1) * cpiece);
        Box b{r, c, map_row(r), map_col(c), rend - r, cend - c};
        b.rows = std::min(b.rows, logical_rows - b.grow);
        if (b.rows > 0) out.push_back(b);
        c = cend;
      }
      r = rend;
    }
  };
  for (int64_t i = lo; i < hi;) {
    const int64_t row = i / C, col = i % C;
    if (col != 0 || hi - i < C) {
      const int64_t end = std::min(C, col + (hi - i));
      add(row, row + 1, col, end);
      i += end - col;
    } else {
      const int64_t rows = (hi - i) / C;
      add(row, row + rows, 0, C);
      i += rows * C;
    }
  }
  return out;
}

// Where flat element range [lo, hi) (inside one bucket) lives in `buf`: a whole buffer holds
// it at lo, a ZeRO shard this rank's piece of the bucket only. Returns the part of [lo, hi) to
// use, and the buffer offset of its first element: with own_only (saving: each element once
// over DP) this rank's piece also from a whole buffer.
struct Held {
  int64_t lo = 0, hi = 0, at = 0;
};
Held held(engine::TensorView buf, int64_t flat_numel, const parallel::ZeroPartition* part,
          int64_t lo, int64_t hi, bool own_only) {
  const bool whole = buf.numel() == flat_numel;
  if (part == nullptr || (whole && !own_only)) return Held{lo, hi, lo};
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const parallel::ZeroPiece piece = part->piece(b);
    const int64_t a = std::max(lo, piece.begin), e = std::min(hi, piece.end);
    if (a < e) return Held{a, e, whole ? a : piece.shard_offset + a - piece.begin};
  }
  return Held{lo, lo, 0};
}

std::vector<float> download(engine::TensorView buf, int64_t at, int64_t n, engine::Stream& stream) {
  ANVIL_CHECK_MSG(buf.dtype == engine::DType::kF32,
                  "checkpoint: master weights and moments must be f32: " + engine::describe(buf));
  std::vector<float> h(static_cast<size_t>(n));
  engine::copy(engine::make_view(h.data(), engine::DType::kF32, engine::Device::kCpu, {n}),
               flat_slice(buf, at, {n}), stream);
  stream.synchronize();
  return h;
}

void upload(engine::TensorView buf, int64_t at, const float* src, int64_t n,
            engine::Stream& stream) {
  const engine::TensorView dst = flat_slice(buf, at, {n});
  const engine::Device host = engine::Device::kCpu;
  switch (buf.dtype) {
    case engine::DType::kF32:
      engine::copy(dst, engine::make_view(src, buf.dtype, host, {n}), stream);
      stream.synchronize();
      break;
    case engine::DType::kF64: {
      std::vector<double> h(src, src + n);
      engine::copy(dst, engine::make_view(h.data(), buf.dtype, host, {n}), stream);
      stream.synchronize();
      break;
    }
    case engine::DType::kBF16:
    case engine::DType::kF16: {  // the compute copy of fp16/bf16 runs: rounded from the master
      const bool bf16 = buf.dtype == engine::DType::kBF16;
      std::vector<uint16_t> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        h[static_cast<size_t>(i)] = bf16 ? engine::f32_to_bf16(src[i]) : engine::f32_to_f16(src[i]);
      }
      engine::copy(dst, engine::make_view(h.data(), buf.dtype, host, {n}), stream);
      stream.synchronize();
      break;
    }
    default:
      ANVIL_CHECK_MSG(false, "checkpoint: unsupported parameter dtype " + engine::describe(buf));
  }
}

std::string shape_str(const std::vector<int64_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

CheckpointModel gpt_checkpoint_model(GptModel& model) {
  const GptShard& sh = model.shard();
  CheckpointModel c;
  c.table = &model.params();
  c.buffers = model.flat_buffers();
  c.vocab_size = model.config().loss_vocab();
  c.tp = sh.tp;
  c.tp_rank = sh.tp_rank;
  // The LM head's copy of the tied embedding is the first stage's.
  c.writes = [pre = sh.pre](const Param& p) { return pre || !p.tied; };
  c.zero = model.zero_partition();
  c.loaded = [&model](engine::Stream& s) { model.params_loaded(s); };
  return c;
}

}  // namespace

std::vector<int64_t> logical_shape(const Param& p, int64_t vocab_size, int tp) {
  std::vector<int64_t> s = p.shape;
  if (p.tp_split_dim >= 0) s[static_cast<size_t>(p.tp_split_dim)] *= tp;
  if (p.vocab_rows) s[0] = vocab_size;
  return s;
}

std::vector<engine::HostSlice> checkpoint_slices(const CheckpointModel& model, int dp_rank,
                                                 engine::Stream& stream) {
  const parallel::ZeroPartition* part = model.zero;
  const ParamTable& table = *model.table;
  const FlatBuffers& fb = model.buffers;
  const int tp = model.tp, tp_rank = model.tp_rank;
  const std::pair<const char*, engine::TensorView> states[] = {
      {kMasterState, fb.master}, {kExpAvgState, fb.m}, {kExpAvgSqState, fb.v}};
  std::vector<engine::HostSlice> out;
  if (!part && dp_rank != 0) return out;  // DP replicas: DP rank 0 writes
  for (const Param& p : table.all()) {
    if (tp > 1 && p.tp_split_dim < 0 && tp_rank != 0) continue;  // TP replica
    if (model.writes && !model.writes(p)) continue;              // another stage's copy
    const std::vector<int64_t> shape = logical_shape(p, model.vocab_size, tp);
    const int64_t C = cols_of(p);
    for (const auto& [prefix, buf] : states) {
      const Held h =
          held(buf, table.flat_numel(), part, p.offset, p.offset + p.numel(), /*own_only=*/true);
      if (h.hi <= h.lo) continue;
      const std::vector<float> host = download(buf, h.at, h.hi - h.lo, stream);
      const int64_t base = h.lo - p.offset;  // local flat index of host[0]
      for (const Box& b : boxes_of(p, base, h.hi - p.offset, tp, tp_rank, shape[0])) {
        engine::HostSlice s;
        s.tensor = absl::StrCat(prefix, p.name);
        s.shape = shape;
        if (shape.size() == 2) {
          s.offset = {b.grow, b.gcol};
          s.extent = {b.rows, b.cols};
        } else {
          s.offset = {b.grow};
          s.extent = {b.rows};
        }
        s.data.reserve(static_cast<size_t>(b.rows * b.cols));
        for (int64_t r = 0; r < b.rows; ++r) {
          const float* row = host.data() + (b.lrow + r) * C + b.lcol - base;
          s.data.insert(s.data.end(), row, row + b.cols);
        }
        out.push_back(std::move(s));
      }
    }
  }
  return out;
}

absl::Status load_checkpoint_tensors(const CheckpointModel& model, const TensorLookup& lookup,
                                     bool weights_only, engine::Stream& stream) {
  const parallel::ZeroPartition* part = model.zero;
  const ParamTable& table = *model.table;
  const FlatBuffers& fb = model.buffers;
  std::vector<std::pair<const char*, std::vector<engine::TensorView>>> states = {
      {kMasterState, {fb.value}}};
  if (fb.master.data != fb.value.data) states[0].second.push_back(fb.master);
  if (!weights_only) {
    states.push_back({kExpAvgState, {fb.m}});
    states.push_back({kExpAvgSqState, {fb.v}});
  }
  for (const Param& p : table.all()) {
    const std::vector<int64_t> shape = logical_shape(p, model.vocab_size, model.tp);
    const int64_t C = shape.size() == 2 ? shape[1] : 1;  // of the whole tensor
    // Source element of each local element in the whole tensor; -1: a padding row (0).
    std::vector<int64_t> src(static_cast<size_t>(p.numel()));
    for (int64_t i = 0; i < p.numel(); ++i) {
      const int64_t g = tp_global_index(p, i, model.tp, model.tp_rank);
      src[static_cast<size_t>(i)] = g / C < shape[0] ? g : -1;
    }
    for (const auto& [prefix, bufs] : states) {
      const std::string name = absl::StrCat(prefix, p.name);
      ANVIL_ASSIGN_OR_RETURN(engine::HostSlice t, lookup(name));
      if (t.shape != shape) {
        return absl::InvalidArgumentError(absl::StrCat("checkpoint tensor ", name, " has shape ",
                                                       shape_str(t.shape), ", the model needs ",
                                                       shape_str(shape)));
      }
      std::vector<float> h(src.size());
      for (size_t i = 0; i < src.size(); ++i) {
        h[i] = src[i] < 0 ? 0.0f : t.data[static_cast<size_t>(src[i])];
      }
      for (engine::TensorView buf : bufs) {
        const Held at =
            held(buf, table.flat_numel(), part, p.offset, p.offset + p.numel(), /*own_only=*/false);
        if (at.hi <= at.lo) continue;
        upload(buf, at.at, h.data() + (at.lo - p.offset), at.hi - at.lo, stream);
      }
    }
  }
  if (model.loaded) model.loaded(stream);
  stream.synchronize();
  return absl::OkStatus();
}

std::vector<engine::HostSlice> gpt_checkpoint_slices(GptModel& model, int dp_rank,
                                                     engine::Stream& stream) {
  return checkpoint_slices(gpt_checkpoint_model(model), dp_rank, stream);
}

absl::Status gpt_load_checkpoint(GptModel& model, const TensorLookup& lookup, bool weights_only,
                                 engine::Stream& stream) {
  return load_checkpoint_tensors(gpt_checkpoint_model(model), lookup, weights_only, stream);
}

std::map<std::string, int64_t> checkpoint_counters(const TrainerState& s, const TrainConfig& cfg) {
  return {{"step", s.step},
          {"optimizer_steps", s.optimizer_steps},
          {"micro_batches", static_cast<int64_t>(s.micro_batches)},
          {"consumed_samples", s.consumed_samples},
          {"consumed_valid_samples", s.consumed_valid_samples},
          {"consumed_tokens", s.consumed_tokens},
          {"lr_samples", s.lr.samples},
          {"lr_tokens", s.lr.tokens},
          {"lr_warmup_tokens", s.lr.warmup_tokens},
          {"train_samples", cfg.train.run_samples()},
          {"seed", static_cast<int64_t>(cfg.train.seed)},
          {"data_seed", static_cast<int64_t>(cfg.data.seed)}};
}

std::string batch_change_note(const TrainerState& s, const TrainConfig& cfg) {
  const LoopConfig& l = cfg.train;
  const int64_t want = samples_after_steps(l.rampup, l.global_batch, s.step);
  if (s.consumed_samples == want) return "";
  return absl::StrCat("the checkpoint consumed ", s.consumed_samples, " samples in ", s.step,
                      " steps, where [train] global_batch ", l.global_batch,
                      " and rampup_batch_size give ", want,
                      ": the batch size changed; training continues from sample ",
                      s.consumed_samples, " with this run's batch sizes (as Megatron-DeepSpeed)");
}

int64_t resumed_run_samples(const TrainerState& s, const TrainConfig& cfg) {
  return s.consumed_samples +
         std::max<int64_t>(0, cfg.train.steps - s.step) * cfg.train.global_batch;
}

absl::StatusOr<TrainerState> trainer_state_from(const std::map<std::string, int64_t>& counters,
                                                const TrainConfig& cfg) {
  auto get = [&](const char* key) -> absl::StatusOr<int64_t> {
    auto it = counters.find(key);
    if (it == counters.end()) {
      return absl::InvalidArgumentError(absl::StrCat("checkpoint: no counter \"", key, "\""));
    }
    return it->second;
  };
  TrainerState s;
  ANVIL_ASSIGN_OR_RETURN(s.step, get("step"));
  ANVIL_ASSIGN_OR_RETURN(s.optimizer_steps, get("optimizer_steps"));
  ANVIL_ASSIGN_OR_RETURN(int64_t micro, get("micro_batches"));
  s.micro_batches = static_cast<uint64_t>(micro);
  ANVIL_ASSIGN_OR_RETURN(s.consumed_samples, get("consumed_samples"));
  ANVIL_ASSIGN_OR_RETURN(int64_t seed, get("seed"));
  ANVIL_ASSIGN_OR_RETURN(int64_t data_seed, get("data_seed"));
  const LoopConfig& l = cfg.train;
  if (s.consumed_samples < 0 || s.consumed_samples > engine::kMaxSamples) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: consumed_samples ", s.consumed_samples, " outside [0, 2^40]"));
  }
  // Checkpoints from before these counters: Megatron's fallbacks (training.py
  // build_train_valid_test_data_iterators) and the schedule of the applied steps.
  auto get_or = [&](const char* key, int64_t fallback) {
    auto it = counters.find(key);
    return it == counters.end() ? fallback : it->second;
  };
  const int64_t evals = l.eval_interval > 0 ? s.step / l.eval_interval : 0;
  s.consumed_valid_samples =
      get_or("consumed_valid_samples", evals * l.eval_iters * l.global_batch);
  s.consumed_tokens = get_or("consumed_tokens", s.consumed_samples * cfg.data.seq_len);
  s.lr.samples = get_or("lr_samples", s.optimizer_steps * l.global_batch);
  s.lr.tokens = get_or("lr_tokens", 0);
  s.lr.warmup_tokens = get_or("lr_warmup_tokens", 0);
  if (seed != static_cast<int64_t>(cfg.train.seed) ||
      data_seed != static_cast<int64_t>(cfg.data.seed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint: saved with [train] seed ", seed, " and [data] seed ", data_seed,
                     ", the config has ", cfg.train.seed, " and ", cfg.data.seed,
                     ": resuming needs the same seeds (or [checkpoint] finetune = true)"));
  }
  return s;
}

std::map<std::string, int64_t> checkpoint_layout(const TrainConfig& cfg) {
  const parallel::ParallelConfig& p = cfg.parallel;
  std::map<std::string, int64_t> out = {{"tp", p.tp},
                                        {"pp", p.pp},
                                        {"dp", p.dp},
                                        {"zero_stage", p.zero_stage},
                                        {"virtual_stages", p.virtual_stages},
                                        {"sequence_parallel", p.sequence_parallel ? 1 : 0}};
  family_of(cfg).layout_record(cfg, out);  // T5: pp_split_rank
  return out;
}

std::map<std::string, double> checkpoint_lr_schedule(const TrainConfig& cfg,
                                                     const TrainerState& state) {
  const LrSchedule& s = state.schedule ? *state.schedule : cfg.optim.schedule;
  LrScheduler scheduler(s, cfg.train.global_batch);
  scheduler.restore(state.lr);
  return {{"lr", s.lr},
          {"min_lr", s.min_lr},
          {"warmup_samples", s.warmup_in_samples(cfg.train.global_batch)},
          {"decay_samples", static_cast<double>(s.decay_in_samples(cfg.train.global_batch))},
          {"decay_tokens", static_cast<double>(s.decay_tokens)},
          {"decay_style", static_cast<double>(s.style)},
          {"current_lr", scheduler.lr()}};
}

absl::StatusOr<std::optional<LrSchedule>> resume_lr_schedule(
    const std::map<std::string, double>& saved, const TrainConfig& cfg, const std::string& where,
    std::string* note) {
  const std::map<std::string, double> mine = checkpoint_lr_schedule(cfg, TrainerState{});
  auto describe = [](const std::string& key, double v) {
    if (key != "decay_style") return absl::StrFormat("%.17g", v);
    return std::string(decay_style_name(static_cast<DecayStyle>(static_cast<int>(v))));
  };
  std::vector<std::string> differ;
  for (const char* key :
       {"lr", "min_lr", "warmup_samples", "decay_samples", "decay_tokens", "decay_style"}) {
    auto it = saved.find(key);
    if (it == saved.end()) continue;  // older checkpoints lack decay_style
    if (it->second != mine.at(key)) {
      differ.push_back(absl::StrCat(key, ": checkpoint ", describe(key, it->second), ", config ",
                                    describe(key, mine.at(key))));
    }
  }
  note->clear();
  if (differ.empty()) return std::optional<LrSchedule>();
  const std::string list = absl::StrJoin(differ, "; ");
  const CheckpointConfig& k = cfg.checkpoint;
  if (k.override_lr_scheduler) {
    *note = absl::StrCat("[checkpoint] override_lr_scheduler: the config's lr schedule replaces ",
                         where, "'s (", list, ")");
    return std::optional<LrSchedule>();
  }
  if (!k.use_checkpoint_lr_scheduler) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " was trained with another lr schedule (", list,
                     "): set [checkpoint] override_lr_scheduler = true to use the config's, or "
                     "use_checkpoint_lr_scheduler = true to keep the checkpoint's"));
  }
  // The checkpoint's schedule, in samples (its W and D are stored converted).
  LrSchedule s = cfg.optim.schedule;
  s.lr = saved.at("lr");
  s.min_lr = saved.at("min_lr");
  s.warmup_steps = s.decay_steps = 0;
  s.warmup_fraction = 0.0;
  const double warmup = saved.at("warmup_samples");
  s.decay_samples = static_cast<int64_t>(saved.at("decay_samples"));
  if (warmup != std::floor(warmup)) {
    s.warmup_fraction = warmup / static_cast<double>(s.decay_samples);
  } else {
    s.warmup_samples = static_cast<int64_t>(warmup);
  }
  s.decay_tokens = static_cast<int64_t>(saved.at("decay_tokens"));
  if (auto it = saved.find("decay_style"); it != saved.end()) {
    s.style = static_cast<DecayStyle>(static_cast<int>(it->second));
  }
  *note = absl::StrCat("[checkpoint] use_checkpoint_lr_scheduler: keeping ", where,
                       "'s lr schedule (", list, ")");
  return std::optional<LrSchedule>(s);
}

}  // namespace anvil::model
