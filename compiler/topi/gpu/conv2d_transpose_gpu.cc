#include "compiler/topi/gpu/conv2d_transpose_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
/// The GEMM stage the gather `out` reads.
te::Tensor gemm_of(const te::Tensor& out, const char* who) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute() && out->reduce_axis.empty() &&
                  out->inputs().size() == 1 && out->inputs()[0]->is_compute() &&
                  out->inputs()[0]->reduce_axis.size() == 1)
      << who << ": '" << out->name() << "' is not a transposed convolution (a GEMM and a gather)";
  return out->inputs()[0];
}
}  // namespace

space::ConfigSpace conv2d_transpose_nchw_gpu_space(const te::Tensor& out) {
  gemm_of(out, "conv2d_transpose_nchw_gpu_space");
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  space.define_knob("gather_threads", thread_choices());
  return space;
}

space::Config conv2d_transpose_nchw_gpu_default(const space::ConfigSpace& space,
                                                const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  pos[knob_index(space, "gather_threads")] =
      knob_position(space, "gather_threads", default_threads(target));
  return space.from_positions(pos);
}

void schedule_conv2d_transpose_nchw_gpu(te::Schedule& s, const te::Tensor& out,
                                        const space::Config& cfg, const te::Tensor& output) {
  const te::Tensor col = gemm_of(out, "schedule_conv2d_transpose_nchw_gpu");
  schedule_thread_per_output(s, col, col, cfg.knob("threads"), false);
  if (output.defined() && output != out) s[out].compute_inline();
  schedule_injective(s, output.defined() ? output : out, cfg.knob("gather_threads"));
}

}  // namespace kiln::topi::gpu
