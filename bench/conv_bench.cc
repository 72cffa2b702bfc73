// The twelve ResNet-18 convolution layers of the TVM paper (Table 2; batch 1, fp32), Kiln's tuned
// NCHW[x]c kernels against oneDNN's convolution, in the same process and run:
//   case=conv_<layer>_t<threads> kiln_gflops=<x> ref_gflops=<y> ratio=<x/y> default_gflops=<d>
//        top5_gflops=<z> top5_ratio=<z/y> best_round_ratio=<r> load=<l>
//   case=conv_geomean_t<threads> ratio=<geometric mean of the layers' ratios> top5_ratio=<...>
//        best_round_ratio=<...>
//   case=conv_geomean ratio=<r>          (the single-thread geometric mean, as the issue names it)
// for 1 and 2 threads.
//
// Kiln: the best config of the layer's conv2d_nchwc_x86 task in a record log of this benchmark's
// own (--records DIR, default build/release/bench-results/conv), tuned first up to --trials N
// (default 64) as `kiln tune --threads 1` tunes a model: the template's default measured first,
// then the xgb explorer, single-thread measurements, the earlier layers' records warm-starting
// the model; with N records already there this measures nothing. (bench_tuning's logs do not
// fit: they leave out the default, to compare the explorers alone.) The best config is
// JIT-compiled in this process (compiler::build of task.schedule(config)); default_gflops is the
// template's default config, for comparison; top5_gflops is the fastest in this process (one
// thread, 0.3 s each) of the log's five best configs: the tuner measures each config once in a
// child, and the highest of 64 noisy measurements is biased towards a lucky one (on C10 the log's
// best measured 106 GFLOP/s there and 60-87 here). Pool size: runtime::set_num_threads(threads).
//
// oneDNN (libdnnl, the Debian build; its CPU runtime is OpenMP, printed on stderr at start):
// convolution_forward, forward_inference, convolution_direct, f32, with src/weights/dst memory
// descriptors of format `any` so that it picks its own blocked layouts; the NCHW/OIHW inputs are
// reordered into them once, outside the timing. Threads: omp_set_num_threads(threads) before the
// primitive is created (it sizes its work split then). oneDNN skips the kernel taps that fall in
// the padding, so a 3x3 layer does less than the nominal FLOPs (both sides are credited with the
// nominal count); Kiln does the same when the config inlines the padding (pad_at 0), through
// pass::unswitch_guards.
//
// Both outputs are checked against a naive convolution (double accumulation) before timing:
// max|out - ref| / max|ref| <= 1e-3. Timing: the median of single runs after two warm-ups, over at
// least --min-time seconds (default 1) and 10 runs, the same on both sides; Kiln tuned, Kiln
// default, Kiln top-5 and oneDNN take turns (5 rounds of min-time/5 each), so that load from other
// processes on a shared machine falls on all of them alike; best_round_ratio compares the best of
// the 5 rounds' medians of each side (the least disturbed figures) for the tuned config. load= is
// the 1-minute load average at the case (the higher of before and after; this benchmark itself
// counts about `threads`): well above the thread count, other work was running and the two-thread
// figures are disturbed (one thread of a static split waiting for a core halves a kernel's speed;
// oneDNN's OpenMP barriers suffer worse).
//
//   bench_conv [--trials N] [--layers C1,C2,...] [--records DIR] [--min-time S] [--threads 1,2]
//              [--compare-log]   (stderr: each logged config, the tuner's GFLOP/s vs in-process)
//              [--asm DIR]       (writes DIR/<layer>.s, the tuned kernel's assembly)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <dnnl.hpp>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/cli.h"
#include "bench/interleaved_timing.h"
#include "bench/onednn_conv.h"
#include "bench/resnet_layers.h"
#include "compiler/autotune/tuner.h"
#include "compiler/codegen/build.h"
#include "compiler/lower.h"
#include "deploy/runtime/ndarray.h"
#include "deploy/runtime/thread_pool.h"
#include "records/record_log.h"

