// The int8 kernels (topi/conv2d_int8.h, topi/dense_int8.h) at their default configs, untuned,
// and with --tune N the convolutions tuned, against oneDNN's u8 x s8 -> s32 primitives, in the
// same process and run, at 1 and 2 threads:
//   case=int8_<layer>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> fp32_kiln_ms=<f>
//        int8_speedup=<f/x> best_round_ratio=<the rounds' best medians' ratio> load=<l>
//   case=int8_<layer>_tuned_t<threads> kiln_ms=<t> ref_ms=<y> ratio=<y/t> default_ms=<x>
//        tuning_gain=<x/t> best_round_ratio=<r> load=<l>                       (--tune)
//   case=int8_conv_geomean_t<threads> ratio=<geometric mean of the layers' ratios> layers=<n>
//   case=int8_conv_tuned_geomean_t<threads> ratio=<...> best_round_ratio=<...> layers=<n> (--tune)
//   case=int8_bert_<K>x<N>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> best_round_ratio=<r>
//        load=<l>
//   case=int8_bert_geomean_t<threads> ratio=<...>
// The layers are ResNet-18's twelve convolutions (bench/resnet_layers.h; batch 1, padding k/2);
// fp32_kiln_ms is Kiln's fp32 NCHW[x]c kernel of the same layer at its template's default, for the
// int8 / fp32 speedup. BERT-base's linear layers are M = 128 rows by (K, N) = (768, 768),
// (768, 3072) and (3072, 768), a constant weight.
//
// Kiln: conv2d_nchwc_int8 over data already blocked [1, C/cb, H, W, cb] (cb: --ic-block, 16 by
// default; 4 for C1's 3 channels, zeros past them: a zero weight for the fourth) and weights
// packed [OC/16, C/cb, K, K, cb/4, 16, 4]; dense_int8 over rows [M, K] and a weight packed
// [N/16, K/4, 16, 4]: the layouts a graph keeps between layers and packs at build time. oneDNN
// (libdnnl 2.6): convolution_forward (forward_inference, convolution_direct) and matmul with u8
// src, s8 weights and s32 dst, memory descriptors of format `any` for the convolution (its own
// blocked layouts; plain rows for the matmul's src and dst, its weight `any`), inputs reordered
// into them once, outside the timing. Every output is checked against naive int32 loops, exactly,
// before timing. Timing as bench_conv: interleaved medians over --min-time seconds
// (bench/interleaved_timing.h). On a loaded machine (load= well above the thread count) the
// two-thread figures are disturbed, oneDNN's OpenMP barriers worst (ms-long stalls).
//
// --tune N: each layer's conv2d_nchwc_int8_x86 task is tuned up to N trials into a record log of
// this benchmark's own (--records DIR, default build/release/bench-results/int8-layers; with N
// records already there this measures nothing), as `kiln tune --threads 1` tunes a model: the
// template's default measured first, then the xgb explorer, single-thread measurements, the
// earlier layers' records warm-starting the model. The tuned kernel is the fastest here (one
// thread, 0.2 s each, in turns) of the log's five best configs and the default (the tuner
// measures each config once; the highest of N noisy measurements favours a lucky one); it is timed
// in turns with the default, oneDNN and the fp32 kernel, so the untuned and tuned lines of a layer
// come from one timing. stderr names the tuned config and the default of each layer. Measured
// (Zen 5, 2 cores at a load of 6-10, 40 trials): tuning gains at most 1-3% over the defaults
// (tuned geomean 0.98 of oneDNN at one thread, as untuned; C1 0.87, the 3x3s 0.86-0.96, the 1x1s
// 1.05-1.24); most of the tuner's measurements there are marked contended. At that load Kiln's
// two-thread times equal its one-thread ones (its pool's second thread gets no core) while
// oneDNN's spinning OpenMP threads hold one (0.5x, or a 10-30 ms stall): the two-thread ratios
// need an idle machine.
//
//   bench_int8_layers [--layers C1,C2,...] [--threads 1,2] [--min-time S] [--ic-block B]
//                     [--tune N] [--records DIR] [--no-bert]
//                     [--asm DIR]   (DIR/<layer>.s: the int8 kernel's assembly; the tuned one
//                                    with --tune)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/cli.h"
#include "bench/interleaved_timing.h"
#include "bench/onednn_conv.h"
#include "bench/resnet_layers.h"
#include "compiler/autotune/task.h"
#include "compiler/autotune/tuner.h"
#include "compiler/codegen/build.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/dense_int8.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"
#include "records/record_log.h"

