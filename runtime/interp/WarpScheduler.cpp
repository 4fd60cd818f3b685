#include "runtime/interp/WarpScheduler.h"

#include "compiler/support/Error.h"
#include "runtime/interp/Machine.h"

#include <algorithm>
#include <sstream>

namespace tessel::interp {

namespace {

/// Thrown by wait_until in the fibers that an error elsewhere ends; caught at the fiber's top.
struct FiberAbort {};

} // namespace

WarpScheduler::WarpScheduler(Machine &M) : WarpScheduler(std::vector<Machine *>{&M}) {}

WarpScheduler::WarpScheduler(std::vector<Machine *> blocks)
    : blocks_(std::move(blocks)), warps_per_block_(std::max(1u, blocks_.front()->n_warps)),
      fibers_(blocks_.size() * warps_per_block_) {
  for (uint32_t w = 0; w < fibers_.size(); ++w)
    fibers_[w].thread = std::thread([this, w] { fiber_main(w); });
}

WarpScheduler::~WarpScheduler() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  for (Fiber &f : fibers_)
    f.cv.notify_one();
  for (Fiber &f : fibers_)
    f.thread.join();
}

void WarpScheduler::run_block(const std::function<void(uint32_t)> &body) {
  run_cluster([&](uint32_t, uint32_t w) { body(w); });
}

void WarpScheduler::run_cluster(const std::function<void(uint32_t, uint32_t)> &body) {
  std::unique_lock<std::mutex> lock(mu_);
  body_ = &body;
  aborting_ = false;
  error_ = nullptr;
  for (Fiber &f : fibers_) {
    f.state = NotStarted;
    f.wait = nullptr;
  }
  hand_to(0);
  caller_cv_.wait(lock, [&] { return running_ == kCaller; });
  body_ = nullptr;
  if (error_)
    std::rethrow_exception(error_);
}

void WarpScheduler::fiber_main(uint32_t w) {
  Fiber &me = fibers_[w];
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    me.cv.wait(lock, [&] { return running_ == w || shutdown_; });
    if (shutdown_)
      return;
    me.state = Running;
    lock.unlock();
    // Only the baton holder touches the Machine and the fields below.
    if (!aborting_) {
      try {
        (*body_)(w / warps_per_block_, w % warps_per_block_);
      } catch (const FiberAbort &) {
      } catch (...) {
        if (!error_)
          error_ = std::current_exception();
        aborting_ = true;
      }
    }
    lock.lock();
    me.state = Finished;
    hand_on_finish(w);
  }
}

uint32_t WarpScheduler::pick(uint32_t from) const {
  const uint32_t n = uint32_t(fibers_.size());
  for (uint32_t i = 1; i <= n; ++i) {
    const uint32_t w = (from + i) % n;
    const Fiber &f = fibers_[w];
    if (f.state == NotStarted || (f.state == Blocked && (aborting_ || f.wait->ready())))
      return w;
  }
  return kNone;
}

void WarpScheduler::hand_to(uint32_t next) {
  running_ = next;
  ++switches_;
  if (next == kCaller)
    caller_cv_.notify_one();
  else
    fibers_[next].cv.notify_one();
}

void WarpScheduler::hand_on_finish(uint32_t w) {
  uint32_t next = pick(w);
  if (next == kNone && std::any_of(fibers_.begin(), fibers_.end(),
                                   [](const Fiber &f) { return f.state != Finished; })) {
    // Every warp left is blocked, and this one will not release them.
    if (!error_) {
      try {
        user_error("interp") << deadlock_report();
      } catch (...) {
        error_ = std::current_exception();
      }
    }
    aborting_ = true;
    next = pick(w);
  }
  hand_to(next == kNone ? kCaller : next);
}

void WarpScheduler::wait_until(const Wait &wait) {
  if (wait.ready())
    return;
  const uint32_t w = running_;
  Fiber &me = fibers_[w];
  std::unique_lock<std::mutex> lock(mu_);
  me.state = Blocked;
  me.wait = &wait;
  const uint32_t next = pick(w);
  if (next == kNone) {
    std::string report = deadlock_report();
    me.state = Running;
    me.wait = nullptr;
    lock.unlock();
    user_error("interp") << report;
  }
  hand_to(next);
  me.cv.wait(lock, [&] { return running_ == w; });
  me.state = Running;
  me.wait = nullptr;
  if (aborting_)
    throw FiberAbort{};
}

std::string WarpScheduler::deadlock_report() const {
  const Machine &M0 = *blocks_.front();
  const bool cluster = blocks_.size() > 1;
  std::ostringstream os;
  if (cluster) {
    os << "deadlock in the cluster of blocks";
    for (const Machine *B : blocks_)
      os << " " << B->block_name();
  } else {
    os << "deadlock in block " << M0.block_name();
  }
  os << " of kernel '" << M0.kernel
     << "': every warp that has not finished is blocked, and none can progress:";
  std::vector<std::string> hints;
  const uint32_t n = warps_per_block_;
  for (size_t b = 0; b < blocks_.size(); ++b) {
    const Machine &M = *blocks_[b];
    const Fiber *fibers = &fibers_[b * n];
    auto threads = [&](uint32_t first_warp, uint32_t last_warp) {
      const uint32_t last = std::min(M.n_threads, 32 * last_warp + 32) - 1;
      return (cluster ? "block " + M.block_name() + " " : std::string()) +
             (first_warp == last_warp
                  ? "warp " + std::to_string(first_warp)
                  : "warps " + std::to_string(first_warp) + ".." + std::to_string(last_warp)) +
             " (" + M.thread_name(32 * first_warp) + ".." + M.thread_name(last) + ")";
    };
    std::vector<uint32_t> done;
    for (uint32_t w = 0; w < n;) {
      const Fiber &f = fibers[w];
      if (f.state != Blocked) {
        if (f.state == Finished)
          done.push_back(w);
        ++w;
        continue;
      }
      // Consecutive warps that wait alike are one line.
      const std::string what = f.wait->describe();
      uint32_t last = w;
      while (last + 1 < n && fibers[last + 1].state == Blocked &&
             fibers[last + 1].wait->describe() == what)
        ++last;
      os << "\n  " << threads(w, last) << " wait" << (w == last ? "s" : "") << " in " << what;
      if (!f.wait->hint.empty() &&
          std::find(hints.begin(), hints.end(), f.wait->hint) == hints.end())
        hints.push_back(f.wait->hint);
      w = last + 1;
    }
    if (!done.empty()) {
      os << "\n  " << (cluster ? "block " + M.block_name() + " " : std::string())
         << "finished the kernel: warp" << (done.size() > 1 ? "s" : "");
      for (size_t i = 0; i < done.size(); ++i)
        os << (i ? ", " : " ") << done[i];
    }
  }
  for (const std::string &h : hints)
    os << "\n" << h;
  return os.str();
}

} // namespace tessel::interp
