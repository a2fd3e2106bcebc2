// io/torch_pt: .pt files torch 1.13 wrote (tests/io/fixtures/megatron_ds, made by
// scripts/make_megatron_ds_fixture.py) read without torch, written back and read again, and
// the refusals: a truncated zip, protocol-4 opcodes, a global outside the whitelist, a storage
// type outside the subset, a non-float tensor read as weights.
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "io/torch_pt/pickle.h"
#include "io/torch_pt/pt_file.h"

namespace anvil::io::torch_pt {
namespace {

constexpr char kDir[] = "tests/io/fixtures/megatron_ds/";

std::vector<float> expected_t() {  // arange(6) * 0.5 - 1
  std::vector<float> v;
  for (int i = 0; i < 6; ++i) v.push_back(i * 0.5f - 1);
  return v;
}

void check_basic(const PtFile& f) {
  const ValuePtr& r = f.root();
  ASSERT_EQ(r->kind, Value::Kind::kDict);
  ValuePtr t = r->get("t");
  ASSERT_TRUE(t && t->kind == Value::Kind::kTensor);
  EXPECT_EQ(t->tensor.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t->tensor.stride, (std::vector<int64_t>{3, 1}));
  auto tv = f.read_f32(t->tensor, "t");
  ASSERT_TRUE(tv.ok()) << tv.status();
  EXPECT_EQ(*tv, expected_t());
  // A view into the same storage: offset 3, shape [3].
  ValuePtr row = r->get("row1");
  ASSERT_TRUE(row && row->kind == Value::Kind::kTensor);
  EXPECT_EQ(row->tensor.offset, 3);
  EXPECT_EQ(row->tensor.key, t->tensor.key);
  auto rv = f.read_f32(row->tensor, "row1");
  ASSERT_TRUE(rv.ok()) << rv.status();
  const std::vector<float> all = expected_t();
  EXPECT_EQ(*rv, std::vector<float>(all.begin() + 3, all.end()));
  for (const char* k : {"half", "bf16"}) {  // all values are exact in both formats
    ValuePtr h = r->get(k);
    ASSERT_TRUE(h && h->kind == Value::Kind::kTensor) << k;
    EXPECT_EQ(h->tensor.dtype, std::string(k) == "half" ? DType::kF16 : DType::kBF16);
    auto hv = f.read_f32(h->tensor, k);
    ASSERT_TRUE(hv.ok()) << hv.status();
    EXPECT_EQ(*hv, expected_t()) << k;
  }
  ValuePtr l = r->get("long");
  ASSERT_TRUE(l && l->kind == Value::Kind::kTensor);
  EXPECT_EQ(l->tensor.dtype, DType::kI64);
  auto lb = f.storage_bytes(l->tensor);
  ASSERT_TRUE(lb.ok());
  ASSERT_EQ(lb->size(), 32u);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(lb->data())[3], 3);
  auto bad = f.read_f32(l->tensor, "long");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "long is a int64 tensor")) << bad.status();

  ValuePtr od = r->get("od");
  ASSERT_TRUE(od && od->kind == Value::Kind::kDict);
  EXPECT_TRUE(od->ordered);
  ASSERT_TRUE(od->get("n"));
  EXPECT_EQ(od->get("n")->i, 3);
  ValuePtr args = r->get("args");
  ASSERT_TRUE(args && args->kind == Value::Kind::kObject);
  EXPECT_EQ(args->s, "argparse.Namespace");
  ASSERT_TRUE(args->attr("hidden_size"));
  EXPECT_EQ(args->attr("hidden_size")->i, 16);
  ASSERT_TRUE(args->attr("params_dtype"));
  EXPECT_EQ(args->attr("params_dtype")->s, "torch.float16");
  ValuePtr pe = args->attr("position_embedding_type");
  ASSERT_TRUE(pe && pe->kind == Value::Kind::kObject);
  // Python >= 3.8 pickles an enum member as getattr(class, name).
  EXPECT_EQ(pe->s, "__builtin__.getattr");
  ASSERT_EQ(pe->items.size(), 2u);
  EXPECT_EQ(pe->items[0]->s, "megatron.enums.PositionEmbeddingType");
  EXPECT_EQ(pe->items[1]->s, "alibi");
  EXPECT_EQ(args->attr("lr")->f, 6e-4);
  EXPECT_EQ(args->attr("rampup_batch_size")->kind, Value::Kind::kNone);
  EXPECT_EQ(args->attr("data_path")->items.size(), 2u);
  EXPECT_EQ(r->get("size")->s, "torch.Size");
  EXPECT_EQ(r->get("size")->items[0]->items[1]->i, 3);
  EXPECT_EQ(r->get("big")->i, int64_t{1} << 40);
  EXPECT_EQ(r->get("neg")->i, -5);
  EXPECT_EQ(r->get("f")->f, 0.25);
  EXPECT_EQ(r->get("none")->kind, Value::Kind::kNone);
  EXPECT_TRUE(r->get("yes")->b);
  EXPECT_FALSE(r->get("no")->b);
  ValuePtr n = r->get("nested");
  ASSERT_EQ(n->items.size(), 3u);
  EXPECT_EQ(n->items[1]->kind, Value::Kind::kTuple);
  EXPECT_EQ(n->items[1]->items[1]->s, "x");
  EXPECT_EQ(n->items[2]->items[0]->f, 3.5);
}