namespace {

using kiln::bench::ConvLayer;
using kiln::bench::OnednnConv;
using kiln::runtime::NDArray;

constexpr const char* kTarget = "llvm -mcpu=native";

template <typename T>
std::vector<T> random_ints(size_t n, int lo, int hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (T& e : v) e = static_cast<T>(d(rng));
  return v;
}

/// A layer's int8 operands in plain layouts (NCHW, OIHW) and the naive int32 result.
struct PlainInt8 {
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
  std::vector<int32_t> ref;  ///< [OC, OH, OW]
};

PlainInt8 make_plain(const ConvLayer& l) {
  PlainInt8 p;
  p.x = random_ints<uint8_t>(size_t(l.ic) * l.hw * l.hw, 0, 255, 42);
  p.w = random_ints<int8_t>(size_t(l.oc) * l.ic * l.k * l.k, -128, 127, 43);
  const int oh = l.out_hw(), pad = l.pad();
  p.ref.assign(size_t(l.oc) * oh * oh, 0);
  for (int o = 0; o < l.oc; ++o)
    for (int c = 0; c < l.ic; ++c)
      for (int kh = 0; kh < l.k; ++kh)
        for (int kw = 0; kw < l.k; ++kw) {
          const int32_t wv = p.w[((size_t(o) * l.ic + c) * l.k + kh) * l.k + kw];
          for (int y = 0; y < oh; ++y) {
            const int iy = y * l.stride + kh - pad;
            if (iy < 0 || iy >= l.hw) continue;
            const uint8_t* row = &p.x[(size_t(c) * l.hw + iy) * l.hw];
            int32_t* out = &p.ref[(size_t(o) * oh + y) * oh];
            for (int xo = 0; xo < oh; ++xo) {
              const int ix = xo * l.stride + kw - pad;
              if (ix >= 0 && ix < l.hw) out[xo] += wv * int32_t{row[ix]};
            }
          }
        }
  return p;
}

/// A compiled kernel and its arguments (arrays[order[i]] is its argument i).
struct Kernel {
  kiln::runtime::Module mod;
  kiln::runtime::Function f;
  std::vector<NDArray> arrays;
  std::vector<int> order{0, 1, 2};
  void run() { f(arrays[order[0]], arrays[order[1]], arrays[order[2]]); }
  void set(NDArray a, NDArray b, NDArray c) {
    arrays.clear();
    arrays.push_back(std::move(a));
    arrays.push_back(std::move(b));
    arrays.push_back(std::move(c));
  }
};

/// Input channels per block of the int8 data of `l`: `ic_block`, or for fewer channels than
/// that (C1's 3) the channels rounded up to the 4 of a vpdpbusd group, zeros past them.
int channel_block(const ConvLayer& l, int ic_block) {
  return l.ic < ic_block ? (l.ic + 3) / 4 * 4 : ic_block;
}

/// The layer's conv2d_nchwc_int8_x86 task: data "data" [1, C/cb, H, W, cb], weights "kernel"
/// [OC/16, C/cb, K, K, cb/4, 16, 4].
kiln::autotune::Task int8_task(const ConvLayer& l, int ic_block) {
  using namespace kiln;
  const int cb = channel_block(l, ic_block);
  const int cblocks = (l.ic + cb - 1) / cb, ob = l.oc / topi::kInt8OutBlock;
  te::Tensor data = te::placeholder({1, cblocks, l.hw, l.hw, cb}, ir::DataType::UInt(8), "data");
  te::Tensor kernel = te::placeholder({ob, cblocks, l.k, l.k, cb / 4, 16, 4}, ir::kInt8, "kernel");
  const int pad = l.pad();
  return autotune::Task::make(
      "conv2d_nchwc_int8_x86",
      topi::conv2d_nchwc_int8(data, kernel, {l.stride, l.stride}, {pad, pad, pad, pad}), kTarget);
}

/// Kiln's int8 convolution of `l` (the layer's `task` at `ic_block`) at `cfg`; `mismatches` counts
/// wrong outputs; with `asm_path`, its assembly written there.
Kernel build_int8_conv(const ConvLayer& l, const PlainInt8& p, int ic_block,
                       const kiln::autotune::Task& task, const kiln::space::Config& cfg,
                       const std::string& asm_path, int64_t* mismatches) {
  using namespace kiln;
  const int cb = channel_block(l, ic_block);
  const int cblocks = (l.ic + cb - 1) / cb, ob = l.oc / topi::kInt8OutBlock, oh = l.out_hw();
  const te::Schedule s = task.schedule(cfg);
  Kernel k;
  k.mod = compiler::build(s, task.args(), kTarget, "conv_int8");
  k.f = k.mod.function("conv_int8");
  if (!asm_path.empty()) {
    const std::string text = codegen::emit_assembly({compiler::lower(s, task.args(), "conv_int8")},
                                                    target::Target::parse(kTarget));
    if (FILE* f = std::fopen(asm_path.c_str(), "w")) {
      std::fwrite(text.data(), 1, text.size(), f);
      std::fclose(f);
    }
  }
  NDArray d = NDArray::empty({1, cblocks, l.hw, l.hw, cb}, runtime::kUInt8);
  NDArray w = NDArray::empty({ob, cblocks, l.k, l.k, cb / 4, 16, 4}, runtime::kInt8);
  NDArray o = NDArray::empty({1, ob, oh, oh, 16}, runtime::kInt32);
  uint8_t* dp = d.data<uint8_t>();
  const size_t plane = size_t(l.hw) * l.hw;
  for (int c = 0; c < cblocks * cb; ++c)
    for (size_t i = 0; i < plane; ++i)
      dp[(size_t(c / cb) * plane + i) * cb + c % cb] = c < l.ic ? p.x[c * plane + i] : 0;
  int8_t* wp = w.data<int8_t>();
  for (int f = 0; f < l.oc; ++f)
    for (int c = 0; c < cblocks * cb; ++c)
      for (int kk = 0; kk < l.k * l.k; ++kk) {
        const size_t at =
            ((((size_t(f / 16) * cblocks + c / cb) * l.k * l.k + kk) * (cb / 4) + (c % cb) / 4) *
                 16 +
             f % 16) *
                4 +
            c % 4;
        wp[at] = c < l.ic ? p.w[(size_t(f) * l.ic + c) * l.k * l.k + kk] : 0;
      }
  k.set(std::move(d), std::move(w), std::move(o));
  k.order.clear();
  for (const te::Tensor& t : task.args()) {
    k.order.push_back(t->name() == "data" ? 0 : t->name() == "kernel" ? 1 : 2);
  }
  k.run();
  const int32_t* r = k.arrays[2].data<int32_t>();
  *mismatches = 0;
  for (int f = 0; f < l.oc; ++f)
    for (int i = 0; i < oh * oh; ++i)
      *mismatches +=
          r[(size_t(f / 16) * oh * oh + i) * 16 + f % 16] != p.ref[size_t(f) * oh * oh + i];
  return k;
}

/// Kiln's fp32 NCHW[x]c convolution of `l` at its template's default (random data: timing only).
Kernel build_fp32_conv(const ConvLayer& l) {
  using namespace kiln;
  const autotune::Task task = bench::layer_task(l);
  Kernel k;
  k.mod = compiler::build(task.schedule(task.default_config), task.args(), kTarget, "conv_fp32");
  k.f = k.mod.function("conv_fp32");
  const int ib = l.ib(), ob = l.ob(), oh = l.out_hw();
  const size_t data_n = size_t(l.ic) * l.hw * l.hw, kernel_n = size_t(l.oc) * l.ic * l.k * l.k;
  std::vector<float> dv(data_n), kv(kernel_n);
  for (size_t i = 0; i < data_n; ++i) dv[i] = float(i % 7) * 0.1f;
  for (size_t i = 0; i < kernel_n; ++i) kv[i] = float(i % 5) * 0.1f;
  k.set(NDArray::from_vector(dv, {1, l.ic / ib, l.hw, l.hw, ib}),
        NDArray::from_vector(kv, {l.oc / ob, l.ic / ib, l.k, l.k, ib, ob}),
        NDArray::empty({1, l.oc / ob, oh, oh, ob}, runtime::kFloat32));
  k.order.clear();
  for (const te::Tensor& t : task.args()) {
    k.order.push_back(t->name() == "data" ? 0 : t->name() == "kernel" ? 1 : 2);
  }
  k.run();
  return k;
}

/// oneDNN's u8 x s8 -> s32 convolution, its output checked against the naive one.
struct DnnlConv : OnednnConv<uint8_t, int8_t, int32_t> {
  int64_t mismatches = 0;
  DnnlConv(const ConvLayer& l, const PlainInt8& p, int threads) : OnednnConv(l, p.x, p.w, threads) {
    for (size_t i = 0; i < output.size(); ++i) mismatches += output[i] != p.ref[i];
  }
};

/// One linear layer: x u8 [M, K], w s8 [K, N], the naive int32 product.
struct Linear {
  int m, k, n;
  std::vector<uint8_t> x;
  std::vector<int8_t> w;
  std::vector<int32_t> ref;
};

Linear make_linear(int m, int k, int n) {
  Linear p{m,
           k,
           n,
           random_ints<uint8_t>(size_t(m) * k, 0, 255, 7),
           random_ints<int8_t>(size_t(k) * n, -128, 127, 8),
           std::vector<int32_t>(size_t(m) * n)};
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk) {
      const int32_t a = p.x[size_t(i) * k + kk];
      const int8_t* wr = &p.w[size_t(kk) * n];
      int32_t* out = &p.ref[size_t(i) * n];
      for (int j = 0; j < n; ++j) out[j] += a * wr[j];
    }
  return p;
}

