// GenerationScheduler (generation_scheduler.h): the request queue and the scheduler thread.
#include "model/generation_scheduler.h"

#include <vector>

namespace anvil::model {

bool GenerationScheduler::Job::next(GenerationEvent* event) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return !events_.empty() || ended_; });
  if (events_.empty()) return false;
  *event = std::move(events_.front());
  events_.pop_front();
  return true;
}

void GenerationScheduler::Job::cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_ = true;
}

absl::Status GenerationScheduler::Job::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

bool GenerationScheduler::Job::cancelled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cancelled_;
}

void GenerationScheduler::Job::push(const GenerationEvent& e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(e);
    if (e.finished != FinishReason::kNone) ended_ = true;
  }
  cv_.notify_all();
}

void GenerationScheduler::Job::fail(const absl::Status& s) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    status_ = s;
    ended_ = true;
  }
  cv_.notify_all();
}

GenerationScheduler::GenerationScheduler(Generator& gen, engine::Stream& stream)
    : gen_(gen), stream_(stream), thread_([this] { loop(); }) {}

GenerationScheduler::~GenerationScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  const absl::Status bye = absl::UnavailableError("the server is stopping");
  for (auto& [id, job] : jobs_) job->fail(bye);
}

std::shared_ptr<GenerationScheduler::Job> GenerationScheduler::submit(GenerationRequest request) {
  auto job = std::make_shared<Job>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t id = next_id_++;
    jobs_[id] = job;
    queue_.emplace_back(id, std::move(request));
  }
  cv_.notify_all();
  return job;
}

void GenerationScheduler::deliver(const std::vector<GenerationEvent>& events) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const GenerationEvent& e : events) {
    auto it = jobs_.find(e.id);
    if (it == jobs_.end()) continue;
    it->second->push(e);
    if (e.finished != FinishReason::kNone) jobs_.erase(it);
  }
}

void GenerationScheduler::start(std::vector<std::pair<int64_t, GenerationRequest>> batch) {
  absl::StatusOr<std::vector<GenerationEvent>> ev = gen_.start(batch, stream_);
  if (ev.ok()) {
    deliver(*ev);
    return;
  }
  for (auto& one : batch) {
    absl::StatusOr<std::vector<GenerationEvent>> e = gen_.start({one}, stream_);
    if (e.ok()) {
      deliver(*e);
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    jobs_[one.first]->fail(e.status());
    jobs_.erase(one.first);
  }
}

void GenerationScheduler::loop() {
  for (;;) {
    std::vector<std::pair<int64_t, GenerationRequest>> batch;
    std::vector<int64_t> cancelled;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty() || gen_.running(); });
      if (stop_) return;
      // Requests whose client went away: queued ones are dropped, running ones stopped.
      for (auto it = jobs_.begin(); it != jobs_.end();) {
        if (!it->second->cancelled()) {
          ++it;
          continue;
        }
        it->second->fail(absl::CancelledError("cancelled by the client"));
        cancelled.push_back(it->first);
        it = jobs_.erase(it);
      }
      for (auto it = queue_.begin(); it != queue_.end();) {
        it = jobs_.count(it->first) ? std::next(it) : queue_.erase(it);
      }
      for (int64_t id : cancelled) gen_.cancel(id);
      while (!queue_.empty() && static_cast<int64_t>(batch.size()) < gen_.free_slots()) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (!batch.empty()) start(std::move(batch));
    absl::StatusOr<std::vector<GenerationEvent>> ev = gen_.step(stream_);
    if (ev.ok()) {
      deliver(*ev);
      continue;
    }
    // A failed step leaves the running requests without a next token: end them all.
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
      if (gen_.cancel(it->first)) {
        it->second->fail(ev.status());
        it = jobs_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace anvil::model
