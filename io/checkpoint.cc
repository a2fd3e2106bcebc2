// Checkpoint directories: atomic multi-rank save, verification and tensor assembly on load
// (see checkpoint.h).
#include "io/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "io/crc32c.h"
#include "io/durable_file.h"
#include "io/json_fields.h"
#include "nlohmann/json.hpp"

namespace anvil::io {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr char kManifest[] = "manifest.json";
constexpr char kFormat[] = "anvil-checkpoint";

std::string rank_name(int rank, const char* ext) {
  return absl::StrFormat("rank_%05d%s", rank, ext);
}

// Elements of `shape`; -1 for a negative dimension or more than engine::kMaxElements (a
// corrupt manifest must not wrap around int64 into a small count).
int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    const std::optional<int64_t> p = engine::checked_mul(n, s);
    if (s < 0 || !p || *p > engine::kMaxElements) return -1;
    n = *p;
  }
  return n;
}

std::string crc_hex(uint32_t crc) { return absl::StrFormat("%08x", crc); }

// "step_00000012" -> 12; -1 for anything else (temporary directories included).
int64_t parse_step_dir(const std::string& name) {
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "step_") || rest.size() != 8) return -1;
  int64_t step = 0;
  return absl::SimpleAtoi(rest, &step) && step >= 0 ? step : -1;
}

absl::Status make_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return absl::DataLossError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  return absl::OkStatus();
}

absl::Status remove_all(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) return absl::DataLossError(absl::StrCat(path, ": cannot remove: ", ec.message()));
  return absl::OkStatus();
}

absl::Status prune(const std::string& dir, int64_t keep_last) {
  const std::vector<int64_t> steps = list_checkpoint_steps(dir);
  if (keep_last <= 0 || static_cast<int64_t>(steps.size()) <= keep_last) return absl::OkStatus();
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < steps.size(); ++i) {
    ANVIL_RETURN_IF_ERROR(remove_all(checkpoint_step_dir(dir, steps[i])));
  }
  return fsync_dir(dir);
}

json info_json(const CheckpointInfo& info) {
  json attachments = json::array();
  for (const auto& [name, source] : info.attachments) attachments.push_back(name);
  json j{{"attachments", attachments},
         {"format", kFormat},
         {"version", kCheckpointFormatVersion},
         {"step", info.step},
         {"config", info.config},
         {"state", info.state},
         {"layout", info.layout},
         {"lr_schedule", info.lr_schedule}};
  if (!info.grad_scaler.empty()) j["grad_scaler"] = info.grad_scaler;
  if (!info.model.empty()) j["model"] = info.model;
  return j;
}

absl::StatusOr<CheckpointInfo> parse_info(const json& m, const std::string& where) {
  ANVIL_ASSIGN_OR_RETURN(std::string format, json_string(m, "format", where));
  ANVIL_ASSIGN_OR_RETURN(int64_t version, json_int(m, "version", where));
  if (format != kFormat || version != kCheckpointFormatVersion) {
    return absl::DataLossError(absl::StrCat(where, ": format ", format, " version ", version,
                                            ", expected ", kFormat, " version ",
                                            kCheckpointFormatVersion));
  }
  CheckpointInfo info;
  ANVIL_ASSIGN_OR_RETURN(info.step, json_int(m, "step", where));
  ANVIL_ASSIGN_OR_RETURN(info.config, json_string(m, "config", where));
  for (const char* key : {"state", "layout"}) {
    ANVIL_ASSIGN_OR_RETURN(const json* obj, json_field(m, key, where));
    if (!obj->is_object()) return absl::DataLossError(absl::StrCat(where, ": bad ", key));
    for (const auto& [k, v] : obj->items()) {
      ANVIL_ASSIGN_OR_RETURN(int64_t x, json_int(*obj, k, absl::StrCat(where, ": ", key)));
      (std::string(key) == "state" ? info.state : info.layout)[k] = x;
    }
  }
  ANVIL_ASSIGN_OR_RETURN(const json* lr, json_field(m, "lr_schedule", where));
  if (!lr->is_object()) return absl::DataLossError(absl::StrCat(where, ": bad lr_schedule"));
  for (const auto& [k, v] : lr->items()) {
    ANVIL_ASSIGN_OR_RETURN(info.lr_schedule[k], json_number(*lr, k, where + ": lr_schedule"));
  }
  if (const auto gs = m.find("grad_scaler"); gs != m.end()) {  // optional: fp16 runs only
    if (!gs->is_object()) return absl::DataLossError(absl::StrCat(where, ": bad grad_scaler"));
    for (const auto& [k, v] : gs->items()) {
      ANVIL_ASSIGN_OR_RETURN(info.grad_scaler[k], json_number(*gs, k, where + ": grad_scaler"));
    }
  }
  if (const auto mo = m.find("model"); mo != m.end()) {  // optional: older checkpoints lack it
    if (!mo->is_object()) return absl::DataLossError(absl::StrCat(where, ": bad model"));
    for (const auto& [k, v] : mo->items()) {
      ANVIL_ASSIGN_OR_RETURN(info.model[k], json_string(*mo, k, where + ": model"));
    }
  }
  ANVIL_ASSIGN_OR_RETURN(const json* att, json_field(m, "attachments", where));
  if (!att->is_array()) return absl::DataLossError(absl::StrCat(where, ": bad attachments"));
  for (const json& a : *att) {
    if (!a.is_string()) return absl::DataLossError(absl::StrCat(where, ": bad attachment"));
    info.attachments[a.get<std::string>()] = "";
  }
  return info;
}

}  // namespace

