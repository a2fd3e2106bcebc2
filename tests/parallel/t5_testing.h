// Shared setup of the T5 parallel tests (t5_parallel_test, t5_pipeline_test,
// t5_sequence_parallel_test): a tiny T5, pseudo-random micro-batches and the MPI world as a
// process grid with its group communicators.
// Header-only: the parallel tests link the model library, the shared testing library does not.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/mpi_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::testing_t5 {

// vocab 37 (padded to 128: divisible by every tp of the tests), d 16, 4 heads of 4, d_ff 24,
// 8 relative buckets up to distance 6.
inline T5Config tiny_config(T5Version v, float dropout, int64_t enc_layers, int64_t dec_layers) {
  T5Config c;
  c.vocab_size = 37;
  c.d_model = 16;
  c.d_kv = 4;
  c.n_heads = 4;
  c.d_ff = 24;
  c.n_encoder_layers = enc_layers;
  c.n_decoder_layers = dec_layers;
  c.num_buckets = 8;
  c.max_distance = 6;
  c.dropout = dropout;
  c.version = v;
  return c;
}

// One micro-batch's host inputs; counted = labels >= 0.
struct Batch {
  std::vector<int32_t> enc, dec, labels, lengths;
  int64_t counted = 0;
  T5Batch view() const { return {enc.data(), dec.data(), labels.data(), lengths.data()}; }
};

// Tokens and labels from `seed` (label 3 not counted), encoder lengths `lengths` [B].
inline Batch make_batch(const T5RunShape& shape, uint64_t seed, std::vector<int32_t> lengths) {
  Batch b;
  b.enc = testing::random_ints(shape.micro_batch * shape.enc_len, seed, 0, 37);
  b.dec = testing::random_ints(shape.micro_batch * shape.dec_len, seed + 1, 0, 37);
  b.labels = testing::random_ints(shape.micro_batch * shape.dec_len, seed + 2, 0, 37);
  b.labels[3] = -1;
  b.lengths = std::move(lengths);
  for (int32_t t : b.labels) b.counted += t >= 0;
  return b;
}

struct World {
  int size = 1, rank = 0;
  std::unique_ptr<parallel::ProcessGrid> grid;
  std::unique_ptr<parallel::GroupComms> comms;
};

// MPI_COMM_WORLD as a tp x pp x dp grid (their product must be the world size).
inline World make_world(int tp, int pp, int dp) {
  World w;
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  auto grid = parallel::ProcessGrid::create(w.size, w.rank, tp, pp, dp);
  EXPECT_TRUE(grid.ok()) << grid.status();
  w.grid = std::make_unique<parallel::ProcessGrid>(*grid);
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  EXPECT_TRUE(comms.ok()) << comms.status();
  w.comms = std::make_unique<parallel::GroupComms>(std::move(*comms));
  return w;
}

}  // namespace anvil::model::testing_t5
