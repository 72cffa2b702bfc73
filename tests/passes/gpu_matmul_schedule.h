// The paper's shared-memory tiled matmul for GPUs (§4.2, Fig. 7), C[i, j] = sum_k A[i, k]*B[k, j]:
// each block computes a `block` x `block` tile of C with `threads` x `threads` threads, each thread
// a register tile held in C.local; every step of the reduction's outer loop the block's threads
// fetch the A and B tiles it needs into shared memory together (cooperative fetching, the copy
// split and bound to the same threadIdx axes), and each thread reads them through local copies.
// With `vthreads` > 1, each thread's tile is split over vthreads x vthreads virtual threads
// (strided, as in TVM's GEMM tutorial). `vectorize_fetch` vectorizes the inner axis of each
// thread's slice of the cooperative fetch. `prefetch` marks the reduction's outer loop for
// pass::prefetch_shared.
#pragma once

#include "compiler/pass/prefetch_shared.h"
#include "compiler/te/schedule.h"
#include "compiler/te/tensor.h"

namespace kiln::pass::testing {

struct GpuMatmul {
  te::Tensor A, B, C;
  te::Schedule s;

  GpuMatmul(int n, int block, int threads, int k_tile, int vthreads = 1,
            bool vectorize_fetch = false, bool prefetch = false) {
    A = te::placeholder({n, n}, ir::kFloat32, "A");
    B = te::placeholder({n, n}, ir::kFloat32, "B");
    ir::IterVar k = te::reduce_axis({0, n}, "k");
    C = te::compute({n, n}, [&](ir::Var i, ir::Var j) { return te::sum(A(i, k) * B(k, j), {k}); },
                    "C", {"i", "j"});
    s = te::create_schedule({C});
    te::Tensor CL = s.cache_write(C, "local");
    te::Tensor AA = s.cache_read(A, "shared", {CL});
    te::Tensor BB = s.cache_read(B, "shared", {CL});
    te::Tensor AL = s.cache_read(AA, "local", {CL});
    te::Tensor BL = s.cache_read(BB, "local", {CL});

    ir::IterVar block_y = te::thread_axis("blockIdx.y"), block_x = te::thread_axis("blockIdx.x");
    ir::IterVar thread_y = te::thread_axis("threadIdx.y", threads);
    ir::IterVar thread_x = te::thread_axis("threadIdx.x", threads);

    te::Stage sc = s[C];
    auto [by, yi] = sc.split(sc.axis(0), block);
    auto [bx, xi] = sc.split(sc.axis(1), block);
    sc.bind(by, block_y);
    sc.bind(bx, block_x);
    ir::IterVar attach;
    if (vthreads > 1) {
      auto [vy, yi2] = sc.split_nparts(yi, vthreads);
      auto [vx, xi2] = sc.split_nparts(xi, vthreads);
      auto [ty, yii] = sc.split_nparts(yi2, threads);
      auto [tx, xii] = sc.split_nparts(xi2, threads);
      sc.reorder({by, bx, vy, vx, ty, tx, yii, xii});
      sc.bind(vy, te::thread_axis("vthread", vthreads));
      sc.bind(vx, te::thread_axis("vthread", vthreads));
      sc.bind(ty, thread_y);
      sc.bind(tx, thread_x);
      attach = tx;
    } else {
      auto [ty, yii] = sc.split_nparts(yi, threads);
      auto [tx, xii] = sc.split_nparts(xi, threads);
      sc.reorder({by, bx, ty, tx, yii, xii});
      sc.bind(ty, thread_y);
      sc.bind(tx, thread_x);
      attach = tx;
    }

    te::Stage scl = s[CL];
    scl.compute_at(sc, attach);
    auto [ko, ki] = scl.split(scl.reduce_axis(0), k_tile);
    scl.reorder({ko, ki, scl.axis(0), scl.axis(1)});
    if (prefetch) scl.pragma(ko, pass::kPrefetchPragma, ir::Expr(1));
    s[AA].compute_at(scl, ko);
    s[BB].compute_at(scl, ko);
    s[AL].compute_at(scl, ki);
    s[BL].compute_at(scl, ki);

    // Cooperative fetching: the block's threads copy the shared tiles together.
    for (const te::Tensor& shared : {AA, BB}) {
      te::Stage st = s[shared];
      auto [fy, fyi] = st.split_nparts(st.axis(0), threads);
      auto [fx, fxi] = st.split_nparts(st.axis(1), threads);
      st.reorder({fy, fx, fyi, fxi});
      st.bind(fy, thread_y);
      st.bind(fx, thread_x);
      if (vectorize_fetch) st.vectorize(fxi);
    }
  }
};

}  // namespace kiln::pass::testing
