// From a lowered VDLA function (compiler::lower_vdla) to a VDLA program: the driver calls
// (deploy/vdla/driver/command_queue.h) that build its instruction stream, with DRAM addresses
// relative to the function's arguments.
//
// Shapes are static, so the builder runs the lowered loops at build time, as VTA's generated host
// code would at run time, and records what each step asks of the driver; `VdlaProgram::emit`
// replays the calls for the arguments' addresses (the program is built once and run on any
// tensors). Recording calls rather than instructions keeps the driver's micro-kernel cache, UOP
// ring and token rules in one place, the driver.
//
// What the builder understands (compiler/vdla/intrin.h names them):
//  - `pragma_dma_copy` nests: the innermost loops covering one SRAM row are checked contiguous on
//    both sides; adjacent outer loops that are contiguous on both sides are merged; the last two
//    are the DMA's y and x, the others make one DMA each. Rows read through select(cond, x, 0)
//    are padding; each DMA's padding must surround its data (at most 15 rows or columns a side),
//    or the DMA is split by rows.
//  - `pragma_alu` nests: one ALU micro-op per accumulator row, in place (the result is placed on
//    the rows of the operand it overwrites).
//  - GEMM micro-ops (`vdla.gemm`, `vdla.gemm_reset`): the largest loop nest holding only micro-ops
//    of one kind, and no unrolled loop (the virtual threads' copies), is one GEMM instruction; its
//    two outermost loops of more than one step become the instruction's loops when the micro-ops
//    move linearly with them, the rest is unrolled into micro-ops. ALU nests are folded the same
//    way.
//  - Allocations in local.inp_buffer / local.wgt_buffer / local.acc_buffer take rows of those
//    buffers (placed at their first use, freed at the end of their scope).
//  - Dependence tokens (the queues between the load, compute and store modules, device.h): every
//    LOAD, GEMM, ALU and STORE records the rows it reads and writes; a step waits (a pop) for the
//    last step of a neighbouring module that wrote what it reads or read what it overwrites,
//    which pushes right after that step. With virtual threads each thread has its own rows, so
//    one thread's load waits only for its own previous GEMM and overlaps the other's (the
//    paper's Fig. 8/9).
// Anything else (a store outside those pragmas, another scope) is a kiln::Error naming it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "compiler/ir/function.h"
#include "compiler/te/schedule.h"
#include "deploy/vdla/driver/program.h"

namespace kiln::vdla_compiler {

using vdla::DmaCall;
using vdla::DriverCall;
using vdla::KernelCall;
using vdla::TokenCall;
using vdla::VdlaProgram;

/// The program of a function lowered by compiler::lower_vdla, for a VDLA of configuration `cfg`.
VdlaProgram build_program(const ir::PrimFunc& f, const vdla::Config& cfg);

/// compiler::lower_vdla, then build_program.
VdlaProgram build_vdla(const te::Schedule& sch, const std::vector<te::Tensor>& args,
                       const std::string& name, const vdla::Config& cfg);

}  // namespace kiln::vdla_compiler
