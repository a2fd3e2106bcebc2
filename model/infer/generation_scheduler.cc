// GenerationScheduler (generation_scheduler.h): the request queue, the scheduler thread and
// its replay on the other ranks of tensor-parallel serving.
#include "model/infer/generation_scheduler.h"

#include <chrono>
#include <set>
#include <vector>

namespace anvil::model {
namespace {

using Batch = std::vector<std::pair<int64_t, GenerationRequest>>;

// Starts `batch` together, or one by one when that is refused (each refused request fails
// alone): started(events) for every start that worked, refused(id, status) for the others.
void start_requests(Generator& gen, const Batch& batch, engine::Stream& stream,
                    const std::function<void(const std::vector<GenerationEvent>&)>& started,
                    const std::function<void(int64_t, const absl::Status&)>& refused) {
  absl::StatusOr<std::vector<GenerationEvent>> ev = gen.start(batch, stream);
  if (ev.ok()) {
    started(*ev);
    return;
  }
  for (const auto& one : batch) {
    absl::StatusOr<std::vector<GenerationEvent>> e = gen.start({one}, stream);
    if (e.ok()) {
      started(*e);
    } else {
      refused(one.first, e.status());
    }
  }
}

}  // namespace

void replay_schedule(Generator& gen, engine::Stream& stream,
                     const std::function<ScheduleStep()>& next) {
  std::set<int64_t> live;  // started, not finished
  auto track = [&](const std::vector<GenerationEvent>& events) {
    for (const GenerationEvent& e : events) {
      if (e.finished == FinishReason::kNone) {
        live.insert(e.id);
      } else {
        live.erase(e.id);
      }
    }
  };
  for (;;) {
    const ScheduleStep step = next();
    if (step.stop) return;
    if (step.idle) continue;
    for (int64_t id : step.cancelled) {
      gen.cancel(id);
      live.erase(id);
    }
    if (!step.start.empty()) {
      start_requests(gen, step.start, stream, track, [](int64_t, const absl::Status&) {});
    }
    absl::StatusOr<std::vector<GenerationEvent>> ev = gen.step(stream);
    if (ev.ok()) {
      track(*ev);
      continue;
    }
    for (int64_t id : live) gen.cancel(id);  // as the scheduler: the running requests end
    live.clear();
  }
}

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

GenerationScheduler::GenerationScheduler(Generator& gen, engine::Stream& stream,
                                         ScheduleObserver observer, double keepalive_s)
    : gen_(gen),
      stream_(stream),
      observer_(std::move(observer)),
      keepalive_s_(keepalive_s),
      thread_([this] { loop(); }) {}

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

void GenerationScheduler::start(const Batch& batch) {
  start_requests(
      gen_, batch, stream_, [this](const std::vector<GenerationEvent>& ev) { deliver(ev); },
      [this](int64_t id, const absl::Status& status) {
        std::lock_guard<std::mutex> lock(mu_);
        jobs_[id]->fail(status);
        jobs_.erase(id);
      });
}

ScheduleStep GenerationScheduler::decide() {
  ScheduleStep step;
  // Requests whose client went away: queued ones are dropped, running ones stopped.
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    if (!it->second->cancelled()) {
      ++it;
      continue;
    }
    it->second->fail(absl::CancelledError("cancelled by the client"));
    step.cancelled.push_back(it->first);
    it = jobs_.erase(it);
  }
  for (auto it = queue_.begin(); it != queue_.end();) {
    it = jobs_.count(it->first) ? std::next(it) : queue_.erase(it);
  }
  for (int64_t id : step.cancelled) gen_.cancel(id);
  while (!queue_.empty() && static_cast<int64_t>(step.start.size()) < gen_.free_slots()) {
    step.start.push_back(std::move(queue_.front()));
    queue_.pop_front();
  }
  return step;
}

void GenerationScheduler::loop() {
  for (;;) {
    ScheduleStep step;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto ready = [&] { return stop_ || !queue_.empty() || gen_.running(); };
      if (observer_) {
        step.idle = !cv_.wait_for(lock, std::chrono::duration<double>(keepalive_s_), ready);
      } else {
        cv_.wait(lock, ready);
      }
      step.stop = stop_;
      if (!step.idle && !step.stop) step = decide();
    }
    if (observer_) observer_(step);
    if (step.stop) return;
    if (step.idle) continue;
    if (!step.start.empty()) start(step.start);
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
