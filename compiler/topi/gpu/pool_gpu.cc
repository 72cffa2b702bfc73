#include "compiler/topi/gpu/pool_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
void check_pool(const te::Tensor& out, const char* who) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute())
      << who << ": '" << out->name() << "' is not an NCHW pooling";
}
}  // namespace

space::ConfigSpace pool2d_gpu_space(const te::Tensor& out) {
  check_pool(out, "pool2d_gpu_space");
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  space.define_knob("unroll", {0, 1});
  return space;
}

space::Config pool2d_gpu_default(const space::ConfigSpace& space, const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  pos[knob_index(space, "unroll")] = knob_position(space, "unroll", 1);
  return space.from_positions(pos);
}

void schedule_pool2d_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                         const te::Tensor& output) {
  check_pool(out, "schedule_pool2d_gpu");
  schedule_thread_per_output(s, out, output, cfg.knob("threads"), cfg.knob("unroll") != 0);
}

}  // namespace kiln::topi::gpu
