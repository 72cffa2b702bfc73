// Before/after tests of prefetch injection: a loop under the pragma "prefetch" asks for the
// next iteration's streamed vector operands, once per cache line; under "prefetch_broadcasts", for
// its broadcast operands, once per line of a register tile.
#include "compiler/pass/inject_prefetch.h"

#include <gtest/gtest.h>

#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

class InjectPrefetch : public ::testing::Test {
 protected:
  Var acc{"acc", DataType::Handle()}, d{"D", DataType::Handle()}, w{"W", DataType::Handle()};
  Var r{"r"}, t{"t"}, b{"b"}, x{"x"}, c{"c"};
  /// acc[b*112 + x*16 + c] += D[r*9 + t + x] * W[b*9216 + r*2304 + t*16 + c]: a convolution's
  /// update, W a vector along c (a line of 16 floats a tap), D a broadcast.
  Stmt update(const Var& weights) {
    Expr slot = b * 112 + x * 16 + c;
    Expr weight = load(kFloat32, weights, b * 9216 + r * 2304 + t * 16 + c);
    return store(acc, load(kFloat32, acc, slot) + load(kFloat32, d, r * 9 + t + x) * weight, slot);
  }
  struct Loop {
    Var var;
    int extent;
    bool unrolled = false;
  };
  /// `loops` (outermost first; the last vectorized) around `body`, the first under the pragma
  /// prefetch_broadcasts 1.
  static Stmt broadcasts_nest(Stmt body, const std::vector<Loop>& loops) {
    for (size_t i = loops.size(); i-- > 0;) {
      const ForKind kind = i + 1 == loops.size() ? ForKind::kVectorized
                           : loops[i].unrolled   ? ForKind::kUnrolled
                                                 : ForKind::kSerial;
      body = for_loop(loops[i].var, 0, loops[i].extent, kind, std::move(body));
    }
    return attr_stmt(loops[0].var.node(),
                     std::string(attr::kPragmaPrefix) + kPrefetchBroadcastsPragma, 1, body);
  }
  /// The loop nest r, t, b, x, c (vectorized) around `body`, with the pragma on r when `distance`.
  Stmt nest(Stmt body, int distance, const char* pragma = kPrefetchStreamsPragma) {
    body = for_loop(c, 0, 16, ForKind::kVectorized, std::move(body));
    body = for_loop(x, 0, 7, ForKind::kUnrolled, std::move(body));
    body = for_loop(b, 0, 2, ForKind::kUnrolled, std::move(body));
    body = for_loop(t, 0, 9, ForKind::kSerial, std::move(body));
    body = for_loop(r, 0, 4, ForKind::kSerial, std::move(body));
    if (distance == 0) return body;
    return attr_stmt(r.node(), std::string(attr::kPragmaPrefix) + pragma, distance, body);
  }
};

TEST_F(InjectPrefetch, TheNextStepsWeightsOncePerLineOutsideTheColumns) {
  // W moves by a line along b and t, not along x: one prefetch per (t, b), before the columns;
  // D is a broadcast, and the pragma goes.
  EXPECT_EQ(to_string(inject_prefetch(nest(update(w), 1))),
            "for r in range(4):\n"
            "  for t in range(9):\n"
            "    unrolled for b in range(2):\n"
            "      kiln.prefetch(W, b*9216 + r*2304 + t*16 + 2304)\n"
            "      unrolled for x in range(7):\n"
            "        vectorized for c in range(16):\n"
            "          acc[b*112 + x*16 + c] = acc[b*112 + x*16 + c] + D[r*9 + t + x]*W[b*9216 + "
            "r*2304 + t*16 + c]\n");
}

TEST_F(InjectPrefetch, DistanceAndDuplicates) {
  // Two updates reading the same weights ask for them once; distance 2 looks two steps ahead.
  const std::string out = to_string(inject_prefetch(nest(seq({update(w), update(w)}), 2)));
  EXPECT_NE(out.find("kiln.prefetch(W, b*9216 + r*2304 + t*16 + 4608)"), std::string::npos) << out;
  EXPECT_EQ(out.find("kiln.prefetch"), out.rfind("kiln.prefetch")) << out;
}

