#include "compiler/topi/gpu/gpu_schedule.h"

#include "base/error.h"

namespace kiln::topi::gpu {

std::array<te::IterVar, 4> split4(te::Stage& stage, const te::IterVar& axis, const std::vector<int64_t>& factors) {
  KILN_ICHECK(factors.size() == 4) << "split4: a 4-part split knob is needed, got " << factors.size() << " parts";
  auto [rest, inner] = stage.split(axis, ir::Expr(factors[3]));
  auto [rest2, thread] = stage.split(rest, ir::Expr(factors[2]));
  auto [block, vthread] = stage.split(rest2, ir::Expr(factors[1]));
  return {block, vthread, thread, inner};
}

void cooperative_fetch(te::Stage& stage, const ThreadAxes& axes, std::array<int64_t, 3> threads) {
  std::vector<te::IterVar> loops = stage->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : stage.fuse(loops);
  const te::IterVar* tags[3] = {&axes.thread_z, &axes.thread_y, &axes.thread_x};
  for (int d = 0; d < 3; ++d) {
    if (threads[d] <= 1) continue;
    auto [outer, inner] = stage.split_nparts(fused, ir::Expr(threads[d]));
    stage.bind(outer, *tags[d]);
    fused = inner;
  }
}

void schedule_injective(te::Schedule& s, const te::Tensor& out, int64_t threads) {
  te::Stage st = s[out];
  std::vector<te::IterVar> loops = st->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : st.fuse(loops);
  auto [block, thread] = st.split(fused, ir::Expr(threads));
  st.bind(block, te::thread_axis("blockIdx.x"));
  st.bind(thread, te::thread_axis("threadIdx.x"));
}

}  // namespace kiln::topi::gpu
