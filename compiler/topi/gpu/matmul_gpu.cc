#include "compiler/topi/gpu/matmul_gpu.h"

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/pass/prefetch_shared.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/gpu/reduce_gpu.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
/// The first of out's row and column axes: 0 for a 2-D product, 1 for a batched one.
size_t check_product(const te::Tensor& out, const char* who) {
  KILN_USER_CHECK((out.ndim() == 2 || out.ndim() == 3) && out->is_compute() &&
                  out->reduce_axis.size() == 1)
      << who << ": '" << out->name() << "' is not a 2-D or batched product with one reduction";
  return out.ndim() - 2;
}
/// Few outputs over a long reduction (a GEMV: a dense layer at batch 1): a block an output, its
/// threads sharing the reduction, keeps more of the device busy than tiles of outputs can.
bool few_outputs(const te::Tensor& out) {
  int64_t outputs = 1;
  for (size_t d = 0; d < out.ndim(); ++d)
    outputs *= ir::as_const_int(out->shape()[d]).value_or(1 << 30);
  return outputs <= 4096 && ir::as_const_int(out->reduce_axis[0]->dom.extent).value_or(0) >= 256;
}
}  // namespace

space::ConfigSpace matmul_gpu_space(const te::Tensor& out) {
  const size_t rows = check_product(out, "matmul_gpu_space");
  auto k = ir::as_const_int(out->reduce_axis[0]->dom.extent);
  KILN_USER_CHECK(k.has_value()) << "matmul_gpu_space: the reduction of '" << out->name()
                                 << "' must have a constant extent";
  space::ConfigSpace space;
  space.define_split("tile_y", const_dim(out, rows, "matmul_gpu"), 4);
  space.define_split("tile_x", const_dim(out, rows + 1, "matmul_gpu"), 4);
  space.define_split("tile_k", *k, 2);
  space.define_knob("unroll", {0, 1});
  space.define_knob("vector", {1, 4});
  space.define_knob("prefetch", {0, 1});
  if (few_outputs(out)) space.define_knob("cross_thread", {0, 1});
  return space;
}

space::Config matmul_gpu_default(const space::ConfigSpace& space, const target::Target& target) {
  // 16×16 threads, each a 2×2 grid of virtual threads over 4×4 outputs: a 128×128 block tile
  // with an 8-deep reduction step, the operands fetched 4 floats at a time (the classic
  // shared-memory SGEMM tiling); fewer threads where the target allows fewer.
  const int64_t t = target.max_num_threads >= 256 ? 16 : 8;
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "tile_y")] = nearest_split_position(space, "tile_y", {0, 2, t, 4});
  pos[knob_index(space, "tile_x")] = nearest_split_position(space, "tile_x", {0, 2, t, 4});
  // Few rows (a batch of 1 through a dense layer, the LSTM's GEMVs): the threads the rows cannot
  // take go along the columns, one column each, so that a block still has t * t threads.
  const int64_t row_threads = space.knob("tile_y").candidates[pos[knob_index(space, "tile_y")]][2];
  if (row_threads < t) {
    pos[knob_index(space, "tile_x")] =
        nearest_split_position(space, "tile_x", {0, 1, t * t / row_threads, 1});
  }
  pos[knob_index(space, "tile_k")] = nearest_split_position(space, "tile_k", {0, 8});
  pos[knob_index(space, "unroll")] = knob_position(space, "unroll", 1);
  pos[knob_index(space, "vector")] = knob_position(space, "vector", 4);
  pos[knob_index(space, "prefetch")] = knob_position(space, "prefetch", 1);
  if (pos.size() > 6)
    pos[knob_index(space, "cross_thread")] = knob_position(space, "cross_thread", 1);
  return space.from_positions(
      fit_threads(space, pos, {"tile_y", "tile_x"}, target.max_num_threads));
}

