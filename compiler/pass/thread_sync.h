// Barrier insertion for one memory scope ("shared"): inside a kernel (below its first
// thread_extent attribute), threads of a block communicate through buffers allocated in that
// scope, and a write by one thread is only visible to another after a barrier. The pass inserts
// Evaluate(kiln.storage_sync("shared")) where one is needed (TVM's ThreadSync, after its
// thread_storage_sync.cc; docs/gpu.md section 1):
//
//  - Each statement is summarized by the accesses it makes to buffers of the scope (buffer, flat
//    index, read or write); leaving a loop or a let, an index that uses its variable becomes "the
//    whole buffer". A statement with a barrier inside keeps apart the accesses before its first
//    barrier and those after its last one.
//  - A sequence is scanned keeping the accesses made since the last barrier: a barrier goes
//    before a statement that reads what was written (RAW) or writes what was read (WAR); two
//    accesses at the same single index (one thread reading what it wrote) do not conflict. After
//    a barrier nothing is pending.
//  - In a loop body, the accesses pending at the end of an iteration are checked against those
//    at the start of the next one (loop-carried), which puts a barrier before a shared store that
//    would overwrite what the previous iteration still reads:
//      for k { sync; AA[..] = A[..]; sync; use AA }
//
// Whether a barrier ends up under thread-divergent control flow is verify_gpu's question.
#pragma once

#include <string>

#include "compiler/ir/stmt.h"

namespace kiln::pass {

/// The call a barrier is: kiln.storage_sync(scope) (CallKind::kIntrinsic), as a statement.
ir::Stmt storage_sync(const std::string& scope);
/// Whether `s` is a barrier of any scope.
bool is_storage_sync(const ir::Stmt& s);

ir::Stmt thread_sync(const ir::Stmt& s, const std::string& scope);

}  // namespace kiln::pass
