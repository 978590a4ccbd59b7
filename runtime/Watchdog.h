//===- Watchdog.h - Work that must finish in time, watched by a thread ----===//
//
// Device collectives are enqueued and return at once, so nothing would
// notice one that never completes (a peer that died, a mismatched job): the
// step would hang in its final synchronisation. A watchdog thread polls the
// outstanding work in order and, past the timeout or when the transport
// reports an error, calls `fail`, which ends the job with a message.
// Host logic only: what "done" means (an event that completed) is a callback,
// so it is tested without a GPU (unittests/WatchdogTest.cpp).
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_WATCHDOG_H
#define LOOMRT_WATCHDOG_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace loomrt {

class Watchdog {
public:
  /// `health` returns an error text, or "" while all is well (asked every
  /// round); `fail` gets the message and is not expected to return (when
  /// it does, the watchdog stops watching).
  Watchdog(double timeoutSeconds, std::function<std::string()> health,
           std::function<void(const std::string &)> fail,
           double periodSeconds = 0.001);
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// Watches one piece of work from now: `done` says whether it finished.
  /// Work finishes in the order it was watched.
  void watch(std::string what, std::function<bool()> done);
  /// How many pieces are still outstanding.
  size_t outstanding();

private:
  struct Entry {
    std::string what;
    std::function<bool()> done;
    double since;
  };
  void run();

  double timeout, period;
  std::function<std::string()> health;
  std::function<void(const std::string &)> fail;
  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Entry> entries;
  bool stopping = false, failed = false;
  std::thread thread;
};

} // namespace loomrt

#endif // LOOMRT_WATCHDOG_H
