// A thread that owns a Generator and serves requests from other threads (bin/serve's HTTP
// handlers): submit() queues a request and returns its Job; the scheduler thread starts queued
// requests whenever slots are free (all that fit, prefilled together) and decodes every running
// request in one batch per step, so concurrent requests share each decode step. Each Job
// receives its request's events in order; cancel() (a client that went away) frees its slot at
// the next step. Only the scheduler thread touches the model.
// Tensor-parallel serving: every TP rank must make the same Generator calls in the same order
// (each rank computes its slice of the same logits). The scheduler reports each iteration's
// decisions (ScheduleStep) to an observer; bin/serve's rank 0 broadcasts
// them and the other ranks apply them with replay_schedule, so they run the same prefills and
// decode steps. While idle with an observer, the scheduler reports an idle step every
// keepalive_s seconds (the replicas' waits for the next step stay under the communicators'
// watchdog timeout).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/stream.h"
#include "model/infer/generation.h"

namespace anvil::model {

// One scheduler iteration, in order: stop the running requests `cancelled`, start `start`
// (together, or one by one when that is refused), then one decode step. idle: none of that (a
// keep-alive); stop: the scheduler ends.
struct ScheduleStep {
  std::vector<int64_t> cancelled;
  std::vector<std::pair<int64_t, GenerationRequest>> start;
  bool idle = false, stop = false;
};
using ScheduleObserver = std::function<void(const ScheduleStep&)>;

// A replica's side: applies the steps `next` returns to `gen` as the scheduler does (their
// events are the scheduler's and are dropped here) until a stop step. A failed decode step
// stops every running request, as the scheduler does.
void replay_schedule(Generator& gen, engine::Stream& stream,
                     const std::function<ScheduleStep()>& next);

class GenerationScheduler {
 public:
  class Job {
   public:
    // Blocks until the next event (true) or the end of the events (false; status() then says
    // whether the request failed).
    bool next(GenerationEvent* event);
    void cancel();
    absl::Status status() const;

   private:
    friend class GenerationScheduler;
    void push(const GenerationEvent& e);
    void fail(const absl::Status& s);
    bool cancelled() const;

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<GenerationEvent> events_;
    bool ended_ = false;
    bool cancelled_ = false;
    absl::Status status_;
  };

  // gen and stream must outlive the scheduler; starts the thread. observer (optional) sees
  // every iteration's decisions on the scheduler thread, after its cancellations and before
  // its starts and decode step (and a stop step when the scheduler ends).
  GenerationScheduler(Generator& gen, engine::Stream& stream, ScheduleObserver observer = nullptr,
                      double keepalive_s = 60.0);
  // Ends queued and running requests with Unavailable and joins the thread.
  ~GenerationScheduler();
  GenerationScheduler(const GenerationScheduler&) = delete;
  GenerationScheduler& operator=(const GenerationScheduler&) = delete;

  std::shared_ptr<Job> submit(GenerationRequest request);

 private:
  void loop();
  // Starts `batch` (all together, or one by one when one of them is refused: each refused
  // request fails alone).
  void start(const std::vector<std::pair<int64_t, GenerationRequest>>& batch);
  // Under mu_: this iteration's decisions (cancellations applied to the jobs, the batch taken
  // from the queue).
  ScheduleStep decide();
  void deliver(const std::vector<GenerationEvent>& events);

  Generator& gen_;
  engine::Stream& stream_;
  ScheduleObserver observer_;
  double keepalive_s_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, GenerationRequest>> queue_;  // guarded by mu_
  std::map<int64_t, std::shared_ptr<Job>> jobs_;             // guarded by mu_
  int64_t next_id_ = 0;                                      // guarded by mu_
  bool stop_ = false;                                        // guarded by mu_
  std::thread thread_;
};

}  // namespace anvil::model
