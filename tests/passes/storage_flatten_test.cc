// Before/after tests of storage flattening.
#include "compiler/pass/storage_flatten.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "tests/passes/test_producer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using testing::make_producer;

using BoundMap = std::unordered_map<const ProducerNode*, Buffer>;

TEST(StorageFlatten, BoundTensorsBecomeBufferAccesses) {
  Producer a = make_producer("A", {64, 32}), b = make_producer("B", {64, 32});
  Buffer ba = make_buffer("A", kFloat32, {64, 32}), bb = make_buffer("B", kFloat32, {64, 32});
  Var i("i"), j("j");
  Stmt s = for_loop(i, 0, 64, ForKind::kSerial,
                    for_loop(j, 0, 32, ForKind::kVectorized,
                             producer_store(b, producer_load(a, {i, j}) + 1.0f, {i, j})));
  EXPECT_EQ(to_string(s),
            "for i in range(64):\n"
            "  vectorized for j in range(32):\n"
            "    B[i, j] = A[i, j] + 1f\n");
  Stmt r = storage_flatten(s, {{a.get(), ba}, {b.get(), bb}});
  EXPECT_EQ(to_string(r),
            "for i in range(64):\n"
            "  vectorized for j in range(32):\n"
            "    B[i*32 + j] = A[i*32 + j] + 1f\n");
  // The buffers' own data variables are used, not new ones of the same name.
  auto st = r.as<ForNode>()->body.as<ForNode>()->body.as<StoreNode>();
  ASSERT_NE(st, nullptr);
  EXPECT_TRUE(st->buffer_var.same_as(bb.data));
  EXPECT_TRUE(st->value.as<AddNode>()->a.as<LoadNode>()->buffer_var.same_as(ba.data));
}

TEST(StorageFlatten, SymbolicShape) {
  Var n("n"), m("m"), i("i"), j("j");
  Producer a = make_producer("A", {n, m});
  Buffer ba = make_buffer("A", kFloat32, {n, m});
  Stmt s = for_loop(i, 0, n, ForKind::kSerial,
                    for_loop(j, 0, m, ForKind::kSerial, producer_store(a, 0.0f, {i, j})));
  EXPECT_EQ(to_string(storage_flatten(s, {{a.get(), ba}})),
            "for i in range(n):\n"
            "  for j in range(m):\n"
            "    A[i*m + j] = 0f\n");
}

TEST(StorageFlatten, RealizeOfBoundTensorIsDropped) {
  Producer c = make_producer("C", {8});
  Buffer bc = make_buffer("C", kFloat32, {8});
  Var i("i");
  Stmt s = producer_realize(c, {Range(0, 8)}, "global",
                            for_loop(i, 0, 8, ForKind::kSerial, producer_store(c, 1.0f, {i})));
  EXPECT_EQ(to_string(storage_flatten(s, {{c.get(), bc}})),
            "for i in range(8):\n"
            "  C[i] = 1f\n");
}

TEST(StorageFlatten, RealizeBecomesAllocateOfTheRegion) {
  Producer a = make_producer("A", {16, 4}), t = make_producer("T", {16, 4}),
           b = make_producer("B", {16, 4});
  Buffer ba = make_buffer("A", kFloat32, {16, 4}), bb = make_buffer("B", kFloat32, {16, 4});
  Var i("i"), j("j");
  Stmt body = seq({
      for_loop(i, 0, 16, ForKind::kSerial,
               for_loop(j, 0, 4, ForKind::kSerial,
                        producer_store(t, producer_load(a, {i, j}) * 2.0f, {i, j}))),
      for_loop(
          i, 0, 16, ForKind::kSerial,
          for_loop(j, 0, 4, ForKind::kSerial, producer_store(b, producer_load(t, {i, j}), {i, j}))),
  });
  Stmt s = producer_realize(t, {Range(0, 16), Range(0, 4)}, "local", body);
  EXPECT_EQ(to_string(s),
            "realize T[0:16, 0:4] in local:\n"
            "  for i in range(16):\n"
            "    for j in range(4):\n"
            "      T[i, j] = A[i, j]*2f\n"
            "  for i in range(16):\n"
            "    for j in range(4):\n"
            "      B[i, j] = T[i, j]\n");
  Stmt r = storage_flatten(s, {{a.get(), ba}, {b.get(), bb}});
  EXPECT_EQ(to_string(r),
            "allocate T: float32[64] in local\n"
            "for i in range(16):\n"
            "  for j in range(4):\n"
            "    T[i*4 + j] = A[i*4 + j]*2f\n"
            "for i in range(16):\n"
            "  for j in range(4):\n"
            "    B[i*4 + j] = T[i*4 + j]\n");
  auto alloc = r.as<AllocateNode>();
  ASSERT_NE(alloc, nullptr);
  EXPECT_EQ(alloc->dtype, kFloat32);
  EXPECT_TRUE(alloc->buffer_var.dtype().is_handle());
  ASSERT_EQ(alloc->extents.size(), 1u);
}

