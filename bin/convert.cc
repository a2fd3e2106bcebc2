// bin/convert: anvil checkpoints <-> Hugging Face model directories (docs/checkpoints.md).
//   build/bin/convert export CKPT_DIR HF_DIR [STEP]   config.json + model.safetensors (f32)
//   build/bin/convert import HF_DIR CKPT_DIR          CKPT_DIR/step_00000000 (weights only;
//                                                     CKPT_DIR must hold no checkpoint yet;
//                                                     HF_DIR's tokenizer.json and
//                                                     tokenizer_config.json kept with it)
//   build/bin/convert import-megatron DS_DIR CKPT_DIR / export-megatron CKPT_DIR DS_DIR [...]:
//                                                     Megatron-DeepSpeed's DeepSpeed folders
//                                                     (bin/convert_megatron.h)
// export takes the checkpoint `latest` names (or STEP), its master weights, and writes them
// under the HF names of the family its [model] settings make it (GPT2LMHeadModel,
// BloomForCausalLM, LlamaForCausalLM, BertForPreTraining, T5ForConditionalGeneration v1.0 /
// v1.1; no vocabulary padding, except that a checkpoint trained with [model]
// vocab_padding_in_loss keeps its padded rows, config.json vocab_size = the padded size) with a
// config.json from [model]. With a [tokenizer] in the
// checkpoint's config, export also writes the HF tokenizer files from the copy kept with the
// checkpoint (GPT2BPE: vocab.json, merges.txt; HF: tokenizer.json; BertWordPiece*: vocab.txt).
// import reads model.safetensors (or the shards of model.safetensors.index.json) and
// config.json, checks that the tensors are exactly those of the model config.json describes
// (names and shapes), and writes a checkpoint that [checkpoint] load + finetune = true accepts; it
// prints the [model] section to train it with. The name/layout rules are the family tables of
// model/gpt/hf_gpt2.cc, hf_bloom.cc, hf_llama.cc, hf_bert.cc, hf_t5.cc (model/checkpoint_hf.h,
// hf_config.h).
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "bin/convert_megatron.h"
#include "engine/config.h"
#include "engine/status.h"
#include "io/checkpoint.h"
#include "io/durable_file.h"
#include "io/hf_dir.h"
#include "io/json_fields.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"
#include "model/checkpoint_hf.h"
#include "model/hf_config.h"
#include "model/train/checkpoint.h"
#include "model/train/model_tensors.h"
#include "model/train/train_config.h"
#include "nlohmann/json.hpp"

