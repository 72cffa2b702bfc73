// A hand-lowered int8 conv2d for the VDLA: the instruction stream that the compiler's tensorize
// path (issue 17, part 3: tensorize, DMA/ALU intrinsic injection, virtual threads lowered to
// dependence tokens) will emit, written here as a tiled loop nest over the driver's API. The
// compiler will replace it; until then it is the reference for what that path must produce, and
// what the tests and bench_vdla run.
//
// Layouts (blocked by the GEMM unit's BLOCK_IN = BLOCK_OUT = 16, batch 1):
//   data    [IC/16][H][W][16] int8
//   kernel  [OC/16][IC/16][K][K][16 out][16 in] int8 (each 16x16 block transposed, as WGT rows are)
//   output  [OC/16][OH][OW][16] int8 = clip(conv >> shift, -128, 127)
//
// The loop nest, per output tile (tile_oc channel blocks x tile_h rows x tile_w columns):
//
//   reset the tile's ACC rows                               (GEMM reset)
//   for each step of tile_ic input channel blocks:
//     load the input rows it needs, zero-padded by DMA      (LOAD INP, one per channel block)
//     load the weights                                      (LOAD WGT, one 2D load)
//     GEMM micro-kernel: the first two of (oc block, ic block, ky, kx) with more than one step
//       as its two loops, the others and the tile's (y, x) as micro-ops
//   SHR by shift, MAX -128, MIN 127                         (ALU, immediates)
//   store one row block per output channel block           (STORE)
//
// When a tile's whole reduction is one step (tile_ic = IC/16), its inputs and weights stay in the
// buffers, and the next tile of the same thread loads only what changed.
//
// With two virtual threads (A7), consecutive tiles along `vthread_axis` form pairs whose stages
// are interleaved in one stream, each thread in its own half of INP, WGT and ACC, with dependence
// tokens between the stages: the load of one thread's next step overlaps the other's GEMM. Per
// group of tiles (t0, t1):
//
//   [pop s2c; reset t0] [pop s2c; reset t1]
//   per step: [pop c2l; LD t0; push l2c] [pop c2l; LD t1; push l2c]
//             [pop l2c; GEMM t0; push c2l] [pop l2c; GEMM t1; push c2l]
//   [ALU t0; push c2s] [ALU t1; push c2s] [pop c2s; ST t0; push s2c] [pop c2s; ST t1; push s2c]
//
// with one token per thread put in c2l and s2c at the start and taken back at the end. The pairs
// alternate threads, so the k-th pop of a WAR queue always takes the token of the same thread's
// previous use; this is why the tile count along the virtual-thread axis must be even.
#pragma once

#include <cstdint>
#include <string>

#include "deploy/vdla/driver/command_queue.h"

namespace kiln::vdla {

struct Conv2dShape {
  int h = 0, w = 0;    ///< input height and width
  int ic = 0, oc = 0;  ///< channels, multiples of the block sizes
  int k = 1;           ///< kernel height = width
  int stride = 1;
  int pad = 0;  ///< on every side
  int oh() const { return (h + 2 * pad - k) / stride + 1; }
  int ow() const { return (w + 2 * pad - k) / stride + 1; }
  /// Multiply-adds.
  int64_t macs() const { return int64_t{oc} * oh() * ow() * ic * k * k; }
};

enum class VthreadAxis { kOc, kH };

struct Conv2dTiling {
  int tile_oc = 1;   ///< output channel blocks per tile (divides OC/16)
  int tile_ic = 1;   ///< input channel blocks per reduction step (divides IC/16)
  int tile_h = 1;    ///< output rows per tile (the last tile may be shorter)
  int tile_w = 0;    ///< output columns per tile, 0 = the whole width
  int vthreads = 1;  ///< 1 (serial) or 2
  VthreadAxis vthread_axis = VthreadAxis::kOc;
  std::string to_string() const;
};

/// Byte addresses in Dram of the three blocked tensors, aligned to their rows (16, 256, 16 bytes).
struct Conv2dAddrs {
  uint64_t data = 0, kernel = 0, output = 0;
};

/// Why the tiling cannot run this shape on `cfg` (a buffer half overflows, a factor does not
/// divide, an odd number of tiles to pair, ...), or "" when it can.
std::string conv2d_tiling_problem(const Config& cfg, const Conv2dShape& shape,
                                  const Conv2dTiling& tiling);

/// Appends the convolution's stream to `q` (balanced tokens; call q.synchronize() to run it).
/// Raises kiln::Error with conv2d_tiling_problem's reason.
void emit_conv2d(CommandQueue& q, const Conv2dShape& shape, const Conv2dTiling& tiling,
                 const Conv2dAddrs& addrs, int shift);

/// A tiling chosen quickly: the candidates of choose_conv2d_tiling ranked by a rough estimate of
/// their cycles, and the fastest of the best three on the cycle model.
Conv2dTiling default_conv2d_tiling(const Config& cfg, const Conv2dShape& shape, int vthreads);

/// The tiling with the fewest cycles on the cycle model among a pruned set of candidates
/// (channel tiles, widths, row tiles up to the tallest that fits, both virtual-thread axes), for
/// `vthreads` 1 or 2. Raises kiln::Error when none fits.
Conv2dTiling choose_conv2d_tiling(const Config& cfg, const Conv2dShape& shape, int vthreads);

}  // namespace kiln::vdla
