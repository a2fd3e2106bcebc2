// The ScheduleStep record and its broadcast (see schedule_broadcast.h).
#include "model/infer/schedule_broadcast.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "parallel/comm.h"

namespace anvil::model {
namespace {

int64_t float_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  return static_cast<int64_t>(u);
}

float bits_float(int64_t v) {
  const uint32_t u = static_cast<uint32_t>(v);
  float f = 0.0f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Reads a record front to back; every read checks the bounds.
class Reader {
 public:
  explicit Reader(absl::Span<const int64_t> r) : r_(r) {}
  int64_t next(const char* what) {
    ANVIL_CHECK_MSG(at_ < r_.size(), absl::StrCat("schedule step record of ", r_.size(),
                                                  " values ends before its ", what));
    return r_[at_++];
  }
  // A count of items that follow, each at least one value.
  size_t count(const char* what) {
    const int64_t n = next(what);
    ANVIL_CHECK_MSG(n >= 0 && static_cast<size_t>(n) <= r_.size() - at_,
                    absl::StrCat("schedule step record: ", what, " ", n, " does not fit"));
    return static_cast<size_t>(n);
  }
  bool done() const { return at_ == r_.size(); }

 private:
  absl::Span<const int64_t> r_;
  size_t at_ = 0;
};

void encode_request(const GenerationRequest& r, std::vector<int64_t>* out) {
  out->push_back(static_cast<int64_t>(r.prompt.size()));
  out->insert(out->end(), r.prompt.begin(), r.prompt.end());
  const SamplingParams& p = r.sampling;
  out->insert(out->end(), {r.max_new_tokens, p.greedy ? 1 : 0, float_bits(p.temperature), p.top_k,
                           float_bits(p.top_p), float_bits(p.repetition_penalty),
                           static_cast<int64_t>(p.seed)});
  out->push_back(static_cast<int64_t>(r.stop.size()));
  for (const std::string& s : r.stop) {
    out->push_back(static_cast<int64_t>(s.size()));
    for (char c : s) out->push_back(static_cast<unsigned char>(c));
  }
  out->insert(out->end(), {r.logprobs, r.echo ? 1 : 0});
}

GenerationRequest decode_request(Reader& in) {
  GenerationRequest r;
  r.prompt.resize(in.count("prompt length"));
  for (int32_t& t : r.prompt) t = static_cast<int32_t>(in.next("prompt"));
  r.max_new_tokens = in.next("max_new_tokens");
  SamplingParams& p = r.sampling;
  p.greedy = in.next("greedy") != 0;
  p.temperature = bits_float(in.next("temperature"));
  p.top_k = in.next("top_k");
  p.top_p = bits_float(in.next("top_p"));
  p.repetition_penalty = bits_float(in.next("repetition_penalty"));
  p.seed = static_cast<uint64_t>(in.next("seed"));
  r.stop.resize(in.count("stop strings"));
  for (std::string& s : r.stop) {
    s.resize(in.count("stop string length"));
    for (char& c : s) c = static_cast<char>(in.next("stop string"));
  }
  r.logprobs = in.next("logprobs");
  r.echo = in.next("echo") != 0;
  return r;
}

}  // namespace

std::vector<int64_t> encode_schedule_step(const ScheduleStep& step) {
  std::vector<int64_t> out{step.stop ? 1 : 0, step.idle ? 1 : 0,
                           static_cast<int64_t>(step.cancelled.size())};
  out.insert(out.end(), step.cancelled.begin(), step.cancelled.end());
  out.push_back(static_cast<int64_t>(step.start.size()));
  for (const auto& [id, req] : step.start) {
    out.push_back(id);
    encode_request(req, &out);
  }
  return out;
}

ScheduleStep decode_schedule_step(absl::Span<const int64_t> record) {
  Reader in(record);
  ScheduleStep step;
  step.stop = in.next("stop") != 0;
  step.idle = in.next("idle") != 0;
  step.cancelled.resize(in.count("cancelled"));
  for (int64_t& id : step.cancelled) id = in.next("cancelled id");
  step.start.resize(in.count("started requests"));
  for (auto& [id, req] : step.start) {
    id = in.next("request id");
    req = decode_request(in);
  }
  ANVIL_CHECK_MSG(in.done(), "schedule step record: values left after the last request");
  return step;
}

void send_schedule_step(parallel::Comm& comm, const ScheduleStep& step) {
  engine::Stream cpu = engine::Stream::cpu();
  std::vector<int64_t> record = encode_schedule_step(step);
  int64_t n = static_cast<int64_t>(record.size());
  comm.broadcast(engine::make_view(&n, engine::DType::kI64, engine::Device::kCpu, {1}), 0, cpu);
  comm.broadcast(engine::make_view(record.data(), engine::DType::kI64, engine::Device::kCpu, {n}),
                 0, cpu);
}

ScheduleStep receive_schedule_step(parallel::Comm& comm) {
  engine::Stream cpu = engine::Stream::cpu();
  int64_t n = 0;
  comm.broadcast(engine::make_view(&n, engine::DType::kI64, engine::Device::kCpu, {1}), 0, cpu);
  std::vector<int64_t> record(static_cast<size_t>(n));
  comm.broadcast(engine::make_view(record.data(), engine::DType::kI64, engine::Device::kCpu, {n}),
                 0, cpu);
  return decode_schedule_step(record);
}

}  // namespace anvil::model