namespace {

using kiln::bench::ConvLayer;
using kiln::bench::interleaved_times;
using kiln::bench::load_average;
using kiln::bench::OnednnConv;
using kiln::bench::Timing;
using kiln::runtime::NDArray;

/// The layer's data in plain layouts, and the naive result.
struct Plain {
  std::vector<float> x;    ///< [IC, H, W]
  std::vector<float> w;    ///< [OC, IC, K, K]
  std::vector<float> ref;  ///< [OC, OH, OW]
};

Plain make_plain(const ConvLayer& l) {
  Plain p;
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  p.x.resize(size_t(l.ic) * l.hw * l.hw);
  p.w.resize(size_t(l.oc) * l.ic * l.k * l.k);
  for (float& v : p.x) v = dist(rng);
  for (float& v : p.w) v = dist(rng);
  const int oh = l.out_hw(), pad = l.pad();
  p.ref.assign(size_t(l.oc) * oh * oh, 0);
  std::vector<double> acc(size_t(oh) * oh);
  for (int o = 0; o < l.oc; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int c = 0; c < l.ic; ++c)
      for (int kh = 0; kh < l.k; ++kh)
        for (int kw = 0; kw < l.k; ++kw) {
          const double wv = p.w[((size_t(o) * l.ic + c) * l.k + kh) * l.k + kw];
          for (int y = 0; y < oh; ++y) {
            const int iy = y * l.stride + kh - pad;
            if (iy < 0 || iy >= l.hw) continue;
            const float* row = &p.x[(size_t(c) * l.hw + iy) * l.hw];
            for (int xo = 0; xo < oh; ++xo) {
              const int ix = xo * l.stride + kw - pad;
              if (ix >= 0 && ix < l.hw) acc[size_t(y) * oh + xo] += wv * row[ix];
            }
          }
        }
    for (size_t i = 0; i < acc.size(); ++i) p.ref[size_t(o) * oh * oh + i] = float(acc[i]);
  }
  return p;
}

/// max|got - ref| / max|ref|; infinity on a NaN.
double rel_error(const std::vector<float>& got, const std::vector<float>& ref) {
  double diff = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    diff = std::max(diff, std::fabs(double(got[i]) - ref[i]));
    mx = std::max(mx, std::fabs(double(ref[i])));
  }
  return mx > 0 ? diff / mx : diff;
}

/// A Kiln kernel for one config, with its blocked arguments, checked.
struct KilnConv {
  kiln::runtime::Module mod;
  kiln::runtime::Function f;
  std::vector<NDArray> arrays;  ///< data, kernel, out
  std::vector<int> order;       ///< task.args() order, as indices into arrays
  double error = INFINITY;

  void run() {
    if (order.size() == 3) f(arrays[order[0]], arrays[order[1]], arrays[order[2]]);
  }
};

KilnConv build_kiln(const ConvLayer& l, const kiln::autotune::Task& task,
                    const kiln::space::Config& cfg, const Plain& p) {
  KilnConv k;
  k.mod = kiln::compiler::build(task.schedule(cfg), task.args(), kiln::bench::kTuneTarget, "conv");
  k.f = k.mod.function("conv");
  const int ib = l.ib(), ob = l.ob(), oh = l.out_hw();
  NDArray data = NDArray::empty({1, l.ic / ib, l.hw, l.hw, ib}, kiln::runtime::kFloat32);
  NDArray kernel =
      NDArray::empty({l.oc / ob, l.ic / ib, l.k, l.k, ib, ob}, kiln::runtime::kFloat32);
  NDArray out = NDArray::empty({1, l.oc / ob, oh, oh, ob}, kiln::runtime::kFloat32);
  float* d = data.data<float>();
  for (int c = 0; c < l.ic; ++c)
    for (int i = 0; i < l.hw * l.hw; ++i)
      d[((size_t(c / ib) * l.hw * l.hw) + i) * ib + c % ib] = p.x[size_t(c) * l.hw * l.hw + i];
  float* w = kernel.data<float>();
  for (int o = 0; o < l.oc; ++o)
    for (int c = 0; c < l.ic; ++c)
      for (int kk = 0; kk < l.k * l.k; ++kk)
        w[(((size_t(o / ob) * (l.ic / ib) + c / ib) * l.k * l.k + kk) * ib + c % ib) * ob +
          o % ob] = p.w[(size_t(o) * l.ic + c) * l.k * l.k + kk];
  for (const kiln::te::Tensor& t : task.args()) {
    const std::string name = t->name();
    k.order.push_back(name == "data" ? 0 : name == "kernel" ? 1 : 2);
  }
  k.arrays.push_back(std::move(data));
  k.arrays.push_back(std::move(kernel));
  k.arrays.push_back(std::move(out));
  k.run();
  std::vector<float> got(size_t(l.oc) * oh * oh);
  const float* r = k.arrays[2].data<float>();
  for (int o = 0; o < l.oc; ++o)
    for (int i = 0; i < oh * oh; ++i)
      got[size_t(o) * oh * oh + i] = r[(size_t(o / ob) * oh * oh + i) * ob + o % ob];
  k.error = rel_error(got, p.ref);
  return k;
}

