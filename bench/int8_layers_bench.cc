// The int8 kernels (topi/conv2d_int8.h, topi/dense_int8.h) at their default configs, untuned,
// against oneDNN's u8 x s8 -> s32 primitives, in the same process and run, at 1 and 2 threads:
//   case=int8_<layer>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> fp32_kiln_ms=<f>
//        int8_speedup=<f/x> best_round_ratio=<the rounds' best medians' ratio> load=<l>
//   case=int8_conv_geomean_t<threads> ratio=<geometric mean of the layers' ratios> layers=<n>
//   case=int8_bert_<K>x<N>_t<threads> kiln_ms=<x> ref_ms=<y> ratio=<y/x> best_round_ratio=<r>
//        load=<l>
//   case=int8_bert_geomean_t<threads> ratio=<...>
// The layers are ResNet-18's twelve convolutions (bench/resnet_layers.h; batch 1, padding k/2);
// fp32_kiln_ms is Kiln's fp32 NCHW[x]c kernel of the same layer at its template's default, for the
// int8 / fp32 speedup. BERT-base's linear layers are M = 128 rows by (K, N) = (768, 768),
// (768, 3072) and (3072, 768), a constant weight.
//
// Kiln: conv2d_nchwc_int8 over data already blocked [1, C/cb, H, W, cb] (cb: --ic-block, 64 by
// default, 3-6% faster than 16 on the 3x3 layers; 4 for C1's 3 channels, zeros past them) and
// weights packed [OC/16, C/cb, K, K, cb/4, 16, 4]; dense_int8 over rows [M, K] and a weight packed
// [N/16, K/4, 16, 4]: the layouts a graph keeps between layers and packs at build time. oneDNN
// (libdnnl 2.6): convolution_forward (forward_inference, convolution_direct) and matmul with u8
// src, s8 weights and s32 dst, memory descriptors of format `any` for the convolution (its own
// blocked layouts; plain rows for the matmul's src and dst, its weight `any`), inputs reordered
// into them once, outside the timing. Every output is checked against naive int32 loops, exactly,
// before timing. Timing as bench_conv: interleaved medians over --min-time seconds
// (bench/interleaved_timing.h). On a loaded machine (load= well above the thread count) the
// two-thread figures are disturbed, oneDNN's OpenMP barriers worst (ms-long stalls).
//
//   bench_int8_layers [--layers C1,C2,...] [--threads 1,2] [--min-time S] [--ic-block B]
//                     [--no-bert] [--asm DIR]   (DIR/<layer>.s: the int8 kernel's assembly)
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/cli.h"
#include "bench/interleaved_timing.h"
#include "bench/resnet_layers.h"
#include "compiler/autotune/task.h"
#include "compiler/codegen/build.h"
#include "compiler/lower.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/dense_int8.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"

