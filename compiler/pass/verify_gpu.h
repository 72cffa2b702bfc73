// Checks of a lowered GPU function against its target, before the host/device split. Each
// top-level thread_extent region is one kernel.
//
// Mistakes of the schedule raise kiln::Error naming the stage (the tensors the kernel stores),
// the thread axis and the limit:
//  - a thread tag bound with two different extents in one kernel;
//  - more threads per block (the product of the threadIdx extents) than target.max_num_threads;
//  - more shared memory per block than target.max_shared_memory_per_block, or a shared buffer of
//    a size that is not a constant;
//  - a launch extent (blockIdx/threadIdx) that is not a constant.
// Broken invariants of lowering raise kiln::InternalError: a barrier under control flow that
// depends on threadIdx (threads of a block would wait at different barriers), and a shared buffer
// allocated or used outside a kernel's thread environment.
#pragma once

#include <string>

#include "compiler/ir/stmt.h"
#include "compiler/target/target.h"

namespace kiln::pass {

void verify_gpu(const ir::Stmt& s, const target::Target& target);

/// The names of the tensors `s` stores to, quoted and comma-separated ("'C'", "'A.shared', 'C'"),
/// the buffers allocated inside `s` left out when anything else is stored: how errors name the
/// stage a statement computes.
std::string stored_stage_names(const ir::Stmt& s);

}  // namespace kiln::pass