std::string checkpoint_step_dir(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/step_%08d", dir, step);
}

std::string checkpoint_tmp_dir(const std::string& dir, int64_t step, const std::string& token) {
  return absl::StrCat(checkpoint_step_dir(dir, step), ".tmp-", token);
}

std::vector<int64_t> list_checkpoint_steps(const std::string& dir) {
  std::vector<int64_t> steps;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t step = parse_step_dir(it->path().filename().string());
    if (step >= 0 && fs::exists(it->path() / kManifest)) steps.push_back(step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::Status begin_checkpoint(const std::string& dir, int64_t step, const std::string& token) {
  ANVIL_RETURN_IF_ERROR(make_dir(dir));
  const std::string tmp = checkpoint_tmp_dir(dir, step, token);
  ANVIL_RETURN_IF_ERROR(remove_all(tmp));  // a leftover of an earlier attempt
  return make_dir(tmp);
}

namespace {

// What a failed save wrote is removed (best effort: the error that made it fail is the one
// reported), so failed attempts do not pile up temporaries of a whole checkpoint each.
absl::Status discard_on_error(absl::Status s, const std::vector<std::string>& paths) {
  if (!s.ok()) {
    for (const std::string& p : paths) {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  }
  return s;
}

absl::Status write_shard(const std::string& tmp_dir, int rank,
                         const std::vector<engine::HostSlice>& slices) {
  std::vector<StTensorRef> refs;
  json pieces = json::array();
  std::map<std::string, int> count;
  for (const engine::HostSlice& s : slices) {
    if (s.offset.size() != s.shape.size() || s.extent.size() != s.shape.size() ||
        numel(s.shape) < 0 || static_cast<int64_t>(s.data.size()) != numel(s.extent)) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint: slice of ", s.tensor, " has inconsistent dims or data"));
    }
    const std::string key = absl::StrCat(s.tensor, "@", count[s.tensor]++);
    refs.push_back({key, StDType::kF32, s.extent, s.data.data()});
    pieces.push_back(json{{"tensor", s.tensor},
                          {"key", key},
                          {"shape", s.shape},
                          {"offset", s.offset},
                          {"extent", s.extent}});
  }
  const std::string file = rank_name(rank, ".safetensors");
  ANVIL_ASSIGN_OR_RETURN(StWriteResult r,
                         write_safetensors(tmp_dir + "/" + file, refs, {{"format", kFormat}}));
  const json list{
      {"file", file}, {"bytes", r.bytes}, {"crc32c", crc_hex(r.crc32c)}, {"pieces", pieces}};
  ANVIL_ASSIGN_OR_RETURN(DurableWriter w,
                         DurableWriter::create(tmp_dir + "/" + rank_name(rank, ".json")));
  const std::string text = list.dump();
  ANVIL_RETURN_IF_ERROR(w.append(text.data(), text.size()));
  return w.finish();
}

absl::Status finish(const std::string& dir, const std::string& tmp_dir, int world,
                    const CheckpointInfo& info, int64_t keep_last) {
  json manifest = info_json(info);
  json files = json::array();
  json tensors = json::object();
  for (int r = 0; r < world; ++r) {
    const std::string path = tmp_dir + "/" + rank_name(r, ".json");
    ANVIL_ASSIGN_OR_RETURN(std::string text, read_file(path));
    ANVIL_ASSIGN_OR_RETURN(json list, parse_json_text(text, path));
    ANVIL_ASSIGN_OR_RETURN(std::string file, json_string(list, "file", path));
    ANVIL_ASSIGN_OR_RETURN(int64_t bytes, json_int(list, "bytes", path));
    ANVIL_ASSIGN_OR_RETURN(std::string crc, json_string(list, "crc32c", path));
    ANVIL_ASSIGN_OR_RETURN(const json* plist, json_field(list, "pieces", path));
    if (!plist->is_array()) return absl::DataLossError(absl::StrCat(path, ": pieces: not a list"));
    files.push_back(json{{"name", file}, {"bytes", bytes}, {"crc32c", crc}});
    for (const json& p : *plist) {
      ANVIL_ASSIGN_OR_RETURN(std::string tensor_name, json_string(p, "tensor", path));
      ANVIL_ASSIGN_OR_RETURN(std::vector<int64_t> shape, json_int_list(p, "shape", path));
      ANVIL_ASSIGN_OR_RETURN(std::string key, json_string(p, "key", path));
      ANVIL_ASSIGN_OR_RETURN(std::vector<int64_t> offset, json_int_list(p, "offset", path));
      ANVIL_ASSIGN_OR_RETURN(std::vector<int64_t> extent, json_int_list(p, "extent", path));
      json& t = tensors[tensor_name];
      if (t.is_null()) t = json{{"shape", shape}, {"pieces", json::array()}};
      if (t["shape"] != json(shape)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": tensor ", tensor_name, " has shape ", json(shape).dump(),
                         " here and ", t["shape"].dump(), " elsewhere"));
      }
      t["pieces"].push_back(
          json{{"file", file}, {"key", key}, {"offset", offset}, {"extent", extent}});
    }
  }
  for (const auto& [name, source] : info.attachments) {
    const std::string dst = tmp_dir + "/" + name;
    const std::string parent = fs::path(dst).parent_path().string();
    ANVIL_RETURN_IF_ERROR(make_dir(parent));
    ANVIL_ASSIGN_OR_RETURN(std::string bytes, read_file(source));
    ANVIL_ASSIGN_OR_RETURN(DurableWriter w, DurableWriter::create(dst));
    ANVIL_RETURN_IF_ERROR(w.append(bytes.data(), bytes.size()));
    ANVIL_RETURN_IF_ERROR(w.finish());
    ANVIL_RETURN_IF_ERROR(fsync_dir(parent));
    files.push_back(json{{"name", name}, {"bytes", w.bytes()}, {"crc32c", crc_hex(w.crc32c())}});
  }
  manifest["files"] = files;
  manifest["tensors"] = tensors;
  ANVIL_ASSIGN_OR_RETURN(DurableWriter w, DurableWriter::create(tmp_dir + "/" + kManifest));
  const std::string text = manifest.dump(1);
  ANVIL_RETURN_IF_ERROR(w.append(text.data(), text.size()));
  ANVIL_RETURN_IF_ERROR(w.finish());
  for (int r = 0; r < world; ++r) {
    ANVIL_RETURN_IF_ERROR(remove_all(tmp_dir + "/" + rank_name(r, ".json")));
  }
  ANVIL_RETURN_IF_ERROR(fsync_dir(tmp_dir));
  const std::string final_dir = checkpoint_step_dir(dir, info.step);
  ANVIL_RETURN_IF_ERROR(remove_all(final_dir));  // a checkpoint of the same step is replaced
  if (std::rename(tmp_dir.c_str(), final_dir.c_str()) != 0) {
    return absl::DataLossError(absl::StrCat(tmp_dir, ": cannot rename to ", final_dir));
  }
  ANVIL_RETURN_IF_ERROR(fsync_dir(dir));
  ANVIL_RETURN_IF_ERROR(write_file_atomic(dir + "/latest", absl::StrCat(info.step, "\n")));
  return prune(dir, keep_last);
}

}  // namespace

