// Virtual threads: `attr [vthread] virtual_thread = n` (a loop bound to te::thread_axis("vthread"))
// asks for n logical threads per real thread, interleaved by the compiler, so that each thread
// works on n strided register tiles (TVM's InjectVirtualThread). After this pass no
// virtual_thread attribute is left.
//
// The lowering chosen: each virtual thread's work becomes an unrolled loop over the virtual thread
// index, pushed as far inward as the program allows, so that the n copies of one statement end up
// next to each other (independent operations for the scheduler of the GPU):
//  - A statement that does not use the virtual thread index, nor a value or buffer that depends
//    on it, runs once for all virtual threads (the cooperative fetch of a shared tile).
//  - The loop descends through sequences, loops, conditions, lets, attributes and allocations
//    whose own header does not depend on the index; anything else that depends on it (a store, a
//    loop whose extent depends on it) is wrapped in `unrolled for vthread in range(n)`.
//  - A local buffer allocated inside the region and written with values that depend on the
//    index, whose allocation stays outside the unrolled loops, is replicated: n times its size,
//    virtual thread v using the part at offset v * size (each virtual thread keeps its own
//    register tile). Shared and global buffers are never replicated: bound inference made them
//    cover every virtual thread, like every real thread of the block.
// Since every statement runs for all virtual threads before the next one starts, and barriers
// are inserted afterwards (thread_sync) between statements, shared memory written by one virtual
// thread and read by another is ordered like it would be between real threads.
//
// A co-processor's virtual thread (`cthread`, the VDLA's) shares nothing: every
// local buffer allocated inside it is replicated, and the loop over the thread index descends
// only through statements holding a pragma region (a DMA copy, an ALU block), so that each such
// region, and each statement holding none (a GEMM nest), runs once per thread with the threads'
// copies next to each other: [load t0][load t1][gemm t0][gemm t1]. The co-processor's
// dependence tokens between them are inserted later, from the buffers each block touches.
//
// The extent of a virtual thread must be a constant (kiln::Error naming the axis otherwise).
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

ir::Stmt inject_virtual_thread(const ir::Stmt& s);

}  // namespace kiln::pass
