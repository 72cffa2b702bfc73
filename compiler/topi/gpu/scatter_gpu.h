// The GPU schedules of GatherND, ScatterElements and ScatterND (compiler/topi/scatter.h).
//
// GatherND is injective: schedule_injective (one thread an element). A scatter's reduction stage
// (its winner per slot, or its output) is computed one thread per element, each folding the
// updates that may hit it in a register (schedule_thread_per_output): O(slots x updates) work,
// spread over the device's threads, with no atomics and the same result as the x86 schedule's
// single pass (the last update wins, reductions in update order). A kNone scatter's output, the
// gather from the winners, is then an injective kernel. Fine for the few-rows scatters of
// transformers; a scatter of thousands of elementwise indices into a large tensor does
// slots x updates compares on the device.
#pragma once

#include <cstdint>

#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

/// Schedules a gather_nd output `out` with `threads` threads a block.
void schedule_gather_nd_gpu(te::Schedule& s, const te::Tensor& out, int64_t threads);

/// Schedules a scatter_elements or scatter_nd output `out` with `threads` threads a block;
/// kiln::Error when `out` is not one.
void schedule_scatter_gpu(te::Schedule& s, const te::Tensor& out, int64_t threads);

}  // namespace kiln::topi::gpu
