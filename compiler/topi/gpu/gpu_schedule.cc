#include "compiler/topi/gpu/gpu_schedule.h"

#include "base/error.h"
#include "compiler/topi/template_util.h"

namespace kiln::topi::gpu {

TileShape tile_shape(const space::Config& cfg, const std::vector<std::string>& tiles) {
  TileShape t;
  for (const std::string& name : tiles) {
    const std::vector<int64_t>& f = cfg.split(name);
    t.threads *= f[2];
    t.outputs_per_thread *= f[1] * f[3];
  }
  return t;
}

bool plausible(const space::Config& cfg, const std::vector<std::string>& tiles, int64_t max_threads) {
  TileShape t = tile_shape(cfg, tiles);
  return t.threads >= 32 && t.threads <= max_threads && t.outputs_per_thread <= 64;
}

std::vector<int> fit_threads(const space::ConfigSpace& space, std::vector<int> positions,
                             const std::vector<std::string>& tiles, int64_t max_threads) {
  for (int guard = 0; guard < 64; ++guard) {
    TileShape t = tile_shape(space.from_positions(positions), tiles);
    if (t.threads <= max_threads) break;
    // Halve the widest thread factor, keeping the block's tile: its inner factor doubles.
    size_t widest = 0;
    int64_t widest_threads = 0;
    for (const std::string& name : tiles) {
      int64_t th = space.knob(name).candidates[positions[knob_index(space, name)]][2];
      if (th > widest_threads) widest_threads = th, widest = knob_index(space, name);
    }
    const auto& cands = space.knobs()[widest].candidates;
    const std::vector<int64_t> now = cands[positions[widest]];
    std::vector<int64_t> want = {0, now[1], std::max<int64_t>(1, now[2] / 2), now[3] * 2};
    positions[widest] = nearest_split_position(space, space.knobs()[widest].name, want);
    if (cands[positions[widest]][2] >= widest_threads) {  // no smaller thread factor divides: take 1
      positions[widest] = nearest_split_position(space, space.knobs()[widest].name, {0, now[1], 1, 0});
    }
  }
  return positions;
}

std::array<te::IterVar, 4> split4(te::Stage& stage, const te::IterVar& axis, const std::vector<int64_t>& factors) {
  KILN_ICHECK(factors.size() == 4) << "split4: a 4-part split knob is needed, got " << factors.size() << " parts";
  auto [rest, inner] = stage.split(axis, ir::Expr(factors[3]));
  auto [rest2, thread] = stage.split(rest, ir::Expr(factors[2]));
  auto [block, vthread] = stage.split(rest2, ir::Expr(factors[1]));
  return {block, vthread, thread, inner};
}

void cooperative_fetch(te::Stage& stage, const ThreadAxes& axes, std::array<int64_t, 3> threads) {
  std::vector<te::IterVar> loops = stage->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : stage.fuse(loops);
  const te::IterVar* tags[3] = {&axes.thread_z, &axes.thread_y, &axes.thread_x};
  for (int d = 0; d < 3; ++d) {
    if (threads[d] <= 1) continue;
    auto [outer, inner] = stage.split_nparts(fused, ir::Expr(threads[d]));
    stage.bind(outer, *tags[d]);
    fused = inner;
  }
}

void schedule_injective(te::Schedule& s, const te::Tensor& out, int64_t threads) {
  te::Stage st = s[out];
  std::vector<te::IterVar> loops = st->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : st.fuse(loops);
  auto [block, thread] = st.split(fused, ir::Expr(threads));
  st.bind(block, te::thread_axis("blockIdx.x"));
  st.bind(thread, te::thread_axis("threadIdx.x"));
}

}  // namespace kiln::topi::gpu
