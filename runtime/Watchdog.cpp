//===- Watchdog.cpp - Work that must finish in time, watched by a thread --===//
#include "runtime/Watchdog.h"

#include <chrono>
#include <cstdio>
#include <time.h>

using namespace loomrt;

static double seconds() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

Watchdog::Watchdog(double timeoutSeconds, std::function<std::string()> health,
                   std::function<void(const std::string &)> fail,
                   double periodSeconds)
    : timeout(timeoutSeconds), period(periodSeconds), health(std::move(health)),
      fail(std::move(fail)), thread([this] { run(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  thread.join();
}

void Watchdog::watch(std::string what, std::function<bool()> done) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    entries.push_back({std::move(what), std::move(done), seconds()});
  }
  changed.notify_all();
}

size_t Watchdog::outstanding() {
  std::lock_guard<std::mutex> lock(mutex);
  return entries.size();
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping && !failed) {
    changed.wait_for(lock, std::chrono::duration<double>(period));
    // Finished work first, so that an error names the oldest work still
    // outstanding, if any.
    while (!entries.empty()) {
      std::function<bool()> done = entries.front().done;
      lock.unlock();
      bool finished = done();
      lock.lock();
      if (!finished)
        break;
      entries.pop_front();
    }
    // The transport's own errors come before timeouts: they say why work
    // stopped.
    lock.unlock();
    std::string error = health ? health() : std::string();
    lock.lock();
    if (!error.empty()) {
      failed = true;
      if (!entries.empty())
        error = entries.front().what + ": " + error;
      lock.unlock();
      fail(error);
      lock.lock();
      break;
    }
    if (!entries.empty()) {
      Entry &front = entries.front();
      double waited = seconds() - front.since;
      if (waited > timeout) {
        failed = true;
        char text[64];
        snprintf(text, sizeof text, "%g", timeout);
        std::string message = front.what + " did not complete within " + text +
                              " s (--collective-timeout); another rank "
                              "failed, stopped or runs a different program";
        lock.unlock();
        fail(message);
        lock.lock();
      }
    }
  }
}