absl::Status write_checkpoint_shard(const std::string& tmp_dir, int rank,
                                    const std::vector<engine::HostSlice>& slices) {
  // Rank 0 made the directory (begin_checkpoint): a failure there ends the save for all ranks.
  return discard_on_error(
      write_shard(tmp_dir, rank, slices),
      rank == 0 ? std::vector<std::string>{tmp_dir}
                : std::vector<std::string>{tmp_dir + "/" + rank_name(rank, ".safetensors"),
                                           tmp_dir + "/" + rank_name(rank, ".json")});
}

absl::Status finish_checkpoint(const std::string& dir, const std::string& tmp_dir, int world,
                               const CheckpointInfo& info, int64_t keep_last) {
  // After the rename the checkpoint is complete and stays, whatever fails later (`latest`).
  return discard_on_error(finish(dir, tmp_dir, world, info, keep_last),
                          {tmp_dir, absl::StrCat(dir, "/latest.tmp-", ::getpid())});
}

absl::Status save_checkpoint(const std::string& dir, const CheckpointInfo& info,
                             const std::vector<engine::HostSlice>& slices, int64_t keep_last) {
  const std::string token = absl::StrCat(::getpid());
  ANVIL_RETURN_IF_ERROR(begin_checkpoint(dir, info.step, token));
  const std::string tmp = checkpoint_tmp_dir(dir, info.step, token);
  ANVIL_RETURN_IF_ERROR(write_checkpoint_shard(tmp, 0, slices));
  return finish_checkpoint(dir, tmp, 1, info, keep_last);
}

