// Parity with Hugging Face T5ForConditionalGeneration (run by scripts/gpu/t5_parity.sh): with
// ANVIL_T5_PARITY_DIR set to a directory written by tests/parity/hf_t5_parity.py (HF's
// save_pretrained layout plus batch.safetensors), loads HF's weights through the converter's
// import path (io/hf_dir.h, model/t5/hf_t5.cc, model/t5/t5_checkpoint.h) and the batch into
// T5Model and compares the mean token loss and the gradient norm with HF's (computed in float64 on
// the CPU; HF's norms and softmax run in f32 even then):
//   CPU f64: within 1e-5 relative;  CPU f32: within 1e-4;  CUDA bf16 (when a GPU is present):
//   loss within 2% + 0.02, gradient norm within 5%.
// Skips when the variable is unset (CI has no torch).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "io/hf_dir.h"
#include "io/safetensors.h"
#include "model/checkpoint_hf.h"
#include "model/t5/t5.h"
#include "model/t5/t5_checkpoint.h"
#include "nlohmann/json.hpp"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

struct Reference {
  T5Config cfg;
  T5RunShape shape{0, 0, 0};
  double loss = 0, grad_norm = 0;
  std::vector<int32_t> enc, dec, labels, lengths;
};

std::vector<int32_t> read_i32(const io::SafetensorsFile& f, const std::string& name) {
  auto bytes = f.read_bytes(name);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  std::vector<int32_t> v(bytes->size() / sizeof(int32_t));
  std::memcpy(v.data(), bytes->data(), v.size() * sizeof(int32_t));
  return v;
}

Reference load_reference(const std::string& dir) {
  Reference r;
  auto batch = io::SafetensorsFile::open(dir + "/batch.safetensors");
  EXPECT_TRUE(batch.ok()) << batch.status();
  const nlohmann::json c = nlohmann::json::parse(batch->metadata().at("config"));
  r.cfg.version = c.at("version") == "1.1" ? T5Version::kV1_1 : T5Version::kV1_0;
  r.cfg.vocab_size = c.at("vocab_size");
  r.cfg.d_model = c.at("d_model");
  r.cfg.d_kv = c.at("d_kv");
  r.cfg.n_heads = c.at("n_heads");
  r.cfg.d_ff = c.at("d_ff");
  r.cfg.n_encoder_layers = c.at("n_encoder_layers");
  r.cfg.n_decoder_layers = c.at("n_decoder_layers");
  r.cfg.num_buckets = c.at("num_buckets");
  r.cfg.max_distance = c.at("max_distance");
  r.cfg.dropout = 0.0f;
  r.shape = {c.at("micro_batch"), c.at("enc_len"), c.at("dec_len")};
  r.loss = std::stod(batch->metadata().at("hf_loss"));
  r.grad_norm = std::stod(batch->metadata().at("hf_grad_norm"));
  r.enc = read_i32(*batch, "enc_tokens");
  r.dec = read_i32(*batch, "dec_tokens");
  r.labels = read_i32(*batch, "labels");
  r.lengths = read_i32(*batch, "enc_lengths");
  return r;
}

// anvil's {loss, grad norm} on the reference batch with HF's weights.
std::pair<double, double> run(const Reference& r, const std::string& dir, Device dev, DType act) {
  std::unique_ptr<engine::Stream> s;
  if (dev == Device::kCuda) {
    auto st = engine::Stream::cuda(0);
    EXPECT_TRUE(st.ok()) << st.status();
    s = std::make_unique<engine::Stream>(std::move(st).value());
  } else {
    s = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  const DType grad = dev == Device::kCuda ? DType::kF32 : act;
  auto m = T5Model::create(r.cfg, r.shape, {dev, act, grad}, 1);
  EXPECT_TRUE(m.ok()) << m.status();
  // HF's directory through bin/convert's import path: its tensors, the T5 family's names.
  auto hf = io::read_hf_tensors(dir);
  EXPECT_TRUE(hf.ok()) << hf.status();
  const HfFamily& f = r.cfg.tied() ? t5_v10_hf_family() : t5_v11_hf_family();
  auto tensors = from_hf_tensors(f, std::move(*hf), {r.cfg.n_heads}, r.cfg.tied());
  EXPECT_TRUE(tensors.ok()) << tensors.status();
  std::map<std::string, engine::HostSlice> by_name;
  for (engine::HostSlice& t : *tensors) by_name[kMasterState + t.tensor] = std::move(t);
  const absl::Status loaded = t5_load_checkpoint(
      **m,
      [&](const std::string& name) -> absl::StatusOr<engine::HostSlice> {
        auto it = by_name.find(name);
        if (it == by_name.end()) return absl::NotFoundError(name);
        return it->second;
      },
      /*weights_only=*/true, *s);
  EXPECT_TRUE(loaded.ok()) << loaded;
  const T5Batch b{r.enc.data(), r.dec.data(), r.labels.data(), r.lengths.data()};
  double counted = 0;
  for (int32_t t : r.labels) counted += t >= 0;
  (*m)->zero_grads(*s);
  (*m)->forward(b, true, 0, *s);
  const double loss = (*m)->loss_sum(*s) / counted;
  (*m)->backward(static_cast<float>(1.0 / counted), *s);
  return {loss, (*m)->grad_norm(*s)};
}

TEST(T5Parity, MatchesHuggingFace) {
  const char* dir = std::getenv("ANVIL_T5_PARITY_DIR");
  if (dir == nullptr) GTEST_SKIP() << "ANVIL_T5_PARITY_DIR not set (scripts/gpu/t5_parity.sh)";
  const Reference r = load_reference(dir);
  ASSERT_GT(r.loss, 0.0);
  for (const auto& [act, tol] :
       {std::pair<DType, double>{DType::kF64, 1e-5}, {DType::kF32, 1e-4}}) {
    const auto [loss, norm] = run(r, dir, Device::kCpu, act);
    std::printf("anvil cpu %s: loss %.8f (HF %.8f), grad norm %.8f (HF %.8f)\n",
                std::string(engine::dtype_name(act)).c_str(), loss, r.loss, norm, r.grad_norm);
    EXPECT_NEAR(loss, r.loss, tol * r.loss);
    EXPECT_NEAR(norm, r.grad_norm, tol * r.grad_norm);
  }
  if (!testing::gpu_available()) return;
  const auto [loss, norm] = run(r, dir, Device::kCuda, DType::kBF16);
  std::printf("anvil cuda bf16: loss %.6f (HF %.6f), grad norm %.6f (HF %.6f)\n", loss, r.loss,
              norm, r.grad_norm);
  EXPECT_NEAR(loss, r.loss, 0.02 + 0.02 * r.loss);
  EXPECT_NEAR(norm, r.grad_norm, 0.05 * r.grad_norm);
}

}  // namespace
}  // namespace anvil::model
