// Identifiers the tracker hands out. All start at 1; 0 means "none".
#pragma once

#include <cstdint>

namespace kiln::tracker {

using JobId = uint64_t;
using DeviceId = uint64_t;
using RequestId = uint64_t;

}  // namespace kiln::tracker