absl::StatusOr<Checkpoint> Checkpoint::open(const std::string& step_dir) {
  const std::string mpath = step_dir + "/" + kManifest;
  ANVIL_ASSIGN_OR_RETURN(std::string text, read_file(mpath));
  ANVIL_ASSIGN_OR_RETURN(json m, parse_json_text(text, mpath));
  Checkpoint c;
  c.dir_ = step_dir;
  ANVIL_ASSIGN_OR_RETURN(c.info_, parse_info(m, mpath));
  ANVIL_ASSIGN_OR_RETURN(const json* files, json_field(m, "files", mpath));
  if (!files->is_array()) return absl::DataLossError(absl::StrCat(mpath, ": files: not a list"));
  for (const json& f : *files) {
    ANVIL_ASSIGN_OR_RETURN(std::string name, json_string(f, "name", mpath + ": files"));
    ANVIL_ASSIGN_OR_RETURN(int64_t bytes, json_int(f, "bytes", mpath + ": files"));
    ANVIL_ASSIGN_OR_RETURN(std::string crc, json_string(f, "crc32c", mpath + ": files"));
    const std::string path = step_dir + "/" + name;
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      return absl::DataLossError(absl::StrCat(path, ": missing (listed in ", mpath, ")"));
    }
    const int64_t size = static_cast<int64_t>(fs::file_size(path, ec));
    if (ec || size != bytes) {
      return absl::DataLossError(absl::StrCat(path, ": ", size, " bytes, the manifest says ", bytes,
                                              " (truncated or overwritten)"));
    }
    ANVIL_ASSIGN_OR_RETURN(uint32_t got, crc32c_file(path));
    if (crc_hex(got) != crc) {
      return absl::DataLossError(absl::StrCat(path, ": CRC-32C ", crc_hex(got),
                                              " differs from the manifest's ", crc, " (corrupt)"));
    }
    if (c.info_.attachments.count(name) > 0) {
      c.info_.attachments[name] = path;
      continue;
    }
    ANVIL_ASSIGN_OR_RETURN(SafetensorsFile st, SafetensorsFile::open(path));
    c.files_.emplace(name, std::move(st));
  }
  ANVIL_ASSIGN_OR_RETURN(const json* tensors, json_field(m, "tensors", mpath));
  if (!tensors->is_object()) return absl::DataLossError(mpath + ": tensors: not an object");
  for (const auto& [name, t] : tensors->items()) {
    const std::string where = absl::StrCat(mpath, ": tensor ", name);
    Tensor tensor;
    ANVIL_ASSIGN_OR_RETURN(tensor.shape, json_int_list(t, "shape", where));
    if (numel(tensor.shape) < 0) {
      return absl::DataLossError(absl::StrCat(where, ": shape ", json(tensor.shape).dump(),
                                              " is negative or has more than ",
                                              engine::kMaxElements, " elements"));
    }
    ANVIL_ASSIGN_OR_RETURN(const json* pieces, json_field(t, "pieces", where));
    if (!pieces->is_array()) return absl::DataLossError(where + ": pieces: not a list");
    for (const json& p : *pieces) {
      Piece piece;
      ANVIL_ASSIGN_OR_RETURN(piece.file, json_string(p, "file", where));
      ANVIL_ASSIGN_OR_RETURN(piece.key, json_string(p, "key", where));
      ANVIL_ASSIGN_OR_RETURN(piece.offset, json_int_list(p, "offset", where));
      ANVIL_ASSIGN_OR_RETURN(piece.extent, json_int_list(p, "extent", where));
      auto f = c.files_.find(piece.file);
      if (f == c.files_.end()) {
        return absl::DataLossError(absl::StrCat(where, ": file ", piece.file, " is not listed"));
      }
      ANVIL_ASSIGN_OR_RETURN(StTensorInfo info, f->second.info(piece.key));
      bool ok = info.dtype == StDType::kF32 && info.shape == piece.extent &&
                piece.offset.size() == tensor.shape.size() &&
                piece.extent.size() == tensor.shape.size();
      for (size_t d = 0; ok && d < tensor.shape.size(); ++d) {
        ok = piece.offset[d] >= 0 && piece.extent[d] >= 0 &&
             piece.offset[d] + piece.extent[d] <= tensor.shape[d];
      }
      if (!ok) {
        return absl::DataLossError(absl::StrCat(step_dir, "/", piece.file, ": ", piece.key,
                                                " does not match its manifest entry in ", mpath));
      }
      tensor.pieces.push_back(std::move(piece));
    }
    c.tensors_.emplace(name, std::move(tensor));
  }
  return c;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

