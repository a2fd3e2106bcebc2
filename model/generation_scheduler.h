// A thread that owns a Generator and serves requests from other threads (bin/serve's HTTP
// handlers): submit() queues a request and returns its Job; the scheduler thread starts queued
// requests whenever slots are free (all that fit, prefilled together) and decodes every running
// request in one batch per step, so concurrent requests share each decode step. Each Job
// receives its request's events in order; cancel() (a client that went away) frees its slot at
// the next step. Only the scheduler thread touches the model.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "engine/stream.h"
#include "model/generation.h"

namespace anvil::model {

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

  // gen and stream must outlive the scheduler; starts the thread.
  GenerationScheduler(Generator& gen, engine::Stream& stream);
  // Ends queued and running requests with Unavailable and joins the thread.
  ~GenerationScheduler();
  GenerationScheduler(const GenerationScheduler&) = delete;
  GenerationScheduler& operator=(const GenerationScheduler&) = delete;

  std::shared_ptr<Job> submit(GenerationRequest request);

 private:
  void loop();
  // Starts `batch` (all together, or one by one when one of them is refused: each refused
  // request fails alone).
  void start(std::vector<std::pair<int64_t, GenerationRequest>> batch);
  void deliver(const std::vector<GenerationEvent>& events);

  Generator& gen_;
  engine::Stream& stream_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<int64_t, GenerationRequest>> queue_;  // guarded by mu_
  std::map<int64_t, std::shared_ptr<Job>> jobs_;             // guarded by mu_
  int64_t next_id_ = 0;                                      // guarded by mu_
  bool stop_ = false;                                        // guarded by mu_
  std::thread thread_;
};

}  // namespace anvil::model
