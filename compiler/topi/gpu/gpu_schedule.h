// What the GPU templates share: the thread axes of one schedule, and cooperative fetching.
//
// A GPU template binds its output's tile loops to blockIdx / vthread / threadIdx and computes a
// local accumulator at the thread loop; the operands' tiles are copied into shared memory once per
// reduction step by every thread of the block together ("cooperative fetching", the paper's §4.2):
// the copy stage's loops are fused, then split by the block's thread extents and bound to the same
// threadIdx axes as the output. Lowering relaxes the shared copy over the threads, so it holds the
// whole block's tile, and inserts the barriers around it.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

/// The block and thread axes of one schedule: bind every stage to these same objects, so that
/// lowering sees one thread index per tag.
struct ThreadAxes {
  te::IterVar block_x = te::thread_axis("blockIdx.x");
  te::IterVar block_y = te::thread_axis("blockIdx.y");
  te::IterVar block_z = te::thread_axis("blockIdx.z");
  te::IterVar thread_x = te::thread_axis("threadIdx.x");
  te::IterVar thread_y = te::thread_axis("threadIdx.y");
  te::IterVar thread_z = te::thread_axis("threadIdx.z");
};

/// The threads a block and the outputs a thread of `cfg`, from its 4-part split knobs `tiles`
/// (block, virtual thread, thread, inner).
struct TileShape {
  int64_t threads = 1;
  int64_t outputs_per_thread = 1;
};
TileShape tile_shape(const space::Config& cfg, const std::vector<std::string>& tiles);

/// Whether a config is worth building: 32 to `max_threads` threads a block and 1 to 64 outputs a
/// thread. The rest of a GPU space (one thread doing thousands of outputs, or blocks the device
/// refuses) is legal but never fast; tuners and tests sample among these.
bool plausible(const space::Config& cfg, const std::vector<std::string>& tiles,
               int64_t max_threads);

/// Positions of `space` (from `positions`) with the thread factors of `tiles` reduced, the largest
/// first, until a block has at most `max_threads` threads.
std::vector<int> fit_threads(const space::ConfigSpace& space, std::vector<int> positions,
                             const std::vector<std::string>& tiles, int64_t max_threads);

/// Splits `axis` of `stage` by `factors` (outermost first, as a 4-part split knob gives them:
/// block, virtual thread, thread, inner) and returns the four loops.
std::array<te::IterVar, 4> split4(te::Stage& stage, const te::IterVar& axis,
                                  const std::vector<int64_t>& factors);

/// Cooperative fetching of the shared copy `stage`: its loops fused, then split so that
/// consecutive threadIdx.x read consecutive elements (coalesced), `vector` elements a thread at a
/// time (vectorized: one 16-byte access for 4 floats), then over threadIdx.y and threadIdx.z
/// (threads = {z, y, x} extents; an extent of 1 skips that axis), the rest a loop. The caller
/// passes a `vector` that divides the copy's innermost extent (and its start).
void cooperative_fetch(te::Stage& stage, const ThreadAxes& axes, std::array<int64_t, 3> threads,
                       int64_t vector = 1);

/// An injective output (elementwise, broadcast, layout change) in one kernel: all axes fused, then
/// split into blocks of `threads` threads.
void schedule_injective(te::Schedule& s, const te::Tensor& out, int64_t threads);

/// Inlines every stage `out` reads, transitively, that has no reduction, and hands each one that
/// has (a softmax's sums, an average's window sum) to `on_reduction`, once.
void inline_producers(te::Schedule& s, const te::Tensor& out,
                      const std::function<void(const te::Tensor&)>& on_reduction);

/// One thread per output element, for operators whose outputs each reduce a small window
/// (pooling, depthwise convolution): `output` (`out`, or an elementwise epilogue of it) fused and
/// split into blocks of `threads` threads; `out`'s reduction accumulated in a local register by
/// that thread, its reduction loops unrolled when `unroll` (and the window is at most 64); `out`'s
/// pure producers (padding) inlined and its other reductions (an average's sum) computed by the
/// same thread.
void schedule_thread_per_output(te::Schedule& s, const te::Tensor& out, const te::Tensor& output,
                                int64_t threads, bool unroll);

/// The thread counts a block may have (powers of two from 32 to 1024), a knob of the simple
/// templates, and the default among them for a target: 256, or its limit when lower.
const std::vector<int64_t>& thread_choices();
int64_t default_threads(const target::Target& target);

}  // namespace kiln::topi::gpu
