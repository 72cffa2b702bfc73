// Cross-thread reduction: a reduction axis bound to threadIdx lowers to a local accumulator per
// thread, a tree over a shared buffer with a barrier between its steps (none where thread 0 reads
// back what it wrote), and one store by thread 0. The lowered IR, the lowered kernels run thread by
// thread against a plain loop (rows along blocks, rows along threadIdx.y, row lengths the threads
// do not divide, a thread count that is not a power of two, max as well as sum), and the schedules
// it refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/ir/printer.h"
#include "compiler/lower.h"
#include "compiler/te/schedule.h"
#include "tests/common/expect_error.h"
#include "tests/passes/gpu_interpreter.h"

namespace kiln::pass {
namespace {

struct RowReduce {
  int rows, n;
  bool use_max;
  te::Tensor x, y;
  te::IterVar r;
  te::Schedule s;

  RowReduce(int rows_, int n_, bool max_ = false) : rows(rows_), n(n_), use_max(max_) {
    x = te::placeholder({rows, n}, ir::kFloat32, "x");
    r = te::reduce_axis({0, n}, "k");
    const std::function<ir::Expr(ir::Var)> body = [&](ir::Var i) {
      return use_max ? te::max(x(i, r.var()), {r}) : te::sum(x(i, r.var()), {r});
    };
    y = te::compute({ir::Expr(rows)}, body, "y");
    s = te::create_schedule({y});
  }

  /// Rows over blocks (`rows_per_block` of them along threadIdx.y), the row over `threads`
  /// threads along threadIdx.x.
  void schedule(int threads, int rows_per_block = 1) {
    te::Stage st = s[y];
    auto [ko, ki] = st.split(st.op()->reduce_axis[0], ir::Expr(threads));
    if (rows_per_block == 1) {
      st.bind(st.axis(0), te::thread_axis("blockIdx.x"));
    } else {
      auto [bo, bi] = st.split(st.axis(0), ir::Expr(rows_per_block));
      st.bind(bo, te::thread_axis("blockIdx.x"));
      st.bind(bi, te::thread_axis("threadIdx.y"));
    }
    st.bind(ki, te::thread_axis("threadIdx.x"));
    (void)ko;
  }

  DeviceFunction lower() const {
    return compiler::lower_device(s, {x, y}, "row_reduce", target::Target::parse("cuda"));
  }

  void expect_computes() const {
    std::vector<std::vector<float>> args{std::vector<float>(size_t(rows) * n),
                                         std::vector<float>(size_t(rows), NAN)};
    for (size_t i = 0; i < args[0].size(); ++i) args[0][i] = float(int(i * 37 % 23) - 11);
    testing::run_on_threads(lower(), &args);
    for (int i = 0; i < rows; ++i) {
      float want = use_max ? -INFINITY : 0.0f;
      for (int j = 0; j < n; ++j) {
        const float v = args[0][size_t(i) * n + j];
        want = use_max ? std::max(want, v) : want + v;
      }
      EXPECT_EQ(args[1][size_t(i)], want) << "row " << i;
    }
  }
};

TEST(CrossThreadReduction, LoweredKernel) {
  RowReduce m(3, 10);
  m.schedule(6);  // 6 threads: the tree folds 2 onto 4, then 2, then 1
  DeviceFunction d = m.lower();
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernels[0].launch.grid, (std::array<int64_t, 3>{3, 1, 1}));
  EXPECT_EQ(d.kernels[0].launch.block, (std::array<int64_t, 3>{6, 1, 1}));
  EXPECT_EQ(ir::to_string(d.kernels[0].func.body),
            R"(attr [blockIdx.x] thread_extent = 3
attr [threadIdx.x] thread_extent = 6
allocate y.red_shared: float32[6] in shared
allocate y.red_local: float32[1] in local
y.red_local[0] = 0f
for k.outer in range(2):
  if k.outer*6 + threadIdx.x < 10:
    y.red_local[0] = y.red_local[0] + x[blockIdx.x*10 + k.outer*6 + threadIdx.x]
y.red_shared[threadIdx.x] = y.red_local[0]
kiln.storage_sync("shared")
if threadIdx.x < 2:
  y.red_shared[threadIdx.x] = y.red_shared[threadIdx.x] + y.red_shared[threadIdx.x + 4]
kiln.storage_sync("shared")
if threadIdx.x < 2:
  y.red_shared[threadIdx.x] = y.red_shared[threadIdx.x] + y.red_shared[threadIdx.x + 2]
kiln.storage_sync("shared")
if threadIdx.x < 1:
  y.red_shared[0] = y.red_shared[0] + y.red_shared[1]
if threadIdx.x == 0:
  y[blockIdx.x] = y.red_shared[0]
)");
  m.expect_computes();
}

TEST(CrossThreadReduction, ComputesSumsAndMaxima) {
  for (int threads : {1, 2, 7, 32, 64}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    RowReduce sum(4, 50);
    sum.schedule(threads);
    sum.expect_computes();
    RowReduce mx(4, 50, true);
    mx.schedule(threads);
    mx.expect_computes();
  }
}

TEST(CrossThreadReduction, RowsAlongThreadIdxY) {
  RowReduce m(5, 33);  // 5 rows by 2 a block: the last block's second row is out of range
  m.schedule(8, 2);
  DeviceFunction d = m.lower();
  EXPECT_EQ(d.kernels[0].launch.block, (std::array<int64_t, 3>{8, 2, 1}));
  EXPECT_NE(ir::to_string(d.kernels[0].func.body).find("float32[16] in shared"), std::string::npos);
  m.expect_computes();
}

/// Expects lowering `m` to be refused with a message holding every one of `parts`.
void expect_refused(const RowReduce& m, const std::vector<std::string>& parts) {
  for (const std::string& p : parts) EXPECT_ERROR_CONTAINS(m.lower(), p);
}

TEST(CrossThreadReduction, RefusedSchedules) {
  {
    RowReduce m(3, 10);
    te::Stage st = m.s[m.y];
    st.bind(st.axis(0), te::thread_axis("threadIdx.y"));
    st.bind(st.op()->reduce_axis[0], te::thread_axis("blockIdx.x"));
    expect_refused(m, {"reduction axis 'k' of stage 'y'", "blockIdx.x", "threadIdx"});
  }
  {
    RowReduce m(3, 10);
    te::Stage st = m.s[m.y];
    st.bind(st.axis(0), te::thread_axis("blockIdx.x"));
    st.bind(st.op()->reduce_axis[0], te::thread_axis("vthread"));
    expect_refused(m, {"reduction axis 'k'", "vthread"});
  }
  {
    // A data-parallel loop inside the reduction: each would need its own accumulator.
    RowReduce m(4, 10);
    te::Stage st = m.s[m.y];
    auto [io, ii] = st.split(st.axis(0), ir::Expr(2));
    st.reorder({io, st.op()->reduce_axis[0], ii});
    st.bind(io, te::thread_axis("blockIdx.x"));
    st.bind(st.op()->reduce_axis[0], te::thread_axis("threadIdx.x"));
    expect_refused(m, {"stage 'y'", "'" + ii.var().name() + "'", "reorder it outside"});
  }
}

}  // namespace
}  // namespace kiln::pass
