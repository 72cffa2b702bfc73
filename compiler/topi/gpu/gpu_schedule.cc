#include "compiler/topi/gpu/gpu_schedule.h"

#include <algorithm>
#include <set>

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

bool plausible(const space::Config& cfg, const std::vector<std::string>& tiles,
               int64_t max_threads) {
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
    if (cands[positions[widest]][2] >=
        widest_threads) {  // no smaller thread factor divides: take 1
      positions[widest] =
          nearest_split_position(space, space.knobs()[widest].name, {0, now[1], 1, 0});
    }
  }
  return positions;
}

std::array<te::IterVar, 4> split4(te::Stage& stage, const te::IterVar& axis,
                                  const std::vector<int64_t>& factors) {
  KILN_ICHECK(factors.size() == 4)
      << "split4: a 4-part split knob is needed, got " << factors.size() << " parts";
  auto [rest, inner] = stage.split(axis, ir::Expr(factors[3]));
  auto [rest2, thread] = stage.split(rest, ir::Expr(factors[2]));
  auto [block, vthread] = stage.split(rest2, ir::Expr(factors[1]));
  return {block, vthread, thread, inner};
}

void cooperative_fetch(te::Stage& stage, const ThreadAxes& axes, std::array<int64_t, 3> threads,
                       int64_t vector) {
  std::vector<te::IterVar> loops = stage->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : stage.fuse(loops);
  if (vector > 1) {
    auto [rest, lanes] = stage.split(fused, ir::Expr(vector));
    stage.vectorize(lanes);
    fused = rest;
  }
  const te::IterVar* tags[3] = {&axes.thread_z, &axes.thread_y, &axes.thread_x};
  for (int d = 2; d >= 0; --d) {
    if (threads[d] <= 1) continue;
    auto [rest, thread] = stage.split(fused, ir::Expr(threads[d]));
    stage.bind(thread, *tags[d]);
    fused = rest;
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

void inline_producers(te::Schedule& s, const te::Tensor& out,
                      const std::function<void(const te::Tensor&)>& on_reduction) {
  std::set<const te::TensorNode*> seen;
  std::vector<te::Tensor> todo = out->inputs();
  while (!todo.empty()) {
    te::Tensor t = todo.back();
    todo.pop_back();
    if (!t->is_compute() || !seen.insert(t.get()).second) continue;
    if (t->reduce_axis.empty()) {
      s[t].compute_inline();
    } else {
      on_reduction(t);
    }
    for (const te::Tensor& in : t->inputs()) todo.push_back(in);
  }
}

void schedule_thread_per_output(te::Schedule& s, const te::Tensor& out, const te::Tensor& output,
                                int64_t threads, bool unroll) {
  std::vector<te::Tensor> reductions;
  inline_producers(s, out, [&](const te::Tensor& t) {
    s[t].set_scope("local");
    reductions.push_back(t);
  });
  te::Tensor acc = out->reduce_axis.empty() ? te::Tensor() : s.cache_write(out, "local");
  te::Stage c = epilogue_stage(s, out, output);
  std::vector<te::IterVar> loops = c->leaf_iter_vars;
  te::IterVar fused = loops.size() == 1 ? loops[0] : c.fuse(loops);
  auto [block, thread] = c.split(fused, ir::Expr(threads));
  c.bind(block, te::thread_axis("blockIdx.x"));
  c.bind(thread, te::thread_axis("threadIdx.x"));
  for (const te::Tensor& r : reductions) s[r].compute_at(c, thread);
  if (!acc.defined()) return;
  te::Stage a = s[acc];
  a.compute_at(c, thread);
  // Unrolled only while the window is small (a 3 x 3 kernel, not a global pool's 56 x 56).
  int64_t window = 1;
  for (const te::IterVar& r : acc->reduce_axis) {
    auto e = ir::as_const_int(r->dom.extent);
    window *= e ? *e : 1 << 20;
  }
  if (unroll && window <= 64) {
    for (size_t i = 0; i < acc->reduce_axis.size(); ++i) a.unroll(a.reduce_axis(i));
  }
}

const std::vector<int64_t>& thread_choices() {
  static const std::vector<int64_t> choices = {32, 64, 128, 256, 512, 1024};
  return choices;
}

int64_t default_threads(const target::Target& target) {
  return target.max_num_threads > 0 ? std::min<int64_t>(256, target.max_num_threads) : 256;
}

}  // namespace kiln::topi::gpu