namespace {

using json = nlohmann::json;
namespace model = anvil::model;
namespace io = anvil::io;

constexpr char kUsage[] =
    "usage: convert export CKPT_DIR HF_DIR [STEP]\n"
    "       convert import HF_DIR CKPT_DIR\n"
    "       convert import-megatron DEEPSPEED_DIR CKPT_DIR\n"
    "                               [--vocab-padding-in-loss | --keep-vocab-padding]\n"
    "       convert export-megatron CKPT_DIR DEEPSPEED_DIR [--tp N] [--pp N] [--dp N]\n"
    "                               [--dtype fp16|fp32] [--vocab-divisible-by N]\n";

// Copies attachment tokenizer/<file name of `path`> of checkpoint c to HF_DIR/<as>.
absl::Status copy_attachment(const io::Checkpoint& c, const std::string& path,
                             const std::string& hf_dir, const std::string& as) {
  const std::string name = "tokenizer/" + std::filesystem::path(path).filename().string();
  auto it = c.info().attachments.find(name);
  if (it == c.info().attachments.end()) {
    return absl::NotFoundError(absl::StrCat(c.dir(), ": no ", name, " kept with the checkpoint"));
  }
  ANVIL_ASSIGN_OR_RETURN(std::string bytes, io::read_file(it->second));
  return io::write_file_atomic(hf_dir + "/" + as, bytes);
}

// The HF tokenizer files of the checkpoint's [tokenizer] (kept with it), so that
// AutoTokenizer.from_pretrained(HF_DIR) works: GPT2BPE -> vocab.json + merges.txt, HF ->
// tokenizer.json, BertWordPiece* -> vocab.txt, each with a tokenizer_config.json. Other types:
// a warning.
absl::Status export_tokenizer(const io::Checkpoint& c, const anvil::engine::Config& cfg,
                              const std::string& hf_dir) {
  const std::string type = cfg.get_string("tokenizer", "type");
  if (type.empty()) {
    std::fprintf(stderr,
                 "convert: warning: no [tokenizer] in the checkpoint's config: no "
                 "tokenizer files written\n");
    return absl::OkStatus();
  }
  std::string vocab = cfg.get_string("tokenizer", "vocab_file");
  json tc = {{"model_max_length", cfg.get_int("model", "max_seq_len")}};
  if (type == "GPT2BPE") {
    ANVIL_RETURN_IF_ERROR(copy_attachment(c, vocab, hf_dir, "vocab.json"));
    ANVIL_RETURN_IF_ERROR(
        copy_attachment(c, cfg.get_string("tokenizer", "merge_file"), hf_dir, "merges.txt"));
    // The special tokens' text, from the kept files themselves.
    ANVIL_ASSIGN_OR_RETURN(
        std::unique_ptr<io::Tokenizer> tok,
        io::make_tokenizer({type, hf_dir + "/vocab.json", hf_dir + "/merges.txt"}));
    tc["tokenizer_class"] = "GPT2Tokenizer";
    if (tok->special().eod >= 0) {
      ANVIL_ASSIGN_OR_RETURN(std::string eod, tok->decode({tok->special().eod}));
      tc["bos_token"] = tc["eos_token"] = tc["unk_token"] = eod;
    }
  } else if (type == "HF") {
    // bin/train keeps DIR/tokenizer.json when vocab_file names a directory.
    if (!absl::EndsWith(vocab, ".json")) vocab = "tokenizer.json";
    ANVIL_RETURN_IF_ERROR(copy_attachment(c, vocab, hf_dir, "tokenizer.json"));
    // An import's own tokenizer_config.json (chat template, special tokens) goes back as it was.
    if (c.info().attachments.count("tokenizer/tokenizer_config.json") != 0) {
      return copy_attachment(c, "tokenizer_config.json", hf_dir, "tokenizer_config.json");
    }
    tc["tokenizer_class"] = "PreTrainedTokenizerFast";
  } else if (type == "BertWordPieceLowerCase" || type == "BertWordPieceCase") {
    ANVIL_RETURN_IF_ERROR(copy_attachment(c, vocab, hf_dir, "vocab.txt"));
    tc["tokenizer_class"] = "BertTokenizer";
    tc["do_lower_case"] = type == "BertWordPieceLowerCase";
  } else {
    std::fprintf(stderr, "convert: warning: [tokenizer] type %s: no HF tokenizer files written\n",
                 type.c_str());
    return absl::OkStatus();
  }
  return io::write_file_atomic(hf_dir + "/tokenizer_config.json", tc.dump(2) + "\n");
}

absl::Status export_hf(const std::string& ckpt_dir, const std::string& hf_dir, int64_t step) {
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c,
                         io::open_newest_complete(ckpt_dir, step, [](const std::string& w) {
                           std::fprintf(stderr, "convert: warning: %s\n", w.c_str());
                         }));
  ANVIL_ASSIGN_OR_RETURN(
      anvil::engine::Config cfg,
      anvil::engine::Config::load_string(c.info().config, c.dir() + "/manifest.json (config)",
                                         model::train_config_schema()));
  const anvil::engine::ConfigSchema& schema = model::train_config_schema();
  ANVIL_ASSIGN_OR_RETURN(const model::HfFamily* f, model::hf_family_of(cfg, schema));
  std::vector<anvil::engine::HostSlice> params;
  for (const std::string& name : c.tensor_names()) {
    if (!absl::StartsWith(name, model::kMasterState)) continue;
    ANVIL_ASSIGN_OR_RETURN(anvil::engine::HostSlice t, c.read(name));
    t.tensor = name.substr(std::string(model::kMasterState).size());
    params.push_back(std::move(t));
  }
  ANVIL_ASSIGN_OR_RETURN(
      std::vector<anvil::engine::HostSlice> tensors,
      model::to_hf_tensors(*f, std::move(params),
                           {cfg.get_int("model", "n_heads"), cfg.get_int("model", "n_kv_heads")}));
  std::vector<io::StTensorRef> refs;
  for (const anvil::engine::HostSlice& t : tensors) {
    refs.push_back({t.tensor, io::StDType::kF32, t.shape, t.data.data()});
  }
  std::error_code ec;
  std::filesystem::create_directories(hf_dir, ec);
  if (ec) return absl::DataLossError(absl::StrCat(hf_dir, ": cannot create: ", ec.message()));
  ANVIL_RETURN_IF_ERROR(
      io::write_safetensors(hf_dir + "/model.safetensors", refs, {{"format", "pt"}}).status());
  json j = {{"architectures", {f->architecture}},
            {"model_type", f->model_type},
            {"torch_dtype", "float32"}};
  for (const auto& [key, text] : model::hf_config_fields(*f, cfg, schema)) {
    j[key] = json::parse(text);
  }
  // The causal LMs' document separator; BERT has none (BertConfig's pad_token_id 0 stays), T5
  // keeps HF's own pad 0 / eos 1 / decoder start 0 (its tokenizer has no eod).
  if (f->eod_is_eos) {
    j["bos_token_id"] = j["eos_token_id"] = cfg.get_int("data", "eod_token");
  }
  // Trained with the padded rows in the loss ([model] vocab_padding_in_loss): they are
  // parameters, exported as rows of the embedding, and config.json's vocab_size is the padded
  // size (as BLOOM's 250880), so HF's loss spans the same columns.
  ANVIL_ASSIGN_OR_RETURN(const int64_t padded,
                         model::saved_loss_padding(c.info().model, 1, c.dir()));
  if (padded > 0) j["vocab_size"] = padded;
  ANVIL_RETURN_IF_ERROR(io::write_file_atomic(hf_dir + "/config.json", j.dump(2) + "\n"));
  ANVIL_RETURN_IF_ERROR(export_tokenizer(c, cfg, hf_dir));
  std::printf("exported %zu tensors of %s to %s (%s: config.json, model.safetensors)\n",
              tensors.size(), c.dir().c_str(), hf_dir.c_str(), f->architecture.c_str());
  return absl::OkStatus();
}

