// The VDLA's side of the tensor language: its on-chip memory scopes, the pragmas its lowering
// understands, and the GEMM tensor intrinsic (docs/architecture.md, "The VDLA").
//
//  - Scopes: a stage set_scope'd to local.inp_buffer / local.wgt_buffer / local.acc_buffer lives
//    in that SRAM (rows of batch x block_in int8, block_out x block_in int8, batch x block_out
//    int32); local.uop is the micro-op buffer, which only the driver fills.
//  - `pragma(axis, "dma_copy")` on a copy stage: the loop nest from `axis` inward is one DMA
//    (LOAD into an SRAM scope, with zero padding where the copied value is a select(cond, x, 0);
//    STORE from local.acc_buffer to DRAM, truncated to int8).
//  - `pragma(axis, "alu")` on an elementwise stage in local.acc_buffer: min, max, add, mul and
//    shift_right (arithmetic) by an immediate or another accumulator, in place.
//  - gemm_intrin: out[b, o] (int32, batch x block_out) = sum_k int32(inp[b, k]) * int32(wgt[o, k])
//    over int8 inp (batch x block_in) and wgt (block_out x block_in), each in its scope. Its
//    lowering is a GEMM micro-op, `vdla.gemm(acc, inp, wgt)` or `vdla.gemm_reset(acc)`, whose
//    arguments are the regions' first elements written as loads: a load there stands for the
//    element's address and is never executed.
#pragma once

#include "compiler/te/tensor_intrin.h"
#include "deploy/vdla/device/config.h"

namespace kiln::vdla_compiler {

inline constexpr const char* kInpScope = "local.inp_buffer";
inline constexpr const char* kWgtScope = "local.wgt_buffer";
inline constexpr const char* kAccScope = "local.acc_buffer";
inline constexpr const char* kUopScope = "local.uop";
inline constexpr const char* kDmaCopy = "dma_copy";
inline constexpr const char* kAlu = "alu";
inline constexpr const char* kGemmCall = "vdla.gemm";
inline constexpr const char* kGemmResetCall = "vdla.gemm_reset";

/// The GEMM unit of `cfg` as a tensor intrinsic named "vdla.gemm".
te::TensorIntrin gemm_intrin(const vdla::Config& cfg);

}  // namespace kiln::vdla_compiler