void schedule_matmul_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                         const te::Tensor& output) {
  const size_t row_axis = check_product(out, "schedule_matmul_gpu");
  if (few_outputs(out) && cfg.knob("cross_thread") != 0) {
    // The product a kernel of a block an output (a cross-thread reduction), the epilogue another.
    const int64_t threads = 256;
    schedule_row_reduction(s[out], threads);
    if (output.get() != out.get()) schedule_injective(s, output, threads);
    return;
  }
  const std::vector<int64_t>& ty = cfg.split("tile_y");
  const std::vector<int64_t>& tx = cfg.split("tile_x");
  ThreadAxes axes;
  std::vector<te::Tensor> operands = out->inputs();
  te::Tensor acc = s.cache_write(out, "local");
  std::vector<te::Tensor> shared, local;
  for (const te::Tensor& in : operands) {
    te::Tensor sh = s.cache_read(in, "shared", {acc});
    shared.push_back(sh);
    local.push_back(s.cache_read(sh, "local", {acc}));
  }
  te::Stage c = epilogue_stage(s, out, output);
  auto [by, vy, thy, yi] = split4(c, c.axis(row_axis), ty);
  auto [bx, vx, thx, xi] = split4(c, c.axis(row_axis + 1), tx);
  c.reorder({by, bx, vy, vx, thy, thx, yi, xi});
  if (row_axis == 1) c.bind(c.axis(0), axes.block_z);  // a batch a block row
  c.bind(by, axes.block_y);
  c.bind(bx, axes.block_x);
  c.bind(vy, te::thread_axis("vthread"));
  c.bind(vx, te::thread_axis("vthread"));
  c.bind(thy, axes.thread_y);
  c.bind(thx, axes.thread_x);

  te::Stage a = s[acc];
  a.compute_at(c, thx);
  auto [ko, ki] = a.split(a.reduce_axis(0), ir::Expr(cfg.split("tile_k")[1]));
  te::IterVar ay = a.axis(row_axis), ax = a.axis(row_axis + 1);
  a.reorder({ko, ki, ay, ax});
  // The copies' rows are a reduction step or a block's rows or columns: vectors where all divide.
  const int64_t step = cfg.split("tile_k")[1], rows = ty[1] * ty[2] * ty[3],
                cols = tx[1] * tx[2] * tx[3];
  int64_t vector = cfg.knob("vector");
  if (step % vector || rows % vector || cols % vector) vector = 1;
  for (const te::Tensor& sh : shared) {
    te::Stage st = s[sh];
    st.compute_at(a, ko);
    cooperative_fetch(st, axes, {1, ty[2], tx[2]}, vector);
  }
  for (const te::Tensor& lo : local) s[lo].compute_at(a, ki);
  // The next step's tiles loaded into registers while this one computes (pass::prefetch_shared).
  if (cfg.knob("prefetch")) a.pragma(ko, pass::kPrefetchPragma, ir::Expr(1));
  // A local copy whose rows run along the output's columns (matmul's B: B[k, j]) reads inner_x
  // consecutive floats of its shared tile a thread: one vector load where they fit.
  const ir::Var j = out->axis[1].var();
  for (size_t i = 0; i < operands.size(); ++i) {
    bool along_columns = false;
    ir::post_order_visit(out->body, [&](const ir::Object* n) {
      auto load = dynamic_cast<const ir::ProducerLoadNode*>(n);
      if (load && load->producer.get() == operands[i].get()) {
        along_columns = load->indices.back().same_as(j);
      }
    });
    te::Stage st = s[local[i]];
    if (along_columns && vector > 1 && tx[3] % vector == 0) st.vectorize(st->leaf_iter_vars.back());
  }
  // Unrolled only while the body stays small: a thread with hundreds of outputs unrolled over the
  // reduction step is code no compiler digests quickly.
  if (cfg.knob("unroll") &&
      tile_shape(cfg, {"tile_y", "tile_x"}).outputs_per_thread * cfg.split("tile_k")[1] <= 1024) {
    a.unroll(ki);
    a.unroll(ay);
    a.unroll(ax);
  }
}

}  // namespace kiln::topi::gpu
