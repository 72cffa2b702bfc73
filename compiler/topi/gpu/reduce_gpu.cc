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
int64_t product(const std::vector<te::IterVar>& axes) {
  int64_t n = 1;
  for (const te::IterVar& a : axes) n *= ir::as_const_int(a->dom.extent).value_or(1);
  return n;
}

/// A block a row pays off when rows are long and too few to fill the device one thread a row.
bool wants_block_per_row(const te::Tensor& t) {
  if (t->reduce_axis.empty() || t.ndim() == 0) return false;
  return product(t->reduce_axis) >= 32 && product(t->axis) < 8192;
}

/// The block's threads for a row of `n`: the knob's, but no more than the row can use.
int64_t row_threads(int64_t knob, int64_t n) {
  int64_t t = 32;
  while (t < knob && t < n) t *= 2;
  return t;
}

/// A reduction stage in the form that suits it: a block a row where that pays and is allowed,
/// else a thread a row.
void schedule_reduction_stage(te::Stage st, int64_t threads, bool block_per_row) {
  if (block_per_row && wants_block_per_row(st.op())) {
    schedule_row_reduction(st, threads);
  } else {
    thread_per_element(st, threads);
  }
}
}  // namespace

space::ConfigSpace reduce_gpu_space(const te::Tensor& out) {
  KILN_USER_CHECK(out->is_compute() && out.ndim() >= 1)
      << "reduce_gpu_space: '" << out->name() << "' is not a computed tensor";
  space::ConfigSpace space;
  space.define_knob("threads", thread_choices());
  space.define_knob("block_per_row", {0, 1});
  return space;
}

space::Config reduce_gpu_default(const space::ConfigSpace& space, const target::Target& target) {
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "threads")] = knob_position(space, "threads", default_threads(target));
  pos[knob_index(space, "block_per_row")] = knob_position(space, "block_per_row", 1);
  return space.from_positions(pos);
}

// Its output axes fused over the blocks, its reduction axes fused and split so that the block's
// threads read consecutive elements and combine their partial results in shared memory (a
// cross-thread reduction).
void schedule_row_reduction(te::Stage st, int64_t threads) {
  std::vector<te::IterVar> axes, reduce;
  for (size_t i = 0; i < st.op().ndim(); ++i) axes.push_back(st.axis(i));
  for (const te::IterVar& r : st.op()->reduce_axis) reduce.push_back(r);
  te::IterVar row = axes.size() == 1 ? axes[0] : st.fuse(axes);
  te::IterVar k = reduce.size() == 1 ? reduce[0] : st.fuse(reduce);
  auto [outer, inner] = st.split(k, ir::Expr(row_threads(threads, product(st.op()->reduce_axis))));
  st.bind(row, te::thread_axis("blockIdx.x"));
  st.bind(inner, te::thread_axis("threadIdx.x"));
}

void schedule_rows(te::Schedule& s, const te::Tensor& output, int64_t threads, bool block_per_row) {
  auto schedule = [&](const te::Tensor& t) {
    schedule_reduction_stage(s[t], threads, block_per_row);
  };
  inline_producers(s, output, schedule);
  schedule(output);
}

void schedule_reductions_and_outputs(te::Schedule& s, const std::vector<te::Tensor>& outputs,
                                     int64_t threads) {
  for (te::Stage st : s->stages) {
    if (st->is_placeholder()) continue;
    const te::Tensor& t = st->op;
    bool output = false;
    for (const te::Tensor& o : outputs) output |= st->origin_op == o || t == o;
    if (!t->reduce_axis.empty() || output) {
      schedule_reduction_stage(st, threads, true);  // a pure output: one thread an element
    } else {
      st.compute_inline();
    }
  }
}

void schedule_reduce_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg) {
  schedule_rows(s, out, cfg.knob("threads"), cfg.knob("block_per_row") != 0);
}

}  // namespace kiln::topi::gpu