Kernel build_int8_dense(const Linear& p, int64_t* mismatches) {
  using namespace kiln;
  te::Tensor x = te::placeholder({p.m, p.k}, ir::DataType::UInt(8), "x");
  te::Tensor w = te::placeholder({p.n / 16, p.k / 4, 16, 4}, ir::kInt8, "w");
  te::Tensor out = topi::dense_int8(x, w);
  const space::ConfigSpace space = topi::dense_int8_x86_space(out);
  const space::Config cfg =
      topi::dense_int8_x86_default(out, space, target::Target::parse(kTarget));
  te::Schedule s = te::create_schedule({out});
  topi::schedule_dense_int8_x86(s, out, cfg, out);
  Kernel k;
  k.mod = compiler::build(s, {x, w, out}, kTarget, "dense_int8");
  k.f = k.mod.function("dense_int8");
  NDArray xa = NDArray::from_vector(p.x, {p.m, p.k});
  NDArray wa = NDArray::empty({p.n / 16, p.k / 4, 16, 4}, runtime::kInt8);
  int8_t* wp = wa.data<int8_t>();
  for (int kk = 0; kk < p.k; ++kk)
    for (int j = 0; j < p.n; ++j)
      wp[((size_t(j / 16) * (p.k / 4) + kk / 4) * 16 + j % 16) * 4 + kk % 4] =
          p.w[size_t(kk) * p.n + j];
  k.set(std::move(xa), std::move(wa), NDArray::empty({p.m, p.n}, runtime::kInt32));
  k.run();
  const int32_t* r = k.arrays[2].data<int32_t>();
  *mismatches = 0;
  for (size_t i = 0; i < p.ref.size(); ++i) *mismatches += r[i] != p.ref[i];
  return k;
}

