// The twelve ResNet-18 convolution layers of the TVM paper's Table 2 (batch 1, fp32), shared by
// bench_tuning, bench_conv, bench_opencl and bench_search_cost, and the tuning tasks of one layer:
// the blocked NCHW[x]c one for the CPU, the NCHW GPU template's for OpenCL.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "base/cli.h"
#include "compiler/autotune/task.h"
#include "compiler/graph/alter_layout.h"
#include "compiler/te/tensor.h"
#include "compiler/topi/conv2d.h"

namespace kiln::bench {

struct ConvLayer {
  const char* name;
  int hw;      ///< input height = width
  int ic, oc;  ///< input / output channels
  int k;       ///< kernel height = width
  int stride;  ///< padding is k / 2 on every side
  int pad() const { return k / 2; }
  int out_hw() const { return (hw + 2 * pad() - k) / stride + 1; }
  /// Multiply-adds count 2.
  double flops() const { return 2.0 * oc * out_hw() * out_hw() * static_cast<double>(ic) * k * k; }
  int ib() const { return graph::channel_block(ic); }
  int ob() const { return graph::channel_block(oc); }
};

inline const std::vector<ConvLayer>& resnet18_layers() {
  static const std::vector<ConvLayer> layers = {
      {"C1", 224, 3, 64, 7, 2},    {"C2", 56, 64, 64, 3, 1},    {"C3", 56, 64, 64, 1, 1},
      {"C4", 56, 64, 128, 3, 2},   {"C5", 56, 64, 128, 1, 2},   {"C6", 28, 128, 128, 3, 1},
      {"C7", 28, 128, 256, 3, 2},  {"C8", 28, 128, 256, 1, 2},  {"C9", 14, 256, 256, 3, 1},
      {"C10", 14, 256, 512, 3, 2}, {"C11", 14, 256, 512, 1, 2}, {"C12", 7, 512, 512, 3, 1},
  };
  return layers;
}

inline constexpr const char* kTuneTarget = "llvm -mcpu=native";
inline constexpr const char* kTemplate = "conv2d_nchwc_x86";

/// The layer's blocked convolution: data [1, IC/ib, H, W, ib], kernel [OC/ob, IC/ib, K, K, ib, ob].
inline te::Tensor blocked_conv(const ConvLayer& l) {
  const int ib = l.ib(), ob = l.ob();
  te::Tensor data = te::placeholder({1, l.ic / ib, l.hw, l.hw, ib}, ir::kFloat32, "data");
  te::Tensor kernel =
      te::placeholder({l.oc / ob, l.ic / ib, l.k, l.k, ib, ob}, ir::kFloat32, "kernel");
  const int p = l.pad();
  return topi::conv2d_nchwc(data, kernel, {l.stride, l.stride}, {p, p, p, p});
}

inline autotune::Task layer_task(const ConvLayer& l) {
  return autotune::Task::make(kTemplate, blocked_conv(l), kTuneTarget);
}

inline constexpr const char* kOpenClTarget = "opencl";

/// The layer's NCHW convolution as the GPU template's task (conv2d_nchw_gpu) for OpenCL.
inline autotune::Task opencl_layer_task(const ConvLayer& l) {
  te::Tensor data = te::placeholder({1, l.ic, l.hw, l.hw}, ir::kFloat32, "data");
  te::Tensor kernel = te::placeholder({l.oc, l.ic, l.k, l.k}, ir::kFloat32, "kernel");
  const int p = l.pad();
  te::Tensor out = topi::conv2d_nchw(data, kernel, {l.stride, l.stride}, {p, p, p, p});
  return autotune::Task::make("conv2d_nchw_gpu", out, kOpenClTarget);
}

/// The layers named in a comma-separated list ("C1,C2", --layers); all of them when `list` is
/// empty. cli::UsageError naming an unknown name.
inline std::vector<ConvLayer> select_layers(const std::string& list) {
  if (list.empty()) return resnet18_layers();
  std::vector<ConvLayer> out;
  std::stringstream ss(list);
  std::string name;
  while (std::getline(ss, name, ',')) {
    if (name.empty()) continue;
    auto it = std::find_if(resnet18_layers().begin(), resnet18_layers().end(),
                           [&](const ConvLayer& l) { return name == l.name; });
    if (it == resnet18_layers().end()) {
      throw cli::UsageError("--layers: unknown layer '" + name + "' (known: C1 ... C12)");
    }
    out.push_back(*it);
  }
  return out;
}

}  // namespace kiln::bench
