// Tensor-parallel serving (bin/serve): rank 0's scheduler decisions (a ScheduleStep of
// model/infer/generation_scheduler.h) sent to the other ranks of the TP group over its CPU
// communicator, so that they replay the same prefills and decode steps. The record is flat
// int64:
//   [stop, idle, #cancelled, ids..., #start, per request: id, #prompt, prompt ids...,
//    max_new_tokens, greedy, temperature bits, top_k, top_p bits, repetition_penalty bits, seed,
//    #stop strings, per string: #bytes, bytes..., logprobs, echo]
// (floats by their bit patterns: the replicas sample with exactly rank 0's parameters), sent as
// two broadcasts from group rank 0: its length, then the record.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/infer/generation_scheduler.h"

namespace anvil::parallel {
class Comm;
}

namespace anvil::model {

std::vector<int64_t> encode_schedule_step(const ScheduleStep& step);
// The step of a record encode_schedule_step wrote (aborts, naming the field, on a malformed
// record: both ends run this program, so that is a bug, not bad input).
ScheduleStep decode_schedule_step(absl::Span<const int64_t> record);

// Group rank 0 of `comm` (a CPU communicator): sends `step` to the others.
void send_schedule_step(parallel::Comm& comm, const ScheduleStep& step);
// The other ranks: the next step group rank 0 sends (blocks until it comes).
ScheduleStep receive_schedule_step(parallel::Comm& comm);

}  // namespace anvil::model
