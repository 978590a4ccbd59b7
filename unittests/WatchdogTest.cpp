//===- WatchdogTest.cpp - The device collectives' watchdog, on the host ---===//
#include "runtime/Watchdog.h"

#include "gtest/gtest.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace loomrt;

namespace {

/// Collects what the watchdog reports.
struct Failures {
  std::mutex mutex;
  std::vector<std::string> messages;
  void add(const std::string &message) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(message);
  }
  std::vector<std::string> seen() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages;
  }
};

bool waitFor(std::function<bool()> condition, double seconds = 5.0) {
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return condition();
}

/// A transport whose error appears when `broken` is set, watched with a
/// long timeout (errors must not wait for it).
struct BreakingTransport {
  Failures failures;
  std::atomic<bool> broken{false};
  Watchdog dog{10.0,
               [this] {
                 return broken ? std::string("NCCL: remote process exited")
                               : std::string();
               },
               [this](const std::string &m) { failures.add(m); }};
};

} // namespace

TEST(Watchdog, WorkThatFinishesIsForgotten) {
  Failures failures;
  Watchdog dog(
      10.0, [] { return std::string(); },
      [&](const std::string &m) { failures.add(m); });
  std::atomic<bool> first(false), second(false);
  dog.watch("collective #0", [&] { return first.load(); });
  dog.watch("collective #1", [&] { return second.load(); });
  EXPECT_EQ(dog.outstanding(), 2u);
  first = true;
  EXPECT_TRUE(waitFor([&] { return dog.outstanding() == 1; }));
  second = true;
  EXPECT_TRUE(waitFor([&] { return dog.outstanding() == 0; }));
  EXPECT_TRUE(failures.seen().empty());
}

TEST(Watchdog, StuckWorkIsReportedOnceWithItsName) {
  Failures failures;
  Watchdog dog(
      0.05, [] { return std::string(); },
      [&](const std::string &m) { failures.add(m); });
  dog.watch("collective #3 all_gather over [tp] (x.loom:4:2)",
            [] { return false; });
  dog.watch("collective #4 all_reduce(sum) over [dp] (x.loom:5:2)",
            [] { return false; });
  ASSERT_TRUE(waitFor([&] { return !failures.seen().empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::vector<std::string> seen = failures.seen();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0],
            "collective #3 all_gather over [tp] (x.loom:4:2) did not complete "
            "within 0.05 s (--collective-timeout); another rank failed, "
            "stopped or runs a different program");
}

TEST(Watchdog, TransportErrorsEndTheWatch) {
  BreakingTransport transport;
  transport.dog.watch("collective #0", [] { return false; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_TRUE(transport.failures.seen().empty());
  transport.broken = true;
  ASSERT_TRUE(waitFor([&] { return !transport.failures.seen().empty(); }));
  // The error names the oldest work still outstanding.
  EXPECT_EQ(transport.failures.seen()[0],
            "collective #0: NCCL: remote process exited");
}

TEST(Watchdog, TransportErrorsWithNothingOutstandingStandAlone) {
  BreakingTransport transport;
  transport.dog.watch("collective #0", [] { return true; });
  EXPECT_TRUE(waitFor([&] { return transport.dog.outstanding() == 0; }));
  transport.broken = true;
  ASSERT_TRUE(waitFor([&] { return !transport.failures.seen().empty(); }));
  EXPECT_EQ(transport.failures.seen()[0], "NCCL: remote process exited");
}

TEST(Watchdog, TheClockStartsWhenWorkIsWatched) {
  // Work watched late is not blamed for the time before it was watched.
  Failures failures;
  Watchdog dog(
      0.2, [] { return std::string(); },
      [&](const std::string &m) { failures.add(m); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::atomic<bool> done(false);
  dog.watch("collective #0", [&] { return done.load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  done = true;
  EXPECT_TRUE(waitFor([&] { return dog.outstanding() == 0; }));
  EXPECT_TRUE(failures.seen().empty());
}
