// Bound inference: the range of every loop of every stage, and the region each stage must store.
// A stage at the root computes its whole tensor. A stage computed inside a loop of its consumer
// computes just the region that the consumer reads within one iteration of that loop: the
// consumer's loops outside (and at) the attach point stay symbolic, the ones inside are relaxed
// over their ranges, and the reads are bounded by interval analysis. On GPUs a loop bound to a
// thread axis is relaxed wherever it is when the stage's storage is shared across that axis
// (thread rank >= storage rank: blockIdx 0, threadIdx/vthread 1; global 0, shared 1, local 2), so
// a shared tile covers every thread of the block. Stages computed inside the attach loop that
// read the stage (the local copy of a shared tile) are readers too.
#pragma once

#include <unordered_map>
#include <vector>

#include "compiler/te/message_passing.h"
#include "compiler/te/schedule.h"

namespace kiln::te {

struct Bounds {
  RangeMap ranges;  ///< every axis of every stage
  /// Per stage, the region its storage covers (one range per dimension). Its extents are
  /// constant whenever they can be bounded by a constant, so local buffers get a fixed size.
  std::unordered_map<const StageNode*, std::vector<Range>> storage;
};

Bounds infer_bound(const Schedule& sch);

}  // namespace kiln::te