TEST(TorchPt, ReadsWhatTorchSaveWrote) {
  auto f = PtFile::open(std::string(kDir) + "basic.pt");
  ASSERT_TRUE(f.ok()) << f.status();
  check_basic(*f);
}

// Rebuilds the tree with this writer's storages and reads it back: the same values.
TEST(TorchPt, WriteThenReadGivesTheSameValues) {
  auto f = PtFile::open(std::string(kDir) + "basic.pt");
  ASSERT_TRUE(f.ok()) << f.status();
  PtWriter w;
  std::map<std::string, std::string> keys;  // torch's storage key -> ours
  std::function<void(const ValuePtr&)> remap = [&](const ValuePtr& v) {
    if (!v) return;
    if (v->kind == Value::Kind::kTensor) {
      auto it = keys.find(v->tensor.key);
      if (it == keys.end()) {
        auto bytes = f->storage_bytes(v->tensor);
        ASSERT_TRUE(bytes.ok());
        TensorRef t = v->tensor;
        ValuePtr n = w.add_tensor(t.dtype, {t.storage_numel}, *bytes);
        it = keys.emplace(t.key, n->tensor.key).first;
      }
      v->tensor.key = it->second;
    }
    for (auto& x : v->items) remap(x);
    for (auto& [k, x] : v->dict) remap(x);
    remap(v->state);
  };
  remap(f->root());
  const std::string out = testing::TempDir() + "/basic_copy.pt";
  ASSERT_TRUE(w.write(out, *f->root()).ok());
  auto g = PtFile::open(out);
  ASSERT_TRUE(g.ok()) << g.status();
  check_basic(*g);
  // Deterministic: writing the same tree again gives the same bytes.
  // (the records' folder is the file's stem: the same name in another directory)
  std::filesystem::create_directories(testing::TempDir() + "/again");
  const std::string out2 = testing::TempDir() + "/again/basic_copy.pt";
  ASSERT_TRUE(w.write(out2, *g->root()).ok());
  auto slurp = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  EXPECT_EQ(slurp(out), slurp(out2));
}

void expect_refused(const std::string& path, const std::string& needle) {
  auto f = PtFile::open(path);
  ASSERT_FALSE(f.ok()) << path;
  EXPECT_TRUE(absl::StrContains(f.status().message(), needle)) << f.status();
  EXPECT_TRUE(absl::StrContains(f.status().message(), path)) << f.status();
}

