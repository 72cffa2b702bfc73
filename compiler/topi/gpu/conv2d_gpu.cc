#include "compiler/topi/gpu/conv2d_gpu.h"

#include "base/error.h"
#include "compiler/topi/gpu/gpu_schedule.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

namespace {
void check_conv(const te::Tensor& out, const char* who) {
  KILN_USER_CHECK(out.ndim() == 4 && out->is_compute() && out->reduce_axis.size() == 3 &&
                  out->inputs().size() == 2)
      << who << ": '" << out->name()
      << "' is not an NCHW convolution with one group (3 reductions)";
}
int64_t reduce_extent(const te::Tensor& out, size_t i) {
  auto e = ir::as_const_int(out->reduce_axis[i]->dom.extent);
  KILN_USER_CHECK(e.has_value()) << "conv2d_nchw_gpu: reduction " << i << " of '" << out->name()
                                 << "' must have a constant extent";
  return *e;
}
}  // namespace

space::ConfigSpace conv2d_nchw_gpu_space(const te::Tensor& out) {
  check_conv(out, "conv2d_nchw_gpu_space");
  space::ConfigSpace space;
  space.define_split("tile_f", const_dim(out, 1, "conv2d_nchw_gpu"), 4);
  space.define_split("tile_y", const_dim(out, 2, "conv2d_nchw_gpu"), 4);
  space.define_split("tile_x", const_dim(out, 3, "conv2d_nchw_gpu"), 4);
  space.define_split("tile_rc", reduce_extent(out, 0), 2);
  space.define_split("tile_ry", reduce_extent(out, 1), 2);
  space.define_split("tile_rx", reduce_extent(out, 2), 2);
  space.define_knob("unroll", {0, 1});
  return space;
}

space::Config conv2d_nchw_gpu_default(const space::ConfigSpace& space,
                                      const target::Target& target) {
  // 8 × 4 × 8 = 256 threads (fewer where the target allows fewer), each two output channels of
  // two rows; 8 input channels and one kernel row per shared-memory step.
  const int64_t tf = target.max_num_threads > 0 && target.max_num_threads < 256 ? 4 : 8;
  std::vector<int> pos(space.knobs().size(), 0);
  pos[knob_index(space, "tile_f")] = nearest_split_position(space, "tile_f", {0, 1, tf, 2});
  pos[knob_index(space, "tile_y")] = nearest_split_position(space, "tile_y", {0, 1, 4, 2});
  pos[knob_index(space, "tile_x")] = nearest_split_position(space, "tile_x", {0, 1, 8, 1});
  pos[knob_index(space, "tile_rc")] = nearest_split_position(space, "tile_rc", {0, 8});
  pos[knob_index(space, "tile_ry")] = nearest_split_position(space, "tile_ry", {0, 1});
  pos[knob_index(space, "tile_rx")] = nearest_split_position(space, "tile_rx", {1, 0});
  pos[knob_index(space, "unroll")] = knob_position(space, "unroll", 1);
  return space.from_positions(
      fit_threads(space, pos, {"tile_f", "tile_y", "tile_x"}, target.max_num_threads));
}

void schedule_conv2d_nchw_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg,
                              const te::Tensor& output) {
  check_conv(out, "schedule_conv2d_nchw_gpu");
  const std::vector<int64_t>& tf = cfg.split("tile_f");
  const std::vector<int64_t>& ty = cfg.split("tile_y");
  const std::vector<int64_t>& tx = cfg.split("tile_x");
  ThreadAxes axes;
  te::Tensor data = out->inputs()[0], kernel = out->inputs()[1];
  if (data->is_compute()) s[data].compute_inline();  // the padding, read through the shared copy
  te::Tensor acc = s.cache_write(out, "local");
  te::Tensor data_shared = s.cache_read(data, "shared", {acc});
  te::Tensor kernel_shared = s.cache_read(kernel, "shared", {acc});

  te::Stage c = epilogue_stage(s, out, output);
  te::IterVar n = c.axis(0);
  auto [bf, vf, thf, fi] = split4(c, c.axis(1), tf);
  auto [by, vy, thy, yi] = split4(c, c.axis(2), ty);
  auto [bx, vx, thx, xi] = split4(c, c.axis(3), tx);
  c.reorder({n, bf, by, bx, vf, vy, vx, thf, thy, thx, fi, yi, xi});
  c.bind(c.fuse(n, bf), axes.block_z);
  c.bind(by, axes.block_y);
  c.bind(bx, axes.block_x);
  c.bind(vf, te::thread_axis("vthread"));
  c.bind(vy, te::thread_axis("vthread"));
  c.bind(vx, te::thread_axis("vthread"));
  c.bind(thf, axes.thread_z);
  c.bind(thy, axes.thread_y);
  c.bind(thx, axes.thread_x);

  te::Stage a = s[acc];
  a.compute_at(c, thx);
  auto [rco, rci] = a.split(a.reduce_axis(0), ir::Expr(cfg.split("tile_rc")[1]));
  auto [ryo, ryi] = a.split(a.reduce_axis(1), ir::Expr(cfg.split("tile_ry")[1]));
  auto [rxo, rxi] = a.split(a.reduce_axis(2), ir::Expr(cfg.split("tile_rx")[1]));
  te::IterVar an = a.axis(0), af = a.axis(1), ay = a.axis(2), ax = a.axis(3);
  a.reorder({rco, ryo, rxo, rci, ryi, rxi, an, af, ay, ax});
  for (const te::Tensor& sh : {data_shared, kernel_shared}) {
    te::Stage st = s[sh];
    st.compute_at(a, rxo);
    cooperative_fetch(st, axes, {tf[2], ty[2], tx[2]});
  }
  // Unrolled only while the body stays small (as in matmul_gpu).
  const int64_t body =
      tile_shape(cfg, {"tile_f", "tile_y", "tile_x"}).outputs_per_thread * cfg.split("tile_rx")[1];
  if (cfg.knob("unroll") && body <= 512) {
    for (const te::IterVar& iv : {rxi, af, ay, ax}) a.unroll(iv);
  }
}

}  // namespace kiln::topi::gpu
