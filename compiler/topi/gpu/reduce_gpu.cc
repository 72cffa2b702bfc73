#include "compiler/topi/gpu/reduce_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
/// Stage `st` as one kernel: its output axes fused and split into blocks of `threads` threads,
/// its reduction loops (if any) serial inside each thread.
void thread_per_element(te::Stage st, int64_t threads) {
  std::vector<te::IterVar> axes;
  for (size_t i = 0; i < st.op().ndim(); ++i) axes.push_back(st.axis(i));
  KILN_USER_CHECK(!axes.empty()) << "reduce_gpu: '" << st.op()->name()
                                 << "' is a scalar, which has no elements to give threads";
  te::IterVar fused = axes.size() == 1 ? axes[0] : st.fuse(axes);
  auto [block, thread] = st.split(fused, ir::Expr(threads));
  st.bind(block, te::thread_axis("blockIdx.x"));
  st.bind(thread, te::thread_axis("threadIdx.x"));
}
}  // namespace

space::ConfigSpace reduce_gpu_space(const te::Tensor& out) {
  KILN_USER_CHECK(out->is_compute() && out.ndim() >= 1)
      << "reduce_gpu_space: '" << out->name() << "' is not a computed tensor";
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  return space;
}

space::Config reduce_gpu_default(const space::ConfigSpace& space, const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  return space.from_positions(pos);
}

void schedule_reduce_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg) {
  const int64_t threads = cfg.knob("threads");
  inline_producers(s, out, [&](const te::Tensor& t) { thread_per_element(s[t], threads); });
  thread_per_element(s[out], threads);
}

}  // namespace kiln::topi::gpu
