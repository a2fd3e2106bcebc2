// The ScheduleStep record of tensor-parallel serving (model/infer/schedule_broadcast.h): a step
// with cancellations and requests (prompts, every sampling parameter, stop strings with non-ASCII
// bytes, logprobs and echo) decodes to the same step; keep-alive and stop steps too; a cut record
// aborts.
#include "model/infer/schedule_broadcast.h"

#include "gtest/gtest.h"

namespace anvil::model {
namespace {

void expect_same(const ScheduleStep& a, const ScheduleStep& b) {
  EXPECT_EQ(a.stop, b.stop);
  EXPECT_EQ(a.idle, b.idle);
  EXPECT_EQ(a.cancelled, b.cancelled);
  ASSERT_EQ(a.start.size(), b.start.size());
  for (size_t i = 0; i < a.start.size(); ++i) {
    const GenerationRequest &x = a.start[i].second, &y = b.start[i].second;
    EXPECT_EQ(a.start[i].first, b.start[i].first);
    EXPECT_EQ(x.prompt, y.prompt);
    EXPECT_EQ(x.max_new_tokens, y.max_new_tokens);
    EXPECT_EQ(x.sampling.greedy, y.sampling.greedy);
    EXPECT_EQ(x.sampling.temperature, y.sampling.temperature);
    EXPECT_EQ(x.sampling.top_k, y.sampling.top_k);
    EXPECT_EQ(x.sampling.top_p, y.sampling.top_p);
    EXPECT_EQ(x.sampling.repetition_penalty, y.sampling.repetition_penalty);
    EXPECT_EQ(x.sampling.seed, y.sampling.seed);
    EXPECT_EQ(x.stop, y.stop);
    EXPECT_EQ(x.logprobs, y.logprobs);
    EXPECT_EQ(x.echo, y.echo);
  }
}

TEST(ScheduleBroadcast, RecordRoundTrips) {
  ScheduleStep step;
  step.cancelled = {3, 17};
  GenerationRequest a;
  a.prompt = {50256, 0, 7, 2147483647};
  a.max_new_tokens = 9;
  a.sampling.temperature = 0.7f;
  a.sampling.top_k = 50;
  a.sampling.top_p = 0.9f;
  a.sampling.repetition_penalty = 1.3f;
  a.sampling.seed = 0xfedcba9876543210ull;  // above INT64_MAX
  a.stop = {"\n\n", "\xc3\xa9t\xe2\x82\xac", ""};
  GenerationRequest b;
  b.prompt = {1};
  b.sampling.greedy = true;
  b.logprobs = 5;
  b.echo = true;
  step.start = {{42, a}, {43, b}};
  expect_same(decode_schedule_step(encode_schedule_step(step)), step);

  ScheduleStep idle;
  idle.idle = true;
  expect_same(decode_schedule_step(encode_schedule_step(idle)), idle);
  ScheduleStep stop;
  stop.stop = true;
  expect_same(decode_schedule_step(encode_schedule_step(stop)), stop);
}

TEST(ScheduleBroadcastDeathTest, CutRecordAborts) {
  ScheduleStep step;
  GenerationRequest r;
  r.prompt = {1, 2, 3};
  step.start = {{0, r}};
  std::vector<int64_t> record = encode_schedule_step(step);
  record.pop_back();
  EXPECT_DEATH(decode_schedule_step(record), "schedule step record");
}

}  // namespace
}  // namespace anvil::model
