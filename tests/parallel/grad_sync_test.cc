// GradSync (parallel/grad_sync.h) driven as a model would, on 1/2/4 ranks, f64 on the CPU: a toy
// model of four buckets (embeddings, two layers, final) runs two micro-batches whose "backward"
// adds a rank- and micro-batch-dependent gradient into whatever views the component bound; for
// every stage 0-3 the summed gradient's squares, the updated parameters (gather_values) and the
// stage-3 gathered layer values equal the unsharded computation over the gradient summed over
// ranks. Every rank computes the reference itself, without communication.
#include "parallel/grad_sync.h"

#include <mpi.h>

#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "engine/memory.h"
#include "gtest/gtest.h"
#include "tests/parallel/world_comm.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;

// Each a multiple of dp * 64 for dp in {1, 2, 4}; the layers are buckets 1 and 2.
std::vector<SyncBucket> toy_buckets() {
  return {{0, 128, 256, false},
          {256, 512, 768, true},
          {768, 1024, 1024, true},
          {1024, 1024, 1280, false}};
}

double initial(int64_t i) { return std::sin(0.1 * static_cast<double>(i)); }
// Rank r's gradient of element i in micro-batch mb.
double local_grad(int r, int mb, int64_t i) {
  return 0.01 * (r + 1) * (mb + 1) * static_cast<double>(i % 7 + 1);
}

TensorView view(std::vector<double>& v) {
  return engine::make_view(v.data(), DType::kF64, Device::kCpu, {static_cast<int64_t>(v.size())});
}

class GradSyncTest : public ::testing::TestWithParam<int> {};