/// oneDNN's u8 x s8 -> s32 matmul, its weight in its own layout, checked.
struct DnnlMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  dnnl::matmul mm;
  std::unordered_map<int, dnnl::memory> args;
  int64_t mismatches = -1;
  std::string impl;

  DnnlMatmul(const Linear& p, int threads) {
    using namespace dnnl;
    omp_set_num_threads(threads);
    using dt = memory::data_type;
    using tag = memory::format_tag;
    memory::desc src_md({p.m, p.k}, dt::u8, tag::ab), wei_any({p.k, p.n}, dt::s8, tag::any),
        dst_md({p.m, p.n}, dt::s32, tag::ab);
    matmul::desc desc(src_md, wei_any, dst_md);
    matmul::primitive_desc pd(desc, eng);
    impl = pd.impl_info_str();
    memory src(src_md, eng, const_cast<uint8_t*>(p.x.data()));
    memory user_wei({{p.k, p.n}, dt::s8, tag::ab}, eng, const_cast<int8_t*>(p.w.data()));
    memory wei(pd.weights_desc(), eng), dst(dst_md, eng);
    reorder(user_wei, wei).execute(s, user_wei, wei);
    s.wait();
    mm = matmul(pd);
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    run();
    const int32_t* got = static_cast<const int32_t*>(dst.get_data_handle());
    mismatches = 0;
    for (size_t i = 0; i < p.ref.size(); ++i) mismatches += got[i] != p.ref[i];
  }
  void run() {
    mm.execute(s, args);
    s.wait();
  }
};

