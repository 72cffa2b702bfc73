// The workspace allocator that compiled code gets its heap stages from (kiln_workspace_alloc /
// kiln_workspace_free through the module's `__kiln_workspace_alloc` and `__kiln_workspace_free`
// pointers): a kernel's stages too large for the stack (a padded input computed in full first, a
// Winograd convolution's transformed tiles) come from blocks that earlier calls freed, not from
// fresh memory that the OS maps and zeroes page by page on every call (VGG-16's first Winograd
// 3x3, 58 MiB of stages: 25 ms with aligned_alloc, 10.4 ms so).
//
// Each thread keeps its freed blocks; a request takes the smallest kept block that holds it, else
// a new one. A thread keeps at most kMaxKeptWorkspaceBytes; past that the largest blocks go back
// to the system. The blocks are freed when the thread ends.
//
// The convention, beside c_abi.h's: a module whose functions need heap memory for their stages
// holds two global function pointers, `__kiln_workspace_alloc` (KilnWorkspaceAlloc) and
// `__kiln_workspace_free` (KilnWorkspaceFree), that the loader (runtime::Module::from_node) sets
// to the functions below before the first call; left null, the module calls aligned_alloc and
// free. Every block is 64-byte aligned; a block is freed by the thread that allocated it.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A block of at least `bytes` bytes, 64-byte aligned, or NULL when memory runs out; its release. */
typedef void* (*KilnWorkspaceAlloc)(uint64_t bytes);
typedef void (*KilnWorkspaceFree)(void* block);

/* The runtime's implementations, for loaders that fill in the module's pointers. */
void* kiln_workspace_alloc(uint64_t bytes);
void kiln_workspace_free(void* block);

#ifdef __cplusplus
}

namespace kiln::runtime {

/// The most bytes of freed blocks one thread keeps.
constexpr uint64_t kMaxKeptWorkspaceBytes = uint64_t{1} << 30;

/// Bytes the calling thread keeps in freed blocks now (for tests).
uint64_t kept_workspace_bytes();

}  // namespace kiln::runtime
#endif