TEST_P(GradSyncTest, EveryStageEqualsTheUnshardedStep) {
  const int stage = GetParam();
  auto w = testing::world_dp_comm();
  ASSERT_TRUE(w.ok()) << w.status();
  const int world = w->world, rank = w->rank;
  engine::Stream s = engine::Stream::cpu();
  const std::vector<SyncBucket> buckets = toy_buckets();
  const SyncLayout l = sync_layout(buckets, stage, world);
  const int64_t n = l.numel;
  ASSERT_EQ(l.layer_max, 512);
  ASSERT_EQ(l.persist_numel, 512);

  // The buffers a model would carve (f64: master is the compute copy).
  std::map<const char*, std::vector<double>> mem;
  auto take = [&](const char* name, int64_t numel) {
    mem[name].assign(static_cast<size_t>(numel), 0.0);
    return view(mem[name]);
  };
  SyncBuffers b;
  b.value = take("value", stage == 3 ? l.state_numel : n);
  b.master = b.value;
  b.m = take("m", l.state_numel);
  b.v = take("v", l.state_numel);
  if (stage < 2) b.grad = take("grad", n);
  if (stage > 0) b.grad_shard = take("grad_shard", l.state_numel);
  if (stage >= 2) {
    b.persist_grad = take("persist_grad", l.persist_numel);
    b.grad_scratch = take("scratch", l.layer_max);
    b.grad_piece = take("piece", l.layer_max / world);
  }
  if (stage == 3) {
    b.persist_value = take("persist_value", l.persist_numel);
    b.gather = engine::reshape(take("gather", 2 * l.layer_max), {2, l.layer_max});
  }
  // Initial values at their flat positions (stage 3: this rank's pieces at shard offsets).
  std::vector<double>& value = mem["value"];
  for (int64_t i = 0; i < n; ++i) {
    if (stage < 3) value[static_cast<size_t>(i)] = initial(i);
  }
  std::map<int64_t, TensorView> bound_values, bound_grads;
  auto bind = [&](int64_t layer, LayerPart part, TensorView bucket) {
    (part == LayerPart::kValues ? bound_values : bound_grads)[layer] = bucket;
  };
  GradSyncOptions o;
  o.stage = stage;
  o.dp = w->comm.get();
  auto sync = GradSync::create(buckets, {1, 2}, {0, 0}, b, o, bind);
  ASSERT_TRUE(sync.ok()) << sync.status();
  GradSync& g = **sync;
  if (stage == 3) {
    const ZeroPartition& part = *g.partition();
    for (size_t k = 0; k < buckets.size(); ++k) {
      const ZeroPiece p = part.piece(k);
      for (int64_t i = p.begin; i < p.end; ++i) {
        value[static_cast<size_t>(p.shard_offset + i - p.begin)] = initial(i);
      }
    }
  }
  g.params_loaded(s);

  // The gradient view of flat element range [begin, end) of a persistent bucket.
  auto persist_grad = [&](size_t k) {
    const SyncBucket& q = buckets[k];
    if (stage < 2) return engine::slice_rows(b.grad, q.begin, q.end);
    const int64_t at = l.persist_offset[k];
    return engine::slice_rows(b.persist_grad, at, at + q.end - q.begin);
  };
  auto add_grad = [&](TensorView dst, int64_t begin, int mb) {
    double* d = dst.as<double>();
    for (int64_t i = 0; i < dst.numel(); ++i) d[i] += local_grad(rank, mb, begin + i);
  };
  g.zero_grads(s);
  for (int mb = 0; mb < 2; ++mb) {
    g.start_pass(PassDirection::kForward);
    for (int64_t layer : {0, 1}) {
      g.gather_layer(layer, s);
      if (stage == 3) {
        const TensorView v = bound_values.at(layer);
        const int64_t begin = buckets[static_cast<size_t>(layer + 1)].begin;
        for (int64_t i = 0; i < v.numel(); ++i) ASSERT_EQ(v.as<double>()[i], initial(begin + i));
      }
    }
    g.start_pass(PassDirection::kBackward);
    g.set_overlap(mb == 1);
    add_grad(persist_grad(3), buckets[3].begin, mb);
    for (int64_t layer : {1, 0}) {
      const SyncBucket& q = buckets[static_cast<size_t>(layer + 1)];
      g.gather_layer(layer, s);
      g.zero_layer_grads(layer, s);
      add_grad(stage >= 2 ? bound_grads.at(layer) : engine::slice_rows(b.grad, q.begin, q.end),
               q.begin, mb);
      g.layer_grads_done(layer, s);
    }
    add_grad(persist_grad(0), buckets[0].begin, mb);
  }
  g.set_overlap(false);
  g.reduce_gradients(s);

  // The reference: the gradient summed over ranks and micro-batches, one AdamW step.
  std::vector<double> sum(static_cast<size_t>(n), 0.0);
  double squares = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    for (int r = 0; r < world; ++r) {
      for (int mb = 0; mb < 2; ++mb) sum[static_cast<size_t>(i)] += local_grad(r, mb, i);
    }
    squares += sum[static_cast<size_t>(i)] * sum[static_cast<size_t>(i)];
  }
  std::vector<double> out(1, 0.0);
  g.add_grad_squares(view(out), 0, n, {}, s);
  double total = out[0];
  if (stage > 0) {
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  }
  EXPECT_NEAR(total, squares, 1e-9 * squares);

  ops::AdamWArgs args;
  args.lr = 1e-2f;
  args.weight_decay = 0.1f;
  args.step = 1;
  std::vector<double> ref(static_cast<size_t>(n)), rm(ref.size(), 0.0), rv(ref.size(), 0.0);
  for (int64_t i = 0; i < n; ++i) ref[static_cast<size_t>(i)] = initial(i);
  for (const SyncBucket& q : buckets) {
    for (const auto& [lo, hi, wd] :
         {std::tuple<int64_t, int64_t, float>{q.begin, q.decay_end, args.weight_decay},
          {q.decay_end, q.end, 0.0f}}) {
      if (hi <= lo) continue;
      ops::AdamWArgs a = args;
      a.weight_decay = wd;
      auto sl = [&](std::vector<double>& v) { return engine::slice_rows(view(v), lo, hi); };
      ops::adamw_update(a, sl(ref), sl(rm), sl(rv), {}, sl(sum), s);
    }
  }
  g.optimizer_step(args, s);
  std::vector<double> whole(static_cast<size_t>(n), -1.0);
  g.gather_values(view(whole), s);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(whole[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], 1e-12) << i;
  }
  if (stage == 3) {  // the gathers after the update see the new values
    g.start_pass(PassDirection::kForward);
    g.gather_layer(1, s);
    const TensorView v = bound_values.at(1);
    for (int64_t i = 0; i < v.numel(); ++i) {
      ASSERT_NEAR(v.as<double>()[i], ref[static_cast<size_t>(buckets[2].begin + i)], 1e-12);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, GradSyncTest, ::testing::Values(0, 1, 2, 3));

}  // namespace
}  // namespace anvil::parallel