TEST(TorchPt, RefusesTruncatedZip) {
  std::ifstream in(std::string(kDir) + "basic.pt", std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  const std::string p = testing::TempDir() + "/truncated.pt";
  std::ofstream(p, std::ios::binary).write(bytes.data(), bytes.size() - 40);
  expect_refused(p, "not a readable zip archive");
}

TEST(TorchPt, RefusesOpcodesOutsideTheSubset) {
  // pickle_protocol=4: SHORT_BINUNICODE / FRAME / protocol 4.
  expect_refused(std::string(kDir) + "proto4.pt", "protocol 4");
  auto r = read_pickle(std::string("\x80\x02\x93.", 4), "x.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "opcode 0x93 (STACK_GLOBAL)")) << r.status();
  r = read_pickle(std::string("\x80\x02}q\x00", 5), "x.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "truncated")) << r.status();
  r = read_pickle(std::string("\x80\x02h\x07.", 5), "x.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "memo index 7")) << r.status();
}

TEST(TorchPt, RefusesGlobalsOutsideTheWhitelist) {
  expect_refused(std::string(kDir) + "bad_global.pt", "GLOBAL datetime.date");
  auto r = read_pickle(
      "\x80\x02"
      "cos\nsystem\n.",
      "x.pt");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "GLOBAL os.system")) << r.status();
}

TEST(TorchPt, RefusesStorageTypesOutsideTheSubset) {
  expect_refused(std::string(kDir) + "complex.pt", "torch.ComplexFloatStorage");
}

}  // namespace
}  // namespace anvil::io::torch_pt

namespace anvil::io::torch_pt {
namespace {

// Every file of the fork-layout fixture (ckpt/global_step3, TP2 x PP2 x DP2, ZeRO-1) parses, and
// the records the import needs are where the fork's save code puts them.
TEST(TorchPt, ReadsTheForkLayoutFixture) {
  const std::string d = std::string(kDir) + "ckpt/global_step3/";
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(d)) {
    auto f = PtFile::open(e.path().string());
    ASSERT_TRUE(f.ok()) << f.status();
    ++files;
  }
  EXPECT_EQ(files, 12 + 4 + 8);
  auto mp = PtFile::open(d + "mp_rank_03_model_states.pt");
  ASSERT_TRUE(mp.ok()) << mp.status();
  const ValuePtr& r = mp->root();
  EXPECT_EQ(r->get("iteration")->i, 3);
  EXPECT_EQ(r->get("args")->attr("padded_vocab_size")->i, 128);
  EXPECT_EQ(r->get("args")->attr("consumed_train_samples")->i, 24);
  EXPECT_EQ(r->get("lr_scheduler")->get("num_steps")->i, 24);
  EXPECT_EQ(r->get("checkpoint_info")->get("original_vocab_size")->i, 120);
  ASSERT_EQ(r->get("param_shapes")->items.size(), 3u);
  auto z = PtFile::open(d + "zero_pp_rank_1_mp_rank_03_optim_states.pt");
  ASSERT_TRUE(z.ok()) << z.status();
  ValuePtr o = z->root()->get("optimizer_state_dict");
  ASSERT_TRUE(o);
  ValuePtr fp32 = o->get("single_partition_of_fp32_groups");
  ASSERT_TRUE(fp32 && fp32->items.size() == 3u);
  ValuePtr st = o->get("base_optimizer_state")->get("state")->get_int_key(2);
  ASSERT_TRUE(st && st->get("exp_avg"));
  // The last DP rank's partition: fp32 without the padding, the moments with it.
  const int64_t pad = o->get("group_paddings")->items[2]->i;
  EXPECT_EQ(fp32->items[2]->tensor.numel() + pad, st->get("exp_avg")->tensor.numel());
  EXPECT_EQ(o->get("loss_scaler")->attr("cur_scale")->f, 2048.0);
  ValuePtr maps = o->get("param_slice_mappings");
  ASSERT_TRUE(maps && maps->items.size() == 3u);
  auto layer = PtFile::open(d + "layer_03-model_01-model_states.pt");
  ASSERT_TRUE(layer.ok());
  ValuePtr qkv = layer->root()->get("self_attention.query_key_value.weight");
  ASSERT_TRUE(qkv && qkv->kind == Value::Kind::kTensor);
  EXPECT_EQ(qkv->tensor.dtype, DType::kF16);
  EXPECT_EQ(qkv->tensor.shape, (std::vector<int64_t>{24, 16}));  // [3 h / tp, h]
}

}  // namespace
}  // namespace anvil::io::torch_pt