TEST_F(InjectPrefetch, NothingWithoutThePragmaOrForALocalBuffer) {
  const Stmt plain = nest(update(w), 0);
  EXPECT_EQ(to_string(inject_prefetch(plain)), to_string(plain));
  // Weights in a buffer the function allocates itself are not streamed from beyond the caches.
  Var local{"L", DataType::Handle()};
  const Stmt s = allocate(local, kFloat32, {Expr(36864)}, "local", nest(update(local), 1));
  const std::string out = to_string(inject_prefetch(s));
  EXPECT_EQ(out.find("kiln.prefetch"), std::string::npos) << out;
  EXPECT_EQ(out.find("pragma"), std::string::npos) << out;
}

TEST_F(InjectPrefetch, ABroadcastOncePerLineOfTheRegisterTile) {
  // A 1x1 convolution's tile over column tiles o: D[i*3136 + (o*4 + x)*16 + k] (input channel
  // block i 3136 floats apart, 16 channels a pixel) is a broadcast against W along c. Along k it
  // moves by less than a line: the prefetches go before k, one for each column x of the tile (a
  // line each), b (which D does not move along) at its first; W, a stream, is not asked for.
  Var o{"o"}, i{"i"}, k{"k"};
  Expr slot = b * 64 + x * 16 + c;
  Expr value = load(kFloat32, acc, slot) + load(kFloat32, d, i * 3136 + (o * 4 + x) * 16 + k) *
                                               load(kFloat32, w, b * 4096 + i * 256 + k * 16 + c);
  const Stmt body = broadcasts_nest(
      store(acc, value, slot), {{o, 14}, {i, 16}, {k, 16}, {b, 2, true}, {x, 4, true}, {c, 16}});
  const std::string out = to_string(inject_prefetch(body));
  EXPECT_NE(out.find("for i in range(16):\n"
                     "    kiln.prefetch(D, i*3136 + o*64 + 64)\n"
                     "    kiln.prefetch(D, i*3136 + o*64 + 80)\n"
                     "    kiln.prefetch(D, i*3136 + o*64 + 96)\n"
                     "    kiln.prefetch(D, i*3136 + o*64 + 112)\n"
                     "    for k in range(16):"),
            std::string::npos)
      << out;
  EXPECT_EQ(out.find("kiln.prefetch(W"), std::string::npos) << out;
  EXPECT_EQ(out.find("pragma"), std::string::npos) << out;
}

TEST_F(InjectPrefetch, ABroadcastOfTooManyLinesIsNotAskedFor) {
  // Seven columns by nine taps, each moving D by an element, stay within two lines: D moves by
  // less than a line along t already, so one prefetch for the next r. But where the channels k
  // (less than a line) go around a tile of 7 columns a line apart (x*16) by 8 rows (b*112), the
  // prefetches before k would be 56, more than one point asks for.
  const std::string near =
      to_string(inject_prefetch(nest(update(w), 1, kPrefetchBroadcastsPragma)));
  EXPECT_NE(near.find("for r in range(4):\n  kiln.prefetch(D, r*9 + 9)\n  for t"),
            std::string::npos)
      << near;
  EXPECT_EQ(near.find("kiln.prefetch(W"), std::string::npos) << near;
  Expr slot = b * 112 + x * 16 + c;
  Var k{"k"};
  const Stmt wide = broadcasts_nest(
      store(acc, load(kFloat32, acc, slot) + load(kFloat32, d, r * 4096 + b * 112 + x * 16 + k),
            slot),
      {{r, 4}, {k, 16}, {b, 8, true}, {x, 7, true}, {c, 16}});
  const std::string out = to_string(inject_prefetch(wide));
  EXPECT_EQ(out.find("kiln.prefetch"), std::string::npos) << out;
}

TEST_F(InjectPrefetch, AGlobalIntermediateIsAskedForALocalOneIsNot) {
  // A padded input the function allocates in global memory may be beyond the caches.
  Var global{"G", DataType::Handle()};
  const Stmt s = allocate(global, kFloat32, {Expr(36864)}, "global", nest(update(global), 1));
  const std::string out = to_string(inject_prefetch(s));
  EXPECT_NE(out.find("kiln.prefetch(G, b*9216 + r*2304 + t*16 + 2304)"), std::string::npos) << out;
}

}  // namespace
}  // namespace kiln::pass
