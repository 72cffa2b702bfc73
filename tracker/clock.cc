#include "tracker/clock.h"

#include "base/error.h"

namespace kiln::tracker {

TimePoint SystemClock::now() const { return std::chrono::steady_clock::now(); }

int64_t SystemClock::unix_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void FakeClock::advance(Duration d) {
  KILN_ICHECK(d.count() >= 0) << "FakeClock::advance by a negative duration";
  now_ += d;
  unix_ms_ += to_ms(d);
}

}  // namespace kiln::tracker
