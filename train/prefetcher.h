// A producer thread that builds items 0 .. n-1 in order, at most `depth` ahead of the consumer
// (depth 0: each item is built in next(), on the caller's thread). The loader uses it to fetch
// and collate batch k+1 while step k computes. An error of the builder is rethrown by the next()
// that would have returned the item. An item that `last` accepts is the last one built: the
// consumer that stops there (every rank at the same step) leaves no builder in a collective
// of an item that another rank's builder, stopped first, never starts.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace ddgnn {

template <class T>
class Prefetcher {
 public:
  // `detach_on_unwind`: when the consumer unwinds after an error (an exception in flight), a
  // builder that does not finish within 2 s is left behind instead of joined: on several ranks it
  // may sit in a collective that the other ranks never join, and the error path stops the job.
  Prefetcher(size_t n, int64_t depth, std::function<T(size_t)> build, bool detach_on_unwind,
             std::function<bool(const T&)> last = {})
      : m_n(n),
        m_depth(depth),
        m_build(std::move(build)),
        m_last(std::move(last)),
        m_detach_on_unwind(detach_on_unwind) {
    if (m_depth > 0) m_thread = std::thread([this] { produce(); });
  }
  ~Prefetcher() {
    std::unique_lock<std::mutex> lock(m_mutex);
    m_stop = true;
    m_cv.notify_all();
    if (!m_thread.joinable()) return;
    if (m_detach_on_unwind && std::uncaught_exceptions() > 0 &&
        !m_cv.wait_for(lock, std::chrono::seconds(2), [&] { return m_finished; })) {
      lock.unlock();
      m_thread.detach();
      return;
    }
    lock.unlock();
    m_thread.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  size_t size() const { return m_n; }
  // The next item, in order; call it size() times at most.
  T next() {
    if (m_depth == 0) return m_build(m_taken++);
    std::unique_lock<std::mutex> lock(m_mutex);
    m_cv.wait(lock, [&] { return !m_queue.empty() || m_error || m_finished; });
    if (m_queue.empty() && m_error) std::rethrow_exception(m_error);
    if (m_queue.empty()) throw std::logic_error("Prefetcher::next() after the last item");
    T item = std::move(m_queue.front());
    m_queue.pop_front();
    ++m_taken;
    lock.unlock();
    m_cv.notify_all();
    return item;
  }

 private:
  void produce() {
    try {
      for (size_t i = 0; i < m_n; ++i) {
        {
          std::unique_lock<std::mutex> lock(m_mutex);
          m_cv.wait(lock, [&] { return m_stop || int64_t(m_queue.size()) < m_depth; });
          if (m_stop) break;
        }
        T item = m_build(i);
        const bool last = m_last && m_last(item);
        {
          std::lock_guard<std::mutex> lock(m_mutex);
          m_queue.push_back(std::move(item));
        }
        m_cv.notify_all();
        if (last) break;
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(m_mutex);
      m_error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_finished = true;
    m_cv.notify_all();
  }

  size_t m_n;
  int64_t m_depth;
  std::function<T(size_t)> m_build;
  std::function<bool(const T&)> m_last;
  bool m_detach_on_unwind;
  size_t m_taken = 0;
  std::thread m_thread;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  std::deque<T> m_queue;
  std::exception_ptr m_error;
  bool m_stop = false, m_finished = false;
};

}  // namespace ddgnn
