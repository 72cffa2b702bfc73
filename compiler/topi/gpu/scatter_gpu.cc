// One thread per element for gathers and for a scatter's reduction over its updates.
#include "compiler/topi/gpu/scatter_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/scatter.h"

namespace kiln::topi::gpu {

void schedule_gather_nd_gpu(te::Schedule& s, const te::Tensor& out, int64_t threads) {
  schedule_injective(s, out, threads);
}

void schedule_scatter_gpu(te::Schedule& s, const te::Tensor& out, int64_t threads) {
  const te::Tensor stage = scatter_stage(out);
  KILN_USER_CHECK(stage.defined()) << "schedule_scatter_gpu: '" << out->name()
                                   << "' is not the output of scatter_elements or scatter_nd";
  schedule_thread_per_output(s, stage, stage, threads, /*unroll=*/false);
  if (stage != out) schedule_injective(s, out, threads);
}

}  // namespace kiln::topi::gpu
