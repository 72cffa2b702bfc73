// Time for the tracker: leases, queue waits and run times read a Clock, so tests drive time by
// hand.
//
//   SystemClock clock;                  // the real one (steady for durations, system for stamps)
//   FakeClock fake;  fake.advance(std::chrono::seconds(11));   // a test's
#pragma once

#include <chrono>
#include <cstdint>

namespace kiln::tracker {

/// Monotonic time: leases and waits are measured in it (never jumps back).
using TimePoint = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

class Clock {
 public:
  virtual ~Clock() = default;
  /// Monotonic now: for leases, queue waits and run times.
  virtual TimePoint now() const = 0;
  /// Wall-clock milliseconds since the Unix epoch: for timestamps that are persisted or shown.
  virtual int64_t unix_ms() const = 0;
};

/// The real clocks: std::chrono::steady_clock and system_clock.
class SystemClock final : public Clock {
 public:
  TimePoint now() const override;
  int64_t unix_ms() const override;
};

/// A clock that moves only when told. Starts at a fixed instant (steady epoch + 1 h, and
/// 2026-01-01 00:00 UTC for unix_ms) so that subtracting durations never underflows.
class FakeClock final : public Clock {
 public:
  TimePoint now() const override { return now_; }
  int64_t unix_ms() const override { return unix_ms_; }
  /// Moves both clocks forward by `d` (which must not be negative).
  void advance(Duration d);

 private:
  TimePoint now_ = TimePoint(std::chrono::hours(1));
  int64_t unix_ms_ = 1767225600000;  // 2026-01-01T00:00:00Z
};

/// Milliseconds in a duration, for messages and protos.
inline int64_t to_ms(Duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace kiln::tracker
