#include "compiler/topi/gpu/lstm_gpu.h"

#include "compiler/topi/gpu/gpu_schedule.h"

namespace kiln::topi::gpu {

void schedule_lstm_gpu(te::Schedule& s, const LstmOutputs& out, const target::Target& target,
                       const ProductSchedule& product) {
  for (const te::Tensor& v : out.views) s[v].compute_inline();
  std::vector<te::Tensor> stages(out.stages);
  stages.insert(stages.end(), {out.y, out.y_h, out.y_c});
  for (const te::Tensor& t : stages) {
    if (s[t]->attach_type != te::AttachType::kRoot) continue;
    if (!t->reduce_axis.empty()) {
      product(s, t);
    } else {
      schedule_injective(s, t, default_threads(target));
    }
  }
}

}  // namespace kiln::topi::gpu