double geomean(const std::vector<double>& rs) {
  double lg = 0;
  for (double x : rs) lg += std::log(x);
  return rs.empty() ? NAN : std::exp(lg / double(rs.size()));
}

const kiln::cli::Program kBench{
    .name = "bench_int8_layers",
    .summary =
        "Kiln's int8 kernels (untuned; tuned with --tune) against oneDNN's u8s8s32 "
        "convolution and matmul.",
    .flags =
        {{"--layers", "C1,C2,...", "the ResNet-18 layers to run (default: all twelve)"},
         {"--threads", "1,2", "the thread counts to run (default: 1,2)"},
         {"--min-time", "S", "seconds of timing per kernel (default: 1)"},
         {"--ic-block", "B", "input channels per block of the int8 data (default: 16)"},
         {"--tune", "N",
          "tune each layer's int8 task up to N trials, time the best (default: off)"},
         {"--records", "DIR",
          "--tune's record log (default: build/release/bench-results/int8-layers)"},
         {"--no-bert", "", "skip BERT-base's linear layers"},
         {"--asm", "DIR",
          "write DIR/<layer>.s, the int8 kernel's assembly, tuned with --tune (default: none)"}},
};

/// The fastest in this process (one thread, 0.2 s each, in turns) of the log's five best
/// configs of `task` and its default: the tuner measures each config once, and the highest of N
/// noisy measurements favours a lucky one; timed in turns, they share the load of the machine.
/// Empty where none runs correctly.
struct TunedPick {
  std::optional<Kernel> kernel;
  std::string config;
  double log_gflops = 0;  ///< the tuner's measurement of it (0: the default, not among the best)
};

TunedPick pick_tuned(const ConvLayer& l, const PlainInt8& p, int ic_block,
                     const kiln::autotune::Task& task, const kiln::records::RecordLog& log,
                     const std::string& asm_path) {
  std::vector<kiln::records::MeasureRecord> recs = log.records(task.key, task.target);
  std::stable_sort(recs.begin(), recs.end(),
                   [](const auto& a, const auto& b) { return a.gflops > b.gflops; });
  std::vector<kiln::records::MeasureRecord> picks;
  for (const auto& rec : recs) {
    if (picks.size() >= 5 || rec.gflops <= 0) break;
    if (std::none_of(picks.begin(), picks.end(),
                     [&](const auto& q) { return q.config_index == rec.config_index; })) {
      picks.push_back(rec);
    }
  }
  if (std::none_of(picks.begin(), picks.end(),
                   [&](const auto& q) { return q.config_index == task.default_config.index(); })) {
    kiln::records::MeasureRecord d;
    d.config_index = task.default_config.index();
    d.config = task.default_config.str();
    picks.push_back(d);
  }
  std::vector<Kernel> kernels;
  std::vector<kiln::records::MeasureRecord> built;
  for (const auto& rec : picks) {
    int64_t bad = 0;
    Kernel k = build_int8_conv(l, p, ic_block, task, task.space.get(rec.config_index), "", &bad);
    if (bad != 0) continue;
    kernels.push_back(std::move(k));
    built.push_back(rec);
  }
  TunedPick best;
  if (kernels.empty()) return best;
  kiln::runtime::set_num_threads(1);
  std::vector<std::function<void()>> fs;
  for (Kernel& k : kernels) fs.push_back([&k] { k.run(); });
  const std::vector<kiln::bench::Timing> tm =
      kiln::bench::interleaved_times(fs, 0.2 * double(fs.size()));
  size_t at = 0;
  for (size_t i = 1; i < tm.size(); ++i) {
    if (tm[i].median < tm[at].median) at = i;
  }
  best.kernel = std::move(kernels[at]);
  best.config = built[at].config;
  best.log_gflops = built[at].gflops;
  if (!asm_path.empty()) {
    int64_t bad = 0;
    build_int8_conv(l, p, ic_block, task, task.space.get(built[at].config_index), asm_path, &bad);
  }
  return best;
}

