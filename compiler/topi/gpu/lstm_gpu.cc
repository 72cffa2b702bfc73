#include "compiler/topi/gpu/lstm_gpu.h"

#include "compiler/topi/gpu/gpu_schedule.h"

namespace kiln::topi::gpu {

void schedule_lstm_gpu(te::Schedule& s, const LstmOutputs& out, const target::Target& target,
                       const ProductSchedule& product) {
  const int64_t threads = default_threads(target);
  schedule_lstm_stages(s, out, product, [threads](te::Schedule& sch, const te::Tensor& t) {
    schedule_injective(sch, t, threads);
  });
}

}  // namespace kiln::topi::gpu
