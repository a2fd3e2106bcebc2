// BERT against Hugging Face BertForPreTraining (scripts/gpu/bert_parity.sh): with
// ANVIL_BERT_PARITY_DIR set to a directory made by tests/parity/hf_bert_parity.py, loads the HF
// weights (float32, HF names) into a tiny anvil BERT of the same shapes (the vocabulary padded
// from 100 to 128 with zero rows / bias entries), runs HF's batch and compares the masked-LM loss
// (mean over the labelled tokens) and the next-sentence loss (mean over the samples) with HF's:
// on the CPU in f32 within 1e-4 relative, on the GPU (when present) in bf16 within 0.02 + 2%.
// The weights load through bin/convert's HF table (model/bert/hf_bert.cc); the binary loss is
// GptModel::binary_loss_sum over the samples. Skips without the variable.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/device.h"
#include "engine/host_slice.h"
#include "engine/memory.h"
#include "engine/stream.h"
#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "model/checkpoint_hf.h"
#include "model/stack/gpt.h"
#include "ops/cast.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;

constexpr int64_t kVocab = 100, kD = 128, kB = 4, kT = 32;

GptConfig hf_config() {
  GptConfig c;
  testing_parallel::use_hf_bert(c);
  c.vocab_size = kVocab;
  c.max_seq_len = 64;
  c.d_model = kD;
  c.n_heads = 2;
  c.n_layers = 2;
  c.ln_eps = 1e-12f;
  return c;
}

std::vector<int32_t> ints(const io::SafetensorsFile& f, const std::string& name) {
  auto info = f.info(name);
  EXPECT_TRUE(info.ok() && info->dtype == io::StDType::kI32) << name;
  auto bytes = f.read_bytes(name);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  std::vector<int32_t> v(bytes->size() / sizeof(int32_t));
  std::memcpy(v.data(), bytes->data(), bytes->size());
  return v;
}

// Every parameter from the HF file through bin/convert's BertForPreTraining table
// (model/bert/hf_bert.cc: HF names, q/k/v into c_attn), zero padding past the HF vocabulary rows.
void load_hf(GptModel& m, const io::SafetensorsFile& f, engine::Stream& s) {
  std::vector<engine::HostSlice> hf;
  for (const auto& [name, info] : f.tensors()) {
    if (name.rfind("batch.", 0) == 0 || name.rfind("hf.", 0) == 0) continue;
    auto v = f.read_f32(name);
    ASSERT_TRUE(v.ok()) << v.status();
    hf.push_back({name, info.shape, std::vector<int64_t>(info.shape.size(), 0), info.shape, *v});
  }
  auto anvil = from_hf_tensors(bert_hf_family(), std::move(hf), {hf_config().n_heads}, true);
  ASSERT_TRUE(anvil.ok()) << anvil.status();
  ASSERT_EQ(anvil->size(), m.params().all().size());
  for (engine::HostSlice& t : *anvil) {
    const Param* p = m.params().find(t.tensor);
    ASSERT_NE(p, nullptr) << "no anvil parameter " << t.tensor;
    std::vector<float>& v = t.data;
    ASSERT_LE(static_cast<int64_t>(v.size()), p->numel()) << p->name;
    v.resize(static_cast<size_t>(p->numel()), 0.0f);  // padded vocabulary rows
    const engine::ConstTensorView host =
        engine::make_view(v.data(), DType::kF32, Device::kCpu, {p->numel()});
    const engine::TensorView master = flat_slice(p->master, 0, {p->numel()});
    engine::copy(master, host, s);
    if (p->value.data != p->master.data) {
      ops::cast(flat_slice(p->value, 0, {p->numel()}), master, s);
    }
    s.synchronize();
  }
  m.params_loaded(s);
}

struct Losses {
  double mlm, nsp;
};

Losses anvil_losses(Device dev, DType act, const io::SafetensorsFile& f) {
  std::unique_ptr<engine::Stream> s;
  if (dev == Device::kCuda) {
    auto cs = engine::Stream::cuda(0);
    EXPECT_TRUE(cs.ok()) << cs.status();
    s = std::make_unique<engine::Stream>(std::move(cs).value());
  } else {
    s = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  auto m = GptModel::create(hf_config(), {kB, kT}, {dev, act, DType::kF32}, 1);
  EXPECT_TRUE(m.ok()) << m.status();
  load_hf(**m, f, *s);
  const std::vector<int32_t> ids = ints(f, "batch.input_ids"),
                             types = ints(f, "batch.token_type_ids");
  const std::vector<int32_t> mask = ints(f, "batch.attention_mask"),
                             labels = ints(f, "batch.labels");
  const std::vector<int32_t> nsp = ints(f, "batch.next_sentence_label");
  std::vector<int32_t> positions, targets, lengths(kB, 0);
  int64_t counted = 0;
  for (int64_t r = 0; r < kB * kT; ++r) {
    positions.push_back(static_cast<int32_t>(r % kT));
    targets.push_back(labels[static_cast<size_t>(r)] < 0 ? -1 : labels[static_cast<size_t>(r)]);
    counted += targets.back() >= 0;
    lengths[static_cast<size_t>(r / kT)] += mask[static_cast<size_t>(r)];
  }
  GptBatch b{ids.data(), positions.data(), targets.data(), nullptr};
  b.token_types = types.data();
  b.lengths = lengths.data();
  b.binary_labels = nsp.data();
  (*m)->forward(b, /*train=*/false, 0, *s);
  const double total = (*m)->loss_sum(*s), binary = (*m)->binary_loss_sum(0, *s);
  // loss_sum = mlm sum + (counted / B) * binary sum (model/stack/mlm_head.cc).
  return {total / static_cast<double>(counted) - binary / kB, binary / kB};
}

TEST(BertHfParity, LossesEqualHf) {
  const char* dir = std::getenv("ANVIL_BERT_PARITY_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set ANVIL_BERT_PARITY_DIR (scripts/gpu/bert_parity.sh)";
  auto f = io::SafetensorsFile::open(absl::StrCat(dir, "/bert.safetensors"));
  ASSERT_TRUE(f.ok()) << f.status();
  const double hf_mlm = (*f->read_f32("hf.mlm_loss"))[0], hf_nsp = (*f->read_f32("hf.nsp_loss"))[0];
  const Losses cpu = anvil_losses(Device::kCpu, DType::kF32, *f);
  std::printf("HF  : mlm %.6f nsp %.6f\nCPU : mlm %.6f nsp %.6f (f32)\n", hf_mlm, hf_nsp, cpu.mlm,
              cpu.nsp);
  EXPECT_NEAR(cpu.mlm, hf_mlm, 1e-4 * hf_mlm);
  EXPECT_NEAR(cpu.nsp, hf_nsp, 1e-4 * hf_nsp + 1e-6);
  if (engine::cuda_device_count() == 0) return;
  const Losses gpu = anvil_losses(Device::kCuda, DType::kBF16, *f);
  std::printf("CUDA: mlm %.6f nsp %.6f (bf16)\n", gpu.mlm, gpu.nsp);
  EXPECT_NEAR(gpu.mlm, hf_mlm, 0.02 + 0.02 * hf_mlm);
  EXPECT_NEAR(gpu.nsp, hf_nsp, 0.02 + 0.02 * hf_nsp);
}

}  // namespace
}  // namespace anvil::model
