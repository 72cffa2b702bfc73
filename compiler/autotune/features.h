// Features of a candidate for the cost model (cost_model.h): what the lowered loop program does,
// as a vector of floats of one fixed length, so that one model serves every task of a target
// (the paper's cost model reads the loop program, not only the knob values, as TVM's
// feature extraction does; see docs/architecture.md, compiler/autotune/).
//
// loop_features(f) walks a lowered function (after storage flattening and vectorization: For
// loops, flat Load/Store, Allocate). The tuner gives it Task::lower_for_features' program
// (compiler::lower_for_analysis: no unrolling, a tenth of a full lowering's cost); a loop of kind
// unrolled with a constant extent reads as the copies of its body unroll_loops would make (not a
// loop; static counts, allocations and stores per innermost body times the copies; the trip
// count of one copy), so the features are close to the full lowering's. Every Store is
// a compute statement; the one with the largest trip count (the first of equals, in program
// order) is the "main statement" described in detail, and the whole program is summarized by
// arithmetic counts weighted by the trip counts of the loops around each operation. Counts,
// extents, bytes and strides go through log2(1 + x); flags are 0/1. The layout
// (kLoopFeatureLength floats):
//
//  [0, 56)    loops around the main statement, innermost first, kMaxLoops levels x 8 values:
//               log2(1+extent), serial, parallel, vectorized, unrolled (one-hot),
//               log2(1+product of the extents of this loop and those inside it),
//               log2(1+product of the extents of the loops outside it),
//               1 (the level exists).
//             A vector store counts as an innermost vectorized loop of `lanes` iterations (the
//             vectorize pass replaced that loop by vector code). Missing levels are all zero;
//             loops beyond kMaxLoops (the outermost) are dropped.
//  [56, 106)  buffers accessed by the main statement, kMaxBuffers x 10 values, sorted by the bytes
//             they touch (largest first; the stored buffer and each loaded buffer once):
//               log2(1+bytes touched over all the loops around the statement),
//               log2(1+bytes touched within the innermost kStrideLoops loops),
//               log2(1+|stride|) w.r.t. each of the innermost kStrideLoops loops (3 values; the
//                 coefficient, in elements, of the loop variable in the flat index),
//               log2(1+reuse): iterations of the loops whose variable is not in the index,
//               vector access (a Ramp index), read, written,
//               log2(1+number of accesses to it in the statement).
//  [106, 112) the main statement: log2(1+trip count), log2(1+stores in its innermost loop body:
//             unrolled copies), log2(lanes), loop depth (raw), log2(1+arithmetic ops in its value,
//             index arithmetic of its loads included),
//             log2(1+number of distinct buffers it reads).
//  [112, 134) the whole program, trip-count weighted, each log2(1+x) unless noted:
//               float add/sub, float mul, float fma (a*b+c or fma()), float div, other float ops
//               (min/max/compare/select), integer ops, math calls (exp, sqrt, ...), elements
//               loaded, elements stored, load instructions, store instructions, bytes loaded,
//               bytes stored, fraction of float ops done on vectors (0..1), allocations,
//               bytes allocated, parallel tasks (the extent of the outermost parallel loops),
//               loops (static count), stores (static count), max loop depth (raw), conditionals
//               executed, sum of the stores' trip counts.
//  [134, 146) the GPU launch, all zero for a CPU program (a GPU program, lower_for_analysis' or
//             lower_device_program's, holds kernels under thread_extent attributes; the trip
//             counts above are then per thread), each log2(1+x): the extents of blockIdx.x, .y,
//             .z and threadIdx.x, .y, .z (the largest over the kernels), threads per block,
//             blocks, shared bytes per block, local bytes per thread, barriers executed per
//             thread (trip-weighted), kernels.
//             Virtual threads are unrolled by then: they show as stores per innermost body.
//
// Loop extents that are not constants take their constant upper bound when min(c, ...) gives one,
// else 1. The extraction is a few walks over the program: microseconds for a tiled matmul.
//
// knob_features(space, cfg) is the fallback for templates whose programs cannot be lowered
// cheaply: one value per split factor (log2) and per other knob (log2(1+v) for v >= 0, else v),
// in the space's knob order. Its length is fixed per space, not across spaces. (It takes the space
// because a Config does not expose its knob list.)
#pragma once

#include <vector>

#include "compiler/ir/function.h"
#include "compiler/space/space.h"

namespace kiln::autotune {

inline constexpr int kMaxLoops = 7;
inline constexpr int kLoopLevelFeatures = 8;
inline constexpr int kMaxBuffers = 5;
inline constexpr int kStrideLoops = 3;
inline constexpr int kBufferFeatures = 10;
inline constexpr int kStmtFeatures = 6;
inline constexpr int kProgramFeatures = 22;
inline constexpr int kGpuFeatures = 12;
inline constexpr int kLoopFeatureLength = kMaxLoops * kLoopLevelFeatures +
                                          kMaxBuffers * kBufferFeatures + kStmtFeatures +
                                          kProgramFeatures + kGpuFeatures;

/// Offsets of the groups in loop_features' vector.
inline constexpr int kLoopOffset = 0;
inline constexpr int kBufferOffset = kMaxLoops * kLoopLevelFeatures;
inline constexpr int kStmtOffset = kBufferOffset + kMaxBuffers * kBufferFeatures;
inline constexpr int kProgramOffset = kStmtOffset + kStmtFeatures;
inline constexpr int kGpuOffset = kProgramOffset + kProgramFeatures;

/// Positions inside the whole-program group (add kProgramOffset).
enum ProgramFeature : int {
  kFloatAddSub,
  kFloatMul,
  kFloatFma,
  kFloatDiv,
  kFloatOther,
  kIntOps,
  kMathCalls,
  kElemsLoaded,
  kElemsStored,
  kLoadInstrs,
  kStoreInstrs,
  kBytesLoaded,
  kBytesStored,
  kVectorFraction,
  kAllocCount,
  kAllocBytes,
  kParallelTasks,
  kLoopCount,
  kStoreCount,
  kMaxDepth,
  kConditionals,
  kTotalTrips,
};

/// Positions inside the GPU group (add kGpuOffset).
enum GpuFeature : int {
  kBlockX,
  kBlockY,
  kBlockZ,
  kThreadX,
  kThreadY,
  kThreadZ,
  kThreadsPerBlock,
  kBlocks,
  kSharedBytes,
  kLocalBytes,
  kBarriers,
  kKernels,
};

/// The fixed-length features of a lowered function (layout above).
std::vector<float> loop_features(const ir::PrimFunc& f);

/// The knob values of a config (the fallback features; layout above).
std::vector<float> knob_features(const space::ConfigSpace& space, const space::Config& cfg);

}  // namespace kiln::autotune