/// oneDNN's float32 convolution and the relative error of its output.
struct DnnlConv : OnednnConv<float, float, float> {
  double error = INFINITY;
  DnnlConv(const ConvLayer& l, const Plain& p, int threads)
      : OnednnConv(l, p.x, p.w, threads), error(rel_error(output, p.ref)) {}
};

const kiln::cli::Program kBench{
    .name = "bench_conv",
    .summary = "The ResNet-18 convolutions: Kiln's tuned kernels against oneDNN's.",
    .flags = {{"--trials", "N", "configs tuned per layer, earlier runs' included (default: 64)"},
              {"--layers", "C1,C2,...", "the layers to run (default: all twelve)"},
              {"--records", "DIR", "the record log (default: build/release/bench-results/conv)"},
              {"--min-time", "S", "seconds of timing per kernel (default: 1)"},
              {"--threads", "1,2", "the thread counts to run (default: 1,2)"},
              {"--compare-log", "", "print each logged config: the tuner's GFLOP/s vs in-process"},
              {"--asm", "DIR", "write DIR/<layer>.s, the tuned kernel's assembly (default: none)"}},
};

int run_bench(const kiln::cli::Args& args) {
  using kiln::cli::positive_number;
  const int trials = args.has("--trials") ? positive_number(args.get("--trials"), "--trials") : 64;
  const bool compare_log = args.has("--compare-log");
  const double min_time = args.has("--min-time")
                              ? kiln::cli::real_at_least(args.get("--min-time"), "--min-time", 0)
                              : 1.0;
  const std::string asm_dir = args.get("--asm"), layer_list = args.get("--layers");
  const std::string records = args.get("--records", std::string(KILN_BENCH_RESULTS_DIR) + "/conv");
  const std::vector<int> thread_counts =
      args.has("--threads") ? kiln::cli::positive_numbers(args.get("--threads"), "--threads")
                            : std::vector<int>{1, 2};
  const std::vector<ConvLayer> layers = kiln::bench::select_layers(layer_list);

  const dnnl_version_t* v = dnnl_version();
  const char* rt = v->cpu_runtime == DNNL_RUNTIME_OMP   ? "OpenMP"
                   : v->cpu_runtime == DNNL_RUNTIME_TBB ? "TBB"
                   : v->cpu_runtime == DNNL_RUNTIME_SEQ ? "sequential"
                                                        : "other";
  std::fprintf(stderr, "bench_conv: oneDNN %d.%d.%d (%s), CPU runtime %s; records %s\n", v->major,
               v->minor, v->patch, v->hash, rt, records.c_str());

  kiln::records::RecordLog log = kiln::records::RecordLog::open(records);
  std::map<int, std::vector<double>> ratios, top5_ratios, best_round_ratios;
  int failures = 0;
  kiln::autotune::TuneOptions o;  // as `kiln tune --threads 1`: default first, xgb
  o.trials = trials;
  o.explorer = "xgb";
  o.local.threads = 1;
  kiln::autotune::Tuner tuner(log, o);
  std::deque<kiln::autotune::Task> tuned;  // the history that warm-starts the model
  std::vector<const kiln::autotune::Task*> history;
  for (const ConvLayer& l : layers) {
    const kiln::autotune::Task& task = tuned.emplace_back(kiln::bench::layer_task(l));
    const size_t before = log.count(task.key, task.target);
    kiln::autotune::TaskResult r = tuner.tune(task, history);
    history.push_back(&task);
    std::fprintf(
        stderr, "%s: %zu records in the log, %d measured now, best %.2f GFLOP/s (config %lu)\n",
        l.name, before, r.measured_now, r.best_gflops, static_cast<unsigned long>(r.best_config));
    auto best = log.best(task.key, task.target);
    if (!asm_dir.empty() && best) {
      const std::string path = asm_dir + "/" + l.name + ".s";
      kiln::ir::PrimFunc f = kiln::compiler::lower(
          task.schedule(task.space.get(best->config_index)), task.args(), "conv");
      std::string text =
          kiln::codegen::emit_assembly({f}, kiln::target::Target::parse(kiln::bench::kTuneTarget));
      FILE* out = std::fopen(path.c_str(), "w");
      bool ok = out != nullptr && std::fwrite(text.data(), 1, text.size(), out) == text.size();
      if (out != nullptr) ok = std::fclose(out) == 0 && ok;
      if (!ok) {
        std::fprintf(stderr, "bench_conv: --asm: cannot write '%s'\n", path.c_str());
        return 1;
      }
    }
    const Plain p = make_plain(l);
    if (compare_log) {
      // Diagnostic (stderr): every error-free config of the log, its GFLOP/s as the tuner measured
      // it (in kiln-runner) against this process's JIT at one thread (median over 0.3 s).
      kiln::runtime::set_num_threads(1);
      std::vector<std::pair<double, double>> pairs;
      for (const kiln::records::MeasureRecord& rec : log.records(task.key, task.target)) {
        if (rec.gflops <= 0) continue;
        KilnConv k = build_kiln(l, task, task.space.get(rec.config_index), p);
        const double s = interleaved_times({[&] { k.run(); }}, 0.3, 1)[0].median;
        const double g = l.flops() / s / 1e9;
        pairs.push_back({rec.gflops, g});
        std::fprintf(stderr, "  %s config %lu: log %.2f GFLOP/s, in-process %.2f GFLOP/s  %s\n",
                     l.name, static_cast<unsigned long>(rec.config_index), rec.gflops, g,
                     rec.config.c_str());
      }
      std::sort(pairs.begin(), pairs.end());
      if (!pairs.empty())
        std::fprintf(stderr, "%s: log best %.2f -> in-process %.2f; in-process best %.2f\n", l.name,
                     pairs.back().first, pairs.back().second,
                     std::max_element(pairs.begin(), pairs.end(), [](auto& a, auto& b) {
                       return a.second < b.second;
                     })->second);
    }
    KilnConv tuned, dflt, top5;
    std::string top5_config;
    std::string err;
    try {
      if (!best) throw std::runtime_error("no error-free record in the log");
      tuned = build_kiln(l, task, task.space.get(best->config_index), p);
      dflt = build_kiln(l, task, task.default_config, p);
      // The log's five best configs re-timed here (one thread, 0.3 s each): the tuner's single
      // measurement of each config is noisy, and its maximum is biased towards lucky ones.
      std::vector<kiln::records::MeasureRecord> recs = log.records(task.key, task.target);
      std::stable_sort(recs.begin(), recs.end(),
                       [](const auto& a, const auto& b) { return a.gflops > b.gflops; });
      kiln::runtime::set_num_threads(1);
      double top_s = INFINITY;
      std::vector<uint64_t> seen;
      for (const auto& rec : recs) {
        if (seen.size() >= 5 || rec.gflops <= 0) break;
        if (std::find(seen.begin(), seen.end(), rec.config_index) != seen.end()) continue;
        seen.push_back(rec.config_index);
        KilnConv k = build_kiln(l, task, task.space.get(rec.config_index), p);
        if (!(k.error <= 1e-3)) continue;
        const double sec = interleaved_times({[&] { k.run(); }}, 0.3, 1)[0].median;
        if (sec < top_s) {
          top_s = sec;
          top5 = std::move(k);
          top5_config = rec.config;
        }
      }
      if (!std::isfinite(top_s)) throw std::runtime_error("no top-5 config runs correctly");
      if (!(tuned.error <= 1e-3) || !(dflt.error <= 1e-3)) {
        std::ostringstream os;
        os << "Kiln's output differs from the naive convolution: " << tuned.error << " (tuned), "
           << dflt.error << " (default)";
        err = os.str();
      }
    } catch (const std::exception& e) {
      err = e.what();
    }
    if (!err.empty()) {
      std::fprintf(stderr, "bench_conv: %s: %s\n", l.name, err.c_str());
      ++failures;
    }
    for (int t : thread_counts) {
      kiln::runtime::set_num_threads(t);
      std::unique_ptr<DnnlConv> d;
      try {
        d = std::make_unique<DnnlConv>(l, p, t);
        if (!(d->error <= 1e-3)) {
          std::fprintf(stderr, "bench_conv: %s: oneDNN's output differs from the naive one: %g\n",
                       l.name, d->error);
          d.reset();
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_conv: %s: oneDNN failed: %s\n", l.name, e.what());
        d.reset();
      }
      if (!d) ++failures;
      // Kiln tuned, Kiln default, Kiln top-5, oneDNN: in turns, so that they share the load.
      std::vector<std::function<void()>> fs;
      if (err.empty()) {
        fs.push_back([&] { tuned.run(); });
        fs.push_back([&] { dflt.run(); });
        fs.push_back([&] { top5.run(); });
      }
      if (d) fs.push_back([&] { d->run(); });
      const double load_before = load_average();
      std::vector<Timing> tm = interleaved_times(fs, min_time);
      const double load = std::max(load_before, load_average());
      Timing kiln_s, default_s, top5_s, ref_s;
      if (err.empty()) {
        kiln_s = tm[0];
        default_s = tm[1];
        top5_s = tm[2];
      }
      if (d) ref_s = tm.back();
      auto gf = [&](double sec) { return l.flops() / sec / 1e9; };
      const double ratio = gf(kiln_s.median) / gf(ref_s.median);
      const double top5_ratio = gf(top5_s.median) / gf(ref_s.median);
      const double best_round_ratio = gf(kiln_s.best_round) / gf(ref_s.best_round);
      if (std::isfinite(ratio)) {
        ratios[t].push_back(ratio);
        top5_ratios[t].push_back(top5_ratio);
        best_round_ratios[t].push_back(best_round_ratio);
      }
      std::fprintf(stderr, "  %s t%d: oneDNN %s, Kiln config %s, top-5 pick %s\n", l.name, t,
                   d ? d->impl.c_str() : "-", best ? best->config.c_str() : "-",
                   top5_config.c_str());
      std::printf(
          "case=conv_%s_t%d kiln_gflops=%.2f ref_gflops=%.2f ratio=%.3f "
          "default_gflops=%.2f top5_gflops=%.2f top5_ratio=%.3f best_round_ratio=%.3f "
          "load=%.2f\n",
          l.name, t, gf(kiln_s.median), gf(ref_s.median), ratio, gf(default_s.median),
          gf(top5_s.median), top5_ratio, best_round_ratio, load);
      std::fflush(stdout);
    }
  }
  auto geomean = [](const std::vector<double>& rs) {
    double lg = 0;
    for (double x : rs) lg += std::log(x);
    return rs.empty() ? NAN : std::exp(lg / rs.size());
  };
  for (int t : thread_counts) {
    const double g = geomean(ratios[t]);
    std::printf(
        "case=conv_geomean_t%d ratio=%.3f top5_ratio=%.3f best_round_ratio=%.3f layers=%zu\n", t, g,
        geomean(top5_ratios[t]), geomean(best_round_ratios[t]), ratios[t].size());
    if (t == 1) std::printf("case=conv_geomean ratio=%.3f\n", g);
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return kiln::cli::run(kBench, argc, argv, run_bench); }