TEST(StorageFlatten, RegionIsIndexedRelativeToItsMinimum) {
  // A tile of T computed at an outer loop: T covers rows [y, y + 2) and columns [1, 9).
  Producer t = make_producer("T", {64, 64}), b = make_producer("B", {64, 64});
  Buffer bb = make_buffer("B", kFloat32, {64, 64});
  Var y("y"), i("i"), j("j");
  Stmt s = for_loop(
      y, 0, 32, ForKind::kSerial,
      producer_realize(
          t, {Range(y, 2), Range(1, 8)}, "global",
          seq({for_loop(i, y, 2, ForKind::kSerial,
                        for_loop(j, 1, 8, ForKind::kSerial, producer_store(t, 0.0f, {i, j}))),
               producer_store(b, producer_load(t, {y + 1, 3}), {y, 0})})));
  EXPECT_EQ(to_string(storage_flatten(s, {{b.get(), bb}})),
            "for y in range(32):\n"
            "  allocate T: float32[16]\n"
            "  for i in range(y, y + 2):\n"
            "    for j in range(1, 9):\n"
            "      T[i*8 - y*8 + j - 1] = 0f\n"
            "  B[y*64] = T[10]\n");
}

TEST(StorageFlatten, SymbolicRegionSize) {
  Var n("n"), i("i"), j("j");
  Producer t = make_producer("T", {n + 1, 4});
  Stmt s = producer_realize(
      t, {Range(0, n + 1), Range(0, 4)}, "shared",
      for_loop(i, 0, n + 1, ForKind::kSerial,
               for_loop(j, 0, 4, ForKind::kSerial, producer_store(t, 0.0f, {i, j}))));
  EXPECT_EQ(to_string(storage_flatten(s, {})),
            "allocate T: float32[n*4 + 4] in shared\n"
            "for i in range(n + 1):\n"
            "  for j in range(4):\n"
            "    T[i*4 + j] = 0f\n");
}

TEST(StorageFlatten, AttributesAndOtherStatementsStay) {
  Producer t = make_producer("T", {4});
  Var i("i"), x("x");
  Stmt s =
      producer_realize(t, {Range(0, 4)}, "global",
                       attr_stmt(t, attr::kRealizeScope, make_string("global"),
                                 let_stmt(x, 2,
                                          for_loop(i, 0, 4, ForKind::kParallel,
                                                   producer_store(t, cast(kFloat32, x), {i})))));
  EXPECT_EQ(to_string(storage_flatten(s, {})),
            "allocate T: float32[4]\n"
            "attr [T] realize_scope = \"global\"\n"
            "let x = 2\n"
            "parallel for i in range(4):\n"
            "  T[i] = float32(x)\n");
}

TEST(StorageFlatten, NestedRealizeOfOneTensorShadows) {
  Producer t = make_producer("T", {8});
  Stmt inner = producer_realize(t, {Range(4, 2)}, "local", producer_store(t, 1.0f, {5}));
  Stmt s = producer_realize(t, {Range(0, 8)}, "global", seq({inner, producer_store(t, 2.0f, {5})}));
  EXPECT_EQ(to_string(storage_flatten(s, {})),
            "allocate T: float32[8]\n"
            "allocate T: float32[2] in local\n"
            "T[1] = 1f\n"
            "T[5] = 2f\n");
}

TEST(StorageFlatten, UntouchedStatementKeepsItsIdentity) {
  Var buf("buf", DataType::Handle()), i("i");
  Stmt s = for_loop(i, 0, 4, ForKind::kSerial, store(buf, 1.0f, i));
  EXPECT_TRUE(storage_flatten(s, {}).same_as(s));
}

TEST(StorageFlatten, AccessOutsideAnyRealizeIsAnInternalError) {
  Producer t = make_producer("Tmp", {8});
  Var i("i");
  Stmt s = for_loop(i, 0, 8, ForKind::kSerial, producer_store(t, 0.0f, {i}));
  try {
    storage_flatten(s, {});
    FAIL() << "expected an InternalError";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("'Tmp'"), std::string::npos) << e.what();
  }
  Stmt l = evaluate(producer_load(t, {0}));
  EXPECT_THROW(storage_flatten(l, {}), InternalError);
}

}  // namespace
}  // namespace kiln::pass
