#include "compiler/topi/gpu/pool_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/template_util.h"
#include "compiler/topi/workload.h"

namespace kiln::topi::gpu {

namespace {
void check_pool(const te::Tensor& out, const char* who) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute())
      << who << ": '" << out->name() << "' is not an NCHW pooling";
}

bool is_global(const te::Tensor& out) {
  const std::optional<std::string> w = topi::workload_of(out);
  if (!w) return false;
  const std::string compute = topi::Workload::parse(*w).compute;
  return compute == "global_avg_pool2d" || compute == "global_max_pool2d";
}
}  // namespace

space::ConfigSpace pool2d_gpu_space(const te::Tensor& out) {
  check_pool(out, "pool2d_gpu_space");
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  space.define_knob("unroll", {0, 1});
  if (is_global(out)) space.define_knob("block_per_row", {0, 1});
  return space;
}

space::Config pool2d_gpu_default(const space::ConfigSpace& space, const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  pos[knob_index(space, "unroll")] = knob_position(space, "unroll", 1);
  if (pos.size() > 2)
    pos[knob_index(space, "block_per_row")] = knob_position(space, "block_per_row", 1);
  return space.from_positions(pos);
}

void schedule_pool2d_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                         const te::Tensor& output) {
  check_pool(out, "schedule_pool2d_gpu");
  if (is_global(out) && cfg.knob("block_per_row") != 0) {
    schedule_rows(s, output, cfg.knob("threads"), true);
    return;
  }
  schedule_thread_per_output(s, out, output, cfg.knob("threads"), cfg.knob("unroll") != 0);
}

}  // namespace kiln::topi::gpu
