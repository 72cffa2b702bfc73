// The tensor intrinsic of the int8 kernels: a block of `lanes` int32 accumulators, each the 4-deep
// dot product of four shared unsigned bytes with its own four signed ones,
//
//   out[j] (j < lanes) = sum_{k < 4} int32(a[k]) * int32(b[j, k])      a uint8 [4], b int8 [lanes,
//   4]
//
// lowered to one ir::dot4_u8s8 call on vectors (vpdpbusd where the target has VNNI). A
// schedule tensorizes the loops (output channel lanes, 4 input channels) of its register tile
// with it; the regions must be contiguous: b's [lanes, 4] block, a's four bytes, out's lanes.
#pragma once

#include "compiler/te/tensor_intrin.h"

namespace kiln::topi {

/// The intrinsic for `lanes` accumulators (16: one AVX-512 vector of int32).
te::TensorIntrin dot4_u8s8_intrin(int lanes);

}  // namespace kiln::topi