namespace {

using kiln::bench::ConvLayer;
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

/// Kiln's int8 convolution of `l` at its default config; `mismatches` counts wrong outputs.
Kernel build_int8_conv(const ConvLayer& l, const PlainInt8& p, int ic_block,
                       const std::string& asm_dir, int64_t* mismatches) {
  using namespace kiln;
  const int cb = l.ic < ic_block ? (l.ic + 3) / 4 * 4 : ic_block;
  const int cblocks = (l.ic + cb - 1) / cb, ob = l.oc / topi::kInt8OutBlock, oh = l.out_hw();
  te::Tensor data = te::placeholder({1, cblocks, l.hw, l.hw, cb}, ir::DataType::UInt(8), "data");
  te::Tensor kernel = te::placeholder({ob, cblocks, l.k, l.k, cb / 4, 16, 4}, ir::kInt8, "kernel");
  const int pad = l.pad();
  te::Tensor out =
      topi::conv2d_nchwc_int8(data, kernel, {l.stride, l.stride}, {pad, pad, pad, pad});
  const space::ConfigSpace space = topi::conv2d_nchwc_int8_x86_space(out);
  const target::Target t = target::Target::parse(kTarget);
  const space::Config cfg = topi::conv2d_nchwc_int8_x86_default(out, space, t);
  te::Schedule s = te::create_schedule({out});
  topi::schedule_conv2d_nchwc_int8_x86(s, out, cfg, out);
  Kernel k;
  k.mod = compiler::build(s, {data, kernel, out}, kTarget, "conv_int8");
  k.f = k.mod.function("conv_int8");
  if (!asm_dir.empty()) {
    const std::string text =
        codegen::emit_assembly({compiler::lower(s, {data, kernel, out}, "conv_int8")}, t);
    const std::string path = asm_dir + "/" + l.name + ".s";
    if (FILE* f = std::fopen(path.c_str(), "w")) {
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

/// oneDNN's u8 x s8 -> s32 convolution for `threads` threads, checked.
struct DnnlConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  dnnl::convolution_forward conv;
  std::unordered_map<int, dnnl::memory> args;
  int64_t mismatches = -1;
  std::string impl;

  DnnlConv(const ConvLayer& l, const PlainInt8& p, int threads) {
    using namespace dnnl;
    omp_set_num_threads(threads);
    const int oh = l.out_hw();
    memory::dims src_dims = {1, l.ic, l.hw, l.hw}, wei_dims = {l.oc, l.ic, l.k, l.k},
                 dst_dims = {1, l.oc, oh, oh}, strides = {l.stride, l.stride},
                 pads = {l.pad(), l.pad()};
    using dt = memory::data_type;
    using tag = memory::format_tag;
    memory::desc src_any(src_dims, dt::u8, tag::any), wei_any(wei_dims, dt::s8, tag::any),
        dst_any(dst_dims, dt::s32, tag::any);
    convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                   src_any, wei_any, dst_any, strides, pads, pads);
    convolution_forward::primitive_desc pd(desc, eng);
    impl = pd.impl_info_str();
    memory user_src({src_dims, dt::u8, tag::nchw}, eng, const_cast<uint8_t*>(p.x.data()));
    memory user_wei({wei_dims, dt::s8, tag::oihw}, eng, const_cast<int8_t*>(p.w.data()));
    std::vector<int32_t> got(size_t(l.oc) * oh * oh);
    memory user_dst({dst_dims, dt::s32, tag::nchw}, eng, got.data());
    memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
    reorder(user_src, src).execute(s, user_src, src);
    reorder(user_wei, wei).execute(s, user_wei, wei);
    s.wait();
    conv = convolution_forward(pd);
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    run();
    reorder(dst, user_dst).execute(s, dst, user_dst);
    s.wait();
    mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) mismatches += got[i] != p.ref[i];
  }
  void run() {
    conv.execute(s, args);
    s.wait();
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
    .summary = "Kiln's int8 kernels (untuned) against oneDNN's u8s8s32 convolution and matmul.",
    .flags = {{"--layers", "C1,C2,...", "the ResNet-18 layers to run (default: all twelve)"},
              {"--threads", "1,2", "the thread counts to run (default: 1,2)"},
              {"--min-time", "S", "seconds of timing per kernel (default: 1)"},
              {"--ic-block", "B", "input channels per block of the int8 data (default: 64)"},
              {"--no-bert", "", "skip BERT-base's linear layers"},
              {"--asm", "DIR", "write DIR/<layer>.s, the int8 kernel's assembly (default: none)"}},
};

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
  const std::vector<ConvLayer> layers = kiln::bench::select_layers(args.get("--layers"));
  const std::string asm_dir = args.get("--asm");
  const dnnl_version_t* v = dnnl_version();
  std::fprintf(stderr, "bench_int8_layers: oneDNN %d.%d.%d, target %s\n", v->major, v->minor,
               v->patch, kTarget);
  int failures = 0;
  std::map<int, std::vector<double>> conv_ratios, bert_ratios;
  auto time_pair = [&](const char* name, int t, Kernel& kiln_k, auto& ref, Kernel* fp32) {
    std::vector<std::function<void()>> fs{[&] { kiln_k.run(); }, [&] { ref.run(); }};
    if (fp32 != nullptr) fs.push_back([&] { fp32->run(); });
    const double load_before = load_average();
    const std::vector<Timing> tm = interleaved_times(fs, min_time);
    const double load = std::max(load_before, load_average());
    const double kiln_ms = tm[0].median * 1e3, ref_ms = tm[1].median * 1e3;
    std::printf("case=int8_%s_t%d kiln_ms=%.4f ref_ms=%.4f ratio=%.3f", name, t, kiln_ms, ref_ms,
                ref_ms / kiln_ms);
    if (fp32 != nullptr) {
      const double fp32_ms = tm[2].median * 1e3;
      std::printf(" fp32_kiln_ms=%.4f int8_speedup=%.2f", fp32_ms, fp32_ms / kiln_ms);
    }
    std::printf(" best_round_ratio=%.3f load=%.2f\n", tm[1].best_round / tm[0].best_round, load);
    std::fflush(stdout);
    return ref_ms / kiln_ms;
  };
  for (const ConvLayer& l : layers) {
    const PlainInt8 p = make_plain(l);
    int64_t bad = 0;
    Kernel k = build_int8_conv(l, p, ic_block, asm_dir, &bad);
    Kernel f = build_fp32_conv(l);
    if (bad != 0) {
      std::fprintf(stderr, "bench_int8_layers: %s: Kiln's int8 output differs in %lld places\n",
                   l.name, static_cast<long long>(bad));
      ++failures;
      continue;
    }
    for (int t : thread_counts) {
      kiln::runtime::set_num_threads(t);
      DnnlConv d(l, p, t);
      if (d.mismatches != 0) {
        std::fprintf(stderr, "bench_int8_layers: %s: oneDNN's output differs in %lld places\n",
                     l.name, static_cast<long long>(d.mismatches));
      }
      std::fprintf(stderr, "  %s t%d: oneDNN %s\n", l.name, t, d.impl.c_str());
      conv_ratios[t].push_back(time_pair(l.name, t, k, d, &f));
    }
  }
  for (int t : thread_counts) {
    std::printf("case=int8_conv_geomean_t%d ratio=%.3f layers=%zu\n", t, geomean(conv_ratios[t]),
                conv_ratios[t].size());
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
        bert_ratios[t].push_back(time_pair(name.c_str(), t, k, d, nullptr));
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
