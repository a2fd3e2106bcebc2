// Arena carving, exhaustion errors, views, and the memory plan arithmetic.
#include "engine/arena.h"

#include "engine/memory.h"
#include "engine/stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::engine {
namespace {

using ::testing::HasSubstr;

TEST(ArenaTest, CarvesAlignedViewsAndReportsExhaustion) {
  auto arena = Arena::create(Device::kCpu, 1000, "test");
  ASSERT_TRUE(arena.ok());
  auto a = arena->allocate(DType::kF32, {3, 5}, "a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->numel(), 15);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % kArenaAlignment, 0u);
  auto b = arena->allocate(DType::kBF16, {7}, "b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(static_cast<char*>(b->data) - static_cast<char*>(a->data), 256);
  const size_t mark = arena->mark();
  auto c = arena->allocate(DType::kF64, {1000}, "big thing");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("big thing"));
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("'test'"));
  arena->reset(mark);
  EXPECT_EQ(arena->used(), mark);
}

TEST(ArenaTest, PlanMatchesArenaBytes) {
  MemoryPlan plan;
  plan.add("params", "w", arena_bytes(DType::kBF16, {768, 3072}));
  plan.add("grads", "w", arena_bytes(DType::kF32, {768, 3072}));
  plan.add("params", "b", arena_bytes(DType::kBF16, {3}));
  EXPECT_EQ(plan.category_bytes("params"), 768u * 3072 * 2 + 256);
  EXPECT_EQ(plan.total_bytes(), 768u * 3072 * 6 + 256);
  EXPECT_EQ(plan.categories(), (std::vector<std::string>{"params", "grads"}));
  EXPECT_THAT(plan.format(), HasSubstr("total"));
}

// Sizes that do not fit size_t saturate at SIZE_MAX instead of wrapping to a small plan.
TEST(ArenaTest, PlanBytesSaturateInsteadOfWrapping) {
  EXPECT_EQ(arena_bytes(DType::kF32, {int64_t{1} << 40, int64_t{1} << 30}), SIZE_MAX);
  MemoryPlan plan;
  plan.add("params", "a", SIZE_MAX - 10);
  plan.add("activations", "b", 100);
  plan.add("activations", "c", SIZE_MAX / 2 + 1);
  plan.add("activations", "d", SIZE_MAX / 2 + 1);
  EXPECT_EQ(plan.total_bytes(), SIZE_MAX);
  EXPECT_EQ(plan.category_bytes("activations"), SIZE_MAX);
  EXPECT_EQ(plan.category_bytes("params"), SIZE_MAX - 10);
}

TEST(ArenaTest, ParsesMemAvailable) {
  EXPECT_EQ(parse_mem_available("MemTotal:       32768000 kB\n"
                                "MemFree:         1000000 kB\n"
                                "MemAvailable:   24000000 kB\n"
                                "Buffers:          100 kB\n"),
            std::optional<size_t>(size_t{24000000} * 1024));
  EXPECT_EQ(parse_mem_available("MemTotal: 1 kB\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: lots\n"), std::nullopt);
  EXPECT_EQ(parse_mem_available("MemAvailable: 12 MB\n"), std::nullopt);
  // This machine's /proc/meminfo (Linux): some memory is available.
  const std::optional<size_t> here = host_memory_available();
  ASSERT_TRUE(here.has_value());
  EXPECT_GT(*here, 0u);
}

TEST(TensorViewTest, ReshapeSliceDescribe) {
  std::vector<float> buf(24);
  TensorView v = make_view(buf.data(), DType::kF32, Device::kCpu, {4, 6});
  EXPECT_TRUE(v.is_contiguous());
  TensorView r = reshape(v, {2, 3, 4});
  EXPECT_EQ(r.dim(-1), 4);
  TensorView s = slice_rows(v, 1, 3);
  EXPECT_EQ(s.as<float>(), buf.data() + 6);
  EXPECT_EQ(s.numel(), 12);
  EXPECT_EQ(describe(s), "f32[2, 6] cpu");
  ConstTensorView c = s;
  EXPECT_EQ(c.data, s.data);
}

TEST(MemoryTest, CopyFillPoisonOnCpu) {
  Stream s = Stream::cpu();
  std::vector<float> a = {1, 2, 3}, b(3);
  copy(make_view(b.data(), DType::kF32, Device::kCpu, {3}),
       make_view(static_cast<const void*>(a.data()), DType::kF32, Device::kCpu, {3}), s);
  EXPECT_EQ(b, a);
  poison(make_view(b.data(), DType::kF32, Device::kCpu, {3}), s);
  EXPECT_TRUE(std::isnan(b[1]));
  fill_zero(make_view(b.data(), DType::kF32, Device::kCpu, {3}), s);
  EXPECT_EQ(b[2], 0.0f);
}

TEST(MemoryTest, HostDeviceRoundTripOnGpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  testing::TensorPool pool(Device::kCuda);
  testing::TestStream ts(Device::kCuda);
  const std::vector<float> v = testing::random_uniform(1000, 1);
  TensorView d = pool.from(v, DType::kF32, {1000});
  TensorView d2 = pool.empty(DType::kF32, {1000});
  copy(d2, d, ts.get());
  ts.get().synchronize();
  EXPECT_EQ(testing::to_host(d2), v);
  auto big = Arena::create(Device::kCuda, size_t{1} << 50, "absurd");
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(std::string(big.status().message()), HasSubstr("GiB free"));
}

}  // namespace
}  // namespace anvil::engine