// An import is step 0 and would become `latest` over a training run's newer checkpoints (and
// replace a step 0): it goes into a directory without checkpoints only.
absl::Status check_import_target(const std::string& ckpt_dir) {
  const std::vector<int64_t> steps = io::list_checkpoint_steps(ckpt_dir);
  std::error_code ec;
  if (steps.empty() && !std::filesystem::exists(ckpt_dir + "/latest", ec)) {
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> latest = io::read_file(ckpt_dir + "/latest");
  return absl::AlreadyExistsError(absl::StrCat(
      ckpt_dir, " already holds checkpoints (steps ", absl::StrJoin(steps, ", "),
      latest.ok() ? absl::StrCat("; latest ", absl::StripAsciiWhitespace(*latest)) : "",
      "): import into a new or empty directory (the import would be step 0 and become `latest`)"));
}

// An error about the [model] keys an import derived names the config.json fields they came
// from: "[model] d_model ..." gains "(config.json: n_embd = 4611686018427387904 gives [model]
// d_model)", so the user sees which field of their file to fix.
absl::Status name_hf_fields(const absl::Status& st, const model::HfFamily& f,
                            const model::HfJsonFields& fields) {
  if (st.ok()) return st;
  const std::string msg(st.message());
  std::vector<std::string> named;
  for (const model::HfConfigField& k : f.config) {
    auto it = fields.find(k.hf_key);
    if (it != fields.end() && absl::StrContains(msg, "[model] " + k.anvil_key)) {
      named.push_back(absl::StrCat(k.hf_key, " = ", it->second, " gives [model] ", k.anvil_key));
    }
  }
  if (named.empty()) return st;
  return absl::Status(st.code(),
                      absl::StrCat(msg, " (config.json: ", absl::StrJoin(named, "; "), ")"));
}

absl::Status import_hf(const std::string& hf_dir, const std::string& ckpt_dir) {
  ANVIL_RETURN_IF_ERROR(check_import_target(ckpt_dir));
  const std::string cpath = hf_dir + "/config.json";
  ANVIL_ASSIGN_OR_RETURN(std::string text, io::read_file(cpath));
  ANVIL_ASSIGN_OR_RETURN(json j, io::parse_json_text(text, cpath));
  ANVIL_ASSIGN_OR_RETURN(std::string type, io::json_string(j, "model_type", cpath));
  model::HfJsonFields fields;
  for (const auto& [key, value] : j.items()) {
    fields[key] = value.dump();
    if (!value.is_object()) continue;  // members as "key.member" (model/hf_config.h)
    for (const auto& [member, v] : value.items()) fields[key + "." + member] = v.dump();
  }
  ANVIL_ASSIGN_OR_RETURN(const model::HfFamily* f, model::hf_family(type, fields));
  ANVIL_ASSIGN_OR_RETURN(model::HfImportedModel m,
                         model::hf_import_model(*f, fields, model::train_config_schema(), cpath));
  // The model config.json describes, validated (sizes, layer counts) before any tensor is read.
  // What is not the import's is set to pass: the default [data] seq_len may exceed its
  // max_seq_len, and T5 training needs a tokenizer with sentinels (not recorded below).
  std::vector<std::string> pass = {"data.seq_len=1"};
  pass.insert(pass.end(), f->import_overrides.begin(), f->import_overrides.end());
  absl::StatusOr<model::TrainConfig> loaded =
      model::load_train_config_string(m.ini, cpath + " (as [model])", pass);
  ANVIL_RETURN_IF_ERROR(name_hf_fields(loaded.status(), *f, fields));
  model::TrainConfig cfg = *std::move(loaded);
  cfg.tokenizer = {};  // an import has none
  ANVIL_ASSIGN_OR_RETURN(std::vector<anvil::engine::HostSlice> hf, io::read_hf_tensors(hf_dir));
  ANVIL_ASSIGN_OR_RETURN(std::vector<anvil::engine::HostSlice> slices,
                         model::from_hf_tensors(*f, std::move(hf), m.dims, m.tied));
  ANVIL_RETURN_IF_ERROR(model::check_model_tensors(cfg, slices, cpath));
  for (anvil::engine::HostSlice& t : slices) t.tensor = model::kMasterState + t.tensor;
  // The model's tokenizer.json (and tokenizer_config.json: its chat template, special tokens)
  // goes with the checkpoint, named by a [tokenizer] section, so bin/generate and bin/serve
  // need no tokenizer flags. vocab_file is HF_DIR itself (an HF tokenizer directory), so a run
  // trained from the import keeps both files in its checkpoints as bin/train does.
  std::string ini = m.ini;
  io::CheckpointInfo info;
  std::error_code ec;
  if (std::filesystem::is_regular_file(hf_dir + "/tokenizer.json", ec)) {
    const std::string abs = std::filesystem::absolute(hf_dir, ec).lexically_normal().string();
    absl::StrAppend(&ini, "[tokenizer]\ntype = HF\nvocab_file = ", abs, "\n");
    info.attachments["tokenizer/tokenizer.json"] = hf_dir + "/tokenizer.json";
    if (std::filesystem::is_regular_file(hf_dir + "/tokenizer_config.json", ec)) {
      info.attachments["tokenizer/tokenizer_config.json"] = hf_dir + "/tokenizer_config.json";
    }
  }
  info.step = 0;
  info.config = ini;
  info.model = model::checkpoint_model_record(cfg);
  info.state = {{"step", 0}};
  ANVIL_RETURN_IF_ERROR(io::save_checkpoint(ckpt_dir, info, slices, 0));
  std::printf(
      "imported %zu tensors from %s into %s; train from it with [checkpoint] load = %s, "
      "finetune = true and\n%s",
      slices.size(), hf_dir.c_str(), io::checkpoint_step_dir(ckpt_dir, 0).c_str(), ckpt_dir.c_str(),
      ini.c_str());
  return absl::OkStatus();
}

int run(int argc, char** argv) {
  const std::vector<std::string> a(argv + 1, argv + argc);
  absl::Status s;
  int64_t step = -1;
  if (a.size() >= 3 && a.size() <= 4 && a[0] == "export" &&
      (a.size() == 3 || (absl::SimpleAtoi(a[3], &step) && step >= 0))) {
    s = export_hf(a[1], a[2], step);
  } else if ((a.size() == 3 || (a.size() == 4 && (a[3] == "--keep-vocab-padding" ||
                                                  a[3] == "--vocab-padding-in-loss"))) &&
             a[0] == "import-megatron") {  // bin/convert_megatron.h
    using anvil::convert::MegatronPadding;
    s = anvil::convert::import_megatron(a[1], a[2],
                                        a.size() == 3 ? MegatronPadding::kDrop
                                        : a[3] == "--keep-vocab-padding"
                                            ? MegatronPadding::kAsVocab
                                            : MegatronPadding::kPaddingInLoss);
  } else if (a.size() >= 3 && a[0] == "export-megatron") {  // bin/convert_megatron.h
    absl::StatusOr<anvil::convert::MegatronExportOptions> o =
        anvil::convert::parse_megatron_export_options({a.begin() + 3, a.end()});
    s = o.ok() ? anvil::convert::export_megatron(a[1], a[2], *o) : o.status();
  } else if (a.size() == 3 && a[0] == "import") {
    s = import_hf(a[1], a[2]);
  } else {
    std::fputs(kUsage, stderr);
    return 2;
  }
  if (!s.ok()) {
    std::fprintf(stderr, "convert: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
