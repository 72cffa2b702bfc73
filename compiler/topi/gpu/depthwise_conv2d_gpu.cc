#include "compiler/topi/gpu/depthwise_conv2d_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
void check_conv(const te::Tensor& out, const char* who) {
  const size_t reductions = out->is_compute() ? out->reduce_axis.size() : 0;
  KILN_USER_CHECK(out.ndim() == 4 && (reductions == 2 || reductions == 3))
      << who << ": '" << out->name() << "' is not a grouped NCHW convolution (2 or 3 reductions)";
}
}  // namespace

space::ConfigSpace depthwise_conv2d_nchw_gpu_space(const te::Tensor& out) {
  check_conv(out, "depthwise_conv2d_nchw_gpu_space");
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  space.define_knob("unroll", {0, 1});
  return space;
}

space::Config depthwise_conv2d_nchw_gpu_default(const space::ConfigSpace& space,
                                                const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  pos[knob_index(space, "unroll")] = knob_position(space, "unroll", 1);
  return space.from_positions(pos);
}

void schedule_depthwise_conv2d_nchw_gpu(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output) {
  check_conv(out, "schedule_depthwise_conv2d_nchw_gpu");
  schedule_thread_per_output(s, out, output, cfg.knob("threads"), cfg.knob("unroll") != 0);
}

}  // namespace kiln::topi::gpu