absl::StatusOr<std::vector<int64_t>> Checkpoint::shape(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(dir_, ": no tensor ", name));
  }
  return it->second.shape;
}

absl::StatusOr<engine::HostSlice> Checkpoint::read(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return absl::NotFoundError(absl::StrCat(dir_, ": no tensor ", name));
  const Tensor& t = it->second;
  const int64_t n = numel(t.shape);
  std::vector<float> out(static_cast<size_t>(n), 0.0f);
  std::vector<bool> covered(static_cast<size_t>(n), false);
  const size_t nd = t.shape.size();
  for (const Piece& p : t.pieces) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<float> box, files_.at(p.file).read_f32(p.key));
    // Rows of the box along the last dim; the leading dims counted as a mixed-radix index.
    const int64_t row = nd ? p.extent[nd - 1] : 1;
    const int64_t rows = row ? static_cast<int64_t>(box.size()) / row : 0;
    std::vector<int64_t> idx(nd > 0 ? nd - 1 : 0, 0);
    for (int64_t r = 0; r < rows; ++r) {
      int64_t at = 0;
      for (size_t d = 0; d < nd; ++d) {
        at = at * t.shape[d] + p.offset[d] + (d + 1 < nd ? idx[d] : 0);
      }
      for (int64_t j = 0; j < row; ++j) {
        if (covered[static_cast<size_t>(at + j)]) {
          return absl::DataLossError(
              absl::StrCat(dir_, ": tensor ", name, ": pieces overlap (", p.file, " ", p.key, ")"));
        }
        covered[static_cast<size_t>(at + j)] = true;
        out[static_cast<size_t>(at + j)] = box[static_cast<size_t>(r * row + j)];
      }
      for (int64_t d = static_cast<int64_t>(nd) - 2; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < p.extent[static_cast<size_t>(d)]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  }
  if (std::find(covered.begin(), covered.end(), false) != covered.end()) {
    return absl::DataLossError(
        absl::StrCat(dir_, ": tensor ", name, ": the pieces do not cover the whole tensor"));
  }
  return engine::HostSlice{name, t.shape, std::vector<int64_t>(nd, 0), t.shape, std::move(out)};
}

