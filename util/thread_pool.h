// ThreadPool: a fixed set of worker threads running submitted tasks in FIFO order. Used for the
// concurrent fan-out of sub-queries (each task makes one blocking RPC), never for tasks that wait
// on other tasks of the same pool. A task runs under the call deadline of the thread that submitted
// it (util/call_deadline.h), so a fanned-out sub-call gets only the time its caller has left.
//
// Thread-safety: Submit may be called from any thread. The destructor finishes queued tasks.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "util/call_deadline.h"
#include "util/snapshot.h"

namespace zipg {

class ThreadPool {
 public:
  explicit ThreadPool(size_t threads) {
    for (size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { Work(); });
  }
  ~ThreadPool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  template <typename F>
  auto Submit(F&& f) -> std::future<decltype(f())> {
    using R = decltype(f());
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    std::future<R> result = task->get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.emplace_back([task, deadline = CallDeadline::Current(), at = ReadAt::Current()] {
        CallDeadline::Scope scope(deadline);
        ReadAt::Scope snapshot(at);
        (*task)();
      });
    }
    cv_.notify_one();
    return result;
  }

 private:
  void Work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping and drained
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace zipg