int run_bench(const kiln::cli::Args& args) {
  using kiln::bench::interleaved_times;
  using kiln::bench::load_average;
  using kiln::bench::Timing;
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 1.0;
  const std::vector<int> thread_counts =
      args.has("--threads") ? kiln::cli::positive_numbers(args.get("--threads"), "--threads")
                            : std::vector<int>{1, 2};
  const int ic_block = args.has("--ic-block")
                           ? kiln::cli::positive_number(args.get("--ic-block"), "--ic-block")
                           : 16;
  if (ic_block % 4 != 0) throw kiln::cli::UsageError("--ic-block: must be a multiple of 4");
  const int trials =
      args.has("--tune") ? kiln::cli::positive_number(args.get("--tune"), "--tune") : 0;
  const std::string records =
      args.get("--records", std::string(KILN_BENCH_RESULTS_DIR) + "/int8-layers");
  const std::vector<ConvLayer> layers = kiln::bench::select_layers(args.get("--layers"));
  const std::string asm_dir = args.get("--asm");
  const dnnl_version_t* v = dnnl_version();
  std::fprintf(stderr, "bench_int8_layers: oneDNN %d.%d.%d, target %s%s%s\n", v->major, v->minor,
               v->patch, kTarget, trials > 0 ? ", records " : "",
               trials > 0 ? records.c_str() : "");
  int failures = 0;
  std::map<int, std::vector<double>> conv_ratios, bert_ratios, tuned_ratios, tuned_round_ratios;
  // Kiln's kernel, the reference, then the others of `more`, in turns; the case line of the
  // first two. The timings, all of them, and the load.
  auto time_cases = [&](const char* name, int t, Kernel& kiln_k, auto& ref,
                        std::vector<Kernel*> more) {
    std::vector<std::function<void()>> fs{[&] { kiln_k.run(); }, [&] { ref.run(); }};
    for (Kernel* m : more) fs.push_back([m] { m->run(); });
    const double load_before = load_average();
    std::vector<Timing> tm = interleaved_times(fs, min_time);
    const double load = std::max(load_before, load_average());
    const double kiln_ms = tm[0].median * 1e3, ref_ms = tm[1].median * 1e3;
    std::printf("case=int8_%s_t%d kiln_ms=%.4f ref_ms=%.4f ratio=%.3f", name, t, kiln_ms, ref_ms,
                ref_ms / kiln_ms);
    if (!more.empty()) {
      const double fp32_ms = tm[2].median * 1e3;
      std::printf(" fp32_kiln_ms=%.4f int8_speedup=%.2f", fp32_ms, fp32_ms / kiln_ms);
    }
    std::printf(" best_round_ratio=%.3f load=%.2f\n", tm[1].best_round / tm[0].best_round, load);
    std::fflush(stdout);
    return std::make_pair(tm, load);
  };
  std::optional<kiln::records::RecordLog> log;
  std::optional<kiln::autotune::Tuner> tuner;
  if (trials > 0) {
    log.emplace(kiln::records::RecordLog::open(records));
    kiln::autotune::TuneOptions o;  // as `kiln tune --threads 1`: the default first, then xgb
    o.trials = trials;
    o.explorer = "xgb";
    o.local.threads = 1;
    tuner.emplace(*log, o);
  }
  std::deque<kiln::autotune::Task> tasks;  // the earlier layers' records warm-start the model
  std::vector<const kiln::autotune::Task*> history;
  for (const ConvLayer& l : layers) {
    const PlainInt8 p = make_plain(l);
    const kiln::autotune::Task& task = tasks.emplace_back(int8_task(l, ic_block));
    const std::string asm_path = asm_dir.empty() ? "" : asm_dir + "/" + l.name + ".s";
    int64_t bad = 0;
    Kernel k = build_int8_conv(l, p, ic_block, task, task.default_config,
                               trials > 0 ? "" : asm_path, &bad);
    Kernel f = build_fp32_conv(l);
    if (bad != 0) {
      std::fprintf(stderr, "bench_int8_layers: %s: Kiln's int8 output differs in %lld places\n",
                   l.name, static_cast<long long>(bad));
      ++failures;
      continue;
    }
    TunedPick tuned;
    if (trials > 0) {
      const size_t before = log->count(task.key, task.target);
      const kiln::autotune::TaskResult r = tuner->tune(task, history);
      history.push_back(&task);
      tuned = pick_tuned(l, p, ic_block, task, *log, asm_path);
      std::fprintf(stderr,
                   "%s: %zu records in the log, %d measured now, log best %.2f GFLOP/s; "
                   "timed: %s (log %.2f GFLOP/s); default: %s\n",
                   l.name, before, r.measured_now, r.best_gflops, tuned.config.c_str(),
                   tuned.log_gflops, task.default_config.str().c_str());
      if (!tuned.kernel) {
        std::fprintf(stderr, "bench_int8_layers: %s: no tuned config runs correctly\n", l.name);
        ++failures;
      }
    }
    for (int t : thread_counts) {
      kiln::runtime::set_num_threads(t);
      DnnlConv d(l, p, t);
      if (d.mismatches != 0) {
        std::fprintf(stderr, "bench_int8_layers: %s: oneDNN's output differs in %lld places\n",
                     l.name, static_cast<long long>(d.mismatches));
      }
      std::fprintf(stderr, "  %s t%d: oneDNN %s\n", l.name, t, d.impl.c_str());
      std::vector<Kernel*> more{&f};
      if (tuned.kernel) more.push_back(&*tuned.kernel);
      const auto [tm, load] = time_cases(l.name, t, k, d, more);
      conv_ratios[t].push_back(tm[1].median / tm[0].median);
      if (!tuned.kernel) continue;
      const double tuned_ms = tm[3].median * 1e3, ref_ms = tm[1].median * 1e3;
      const double default_ms = tm[0].median * 1e3;
      tuned_ratios[t].push_back(ref_ms / tuned_ms);
      tuned_round_ratios[t].push_back(tm[1].best_round / tm[3].best_round);
      std::printf(
          "case=int8_%s_tuned_t%d kiln_ms=%.4f ref_ms=%.4f ratio=%.3f default_ms=%.4f "
          "tuning_gain=%.3f best_round_ratio=%.3f load=%.2f\n",
          l.name, t, tuned_ms, ref_ms, ref_ms / tuned_ms, default_ms, default_ms / tuned_ms,
          tuned_round_ratios[t].back(), load);
      std::fflush(stdout);
    }
  }
  for (int t : thread_counts) {
    std::printf("case=int8_conv_geomean_t%d ratio=%.3f layers=%zu\n", t, geomean(conv_ratios[t]),
                conv_ratios[t].size());
    if (trials > 0) {
      std::printf("case=int8_conv_tuned_geomean_t%d ratio=%.3f best_round_ratio=%.3f layers=%zu\n",
                  t, geomean(tuned_ratios[t]), geomean(tuned_round_ratios[t]),
                  tuned_ratios[t].size());
    }
  }
  if (!args.has("--no-bert")) {
    const int shapes[][2] = {{768, 768}, {768, 3072}, {3072, 768}};
    for (const auto& kn : shapes) {
      const Linear p = make_linear(128, kn[0], kn[1]);
      int64_t bad = 0;
      Kernel k = build_int8_dense(p, &bad);
      const std::string name = "bert_" + std::to_string(kn[0]) + "x" + std::to_string(kn[1]);
      if (bad != 0) {
        std::fprintf(stderr, "bench_int8_layers: %s: Kiln's output differs in %lld places\n",
                     name.c_str(), static_cast<long long>(bad));
        ++failures;
        continue;
      }
      for (int t : thread_counts) {
        kiln::runtime::set_num_threads(t);
        DnnlMatmul d(p, t);
        if (d.mismatches != 0) {
          std::fprintf(stderr, "bench_int8_layers: %s: oneDNN's output differs in %lld places\n",
                       name.c_str(), static_cast<long long>(d.mismatches));
        }
        std::fprintf(stderr, "  %s t%d: oneDNN %s\n", name.c_str(), t, d.impl.c_str());
        const std::vector<Timing> tm = time_cases(name.c_str(), t, k, d, {}).first;
        bert_ratios[t].push_back(tm[1].median / tm[0].median);
      }
    }
    for (int t : thread_counts) {
      std::printf("case=int8_bert_geomean_t%d ratio=%.3f layers=%zu\n", t, geomean(bert_ratios[t]),
                  bert_ratios[t].size());
    }
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
