// Register prefetch of shared-memory tiles (software pipelining of a GPU's reduction loop): in a
// loop marked `pragma_prefetch`, each cooperative fetch of a shared tile from global memory,
//
//   for ko in range(n):
//     S[...] = G[f(ko, ...)]          (a fetch nest: one store to a shared buffer of global loads)
//     ... compute reading S ...
//
// becomes a copy through registers that loads the next iteration's tile before this one computes,
//
//   R[r] = G[f(0, ...)]               (prologue: this thread's part of the first tile)
//   for ko in range(n):
//     S[...] = R[r]
//     if ko < n - 1: R[r] = G[f(ko + 1, ...)]
//     ... compute reading S ...
//
// where R is a "local" array of the thread's elements of the tile and r their position in the
// fetch nest's loops. The global loads of step ko + 1 are then in flight while step ko computes;
// thread_sync still puts a barrier before the compute and one at the end of the step.
//
// Runs after storage_flatten (buffers are flat, shared buffers Allocates), before virtual threads
// are injected. A marked loop that is not serial with a constant extent of at least 2, or holds no
// fetch nest, is left as it was; the pragma is removed either way.
#pragma once

#include "compiler/ir/stmt.h"

namespace kiln::pass {

inline constexpr const char* kPrefetchPragma = "prefetch";

ir::Stmt prefetch_shared(const ir::Stmt& s);

}  // namespace kiln::pass
