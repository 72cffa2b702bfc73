// The runtime's workspace allocator (deploy/runtime/workspace.h): freed blocks kept per thread
// and handed to the next request they hold. (That generated code's heap stages go through it:
// codegen_llvm_test's LargeConstantAllocationGoesToTheHeap.)
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "deploy/runtime/workspace.h"

namespace kiln {
namespace {

TEST(Workspace, KeepsFreedBlocksForTheNextRequest) {
  // On a thread of its own: each thread keeps its own blocks.
  std::thread([] {
    void* a = kiln_workspace_alloc(3000000);
    void* b = kiln_workspace_alloc(100);
    ASSERT_NE(a, nullptr);
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 64, 0u);
    EXPECT_EQ(runtime::kept_workspace_bytes(), 0u);
    kiln_workspace_free(b);
    kiln_workspace_free(a);
    EXPECT_EQ(runtime::kept_workspace_bytes(), 3000000u + 128u);  // sizes rounded up to 64
    // The smallest kept block that holds a request serves it.
    void* c = kiln_workspace_alloc(50);
    void* d = kiln_workspace_alloc(2000000);
    EXPECT_EQ(c, b);
    EXPECT_EQ(d, a);
    EXPECT_EQ(runtime::kept_workspace_bytes(), 0u);
    kiln_workspace_free(c);
    kiln_workspace_free(d);
  }).join();
}

}  // namespace
}  // namespace kiln