namespace {

// "... are at steps 2, 4, 6" / "there is no complete checkpoint ...": what a user asking for a
// step can pick.
std::string steps_there(const std::string& dir) {
  const std::vector<int64_t> steps = list_checkpoint_steps(dir);
  if (steps.empty()) return absl::StrCat("there is no complete checkpoint in ", dir);
  return absl::StrCat("the complete checkpoints in ", dir, " are at step",
                      steps.size() > 1 ? "s " : " ", absl::StrJoin(steps, ", "));
}

absl::StatusOr<Checkpoint> open_checkpoint_step(const std::string& dir, int64_t step) {
  const std::string step_dir = checkpoint_step_dir(dir, step);
  std::error_code ec;
  if (!fs::exists(step_dir + "/" + kManifest, ec)) {
    // Not NotFound: that means "no checkpoint at all" to callers that then start from scratch.
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " was asked for, but ",
                                                   step_dir, " does not exist or is incomplete; ",
                                                   steps_there(dir)));
  }
  absl::StatusOr<Checkpoint> c = Checkpoint::open(step_dir);
  if (!c.ok()) {
    return absl::DataLossError(absl::StrCat("checkpoint step ", step, " was asked for, but it is ",
                                            "broken: ", c.status().message(), "; ",
                                            steps_there(dir)));
  }
  return c;
}

}  // namespace

absl::StatusOr<Checkpoint> open_newest_complete(
    const std::string& dir, int64_t step, const std::function<void(const std::string&)>& warn) {
  if (step >= 0) return open_checkpoint_step(dir, step);  // exactly what was asked for
  // "latest": the step it names, else (a crash or a broken save) the newest complete one.
  int64_t want = INT64_MAX;
  absl::StatusOr<std::string> latest = read_file(dir + "/latest");
  int64_t s = -1;
  if (latest.ok() && absl::SimpleAtoi(absl::StripAsciiWhitespace(*latest), &s) && s >= 0) {
    want = s;
  } else {
    warn(absl::StrCat(dir,
                      "/latest: missing or not a step number; using the newest complete "
                      "checkpoint in ",
                      dir));
  }
  std::vector<int64_t> candidates;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t s = parse_step_dir(it->path().filename().string());
    if (s >= 0 && s <= want) candidates.push_back(s);
  }
  std::sort(candidates.rbegin(), candidates.rend());
  if (want != INT64_MAX && (candidates.empty() || candidates.front() != want)) {
    warn(absl::StrCat("checkpoint ", checkpoint_step_dir(dir, want), " does not exist"));
  }
  for (int64_t s : candidates) {
    absl::StatusOr<Checkpoint> c = Checkpoint::open(checkpoint_step_dir(dir, s));
    if (c.ok()) {
      if (want != INT64_MAX && s != want) {
        warn(absl::StrCat("using ", c->dir(),
                          " instead, the newest complete checkpoint before "
                          "step ",
                          want));
      }
      return c;
    }
    warn(absl::StrCat("refusing checkpoint ", checkpoint_step_dir(dir, s), ": ",
                      c.status().message()));
  }
  const std::string where = absl::StrCat(
      want == INT64_MAX ? std::string() : absl::StrCat(" <= step ", want), " in ", dir);
  // Checkpoints that all failed to load are an error, not a reason to start from scratch.
  if (!candidates.empty()) {
    return absl::DataLossError(absl::StrCat("no loadable checkpoint", where, " (",
                                            candidates.size(), " refused, see above)"));
  }
  return absl::NotFoundError(absl::StrCat("no checkpoint", where));
}

}  // namespace anvil::io
