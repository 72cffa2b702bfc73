// trim_conv_taps: kernel taps that read only padding dropped from constant Conv weights.
#include "compiler/graph/trim_conv_taps.h"

#include <algorithm>
#include <string>
#include <vector>

#include "compiler/topi/conv_taps.h"

namespace kiln::graph {
namespace {

/// The taps [lo, hi] some output of the axis reads inside the input (lo > hi: none).
struct TapRange {
  int64_t lo = 0, hi = -1;
};

TapRange live_taps(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t dil,
                   int64_t pad) {
  TapRange r{kernel, -1};
  for (const topi::TapRegion& region : topi::tap_regions(in, out, kernel, stride, dil, pad)) {
    if (region.taps() == 0) continue;
    r.lo = std::min(r.lo, region.tap_lo);
    r.hi = std::max(r.hi, region.tap_hi);
  }
  return r;
}

/// w [O, I, K0 (, K1)] restricted to the taps lo[d]..hi[d] of each spatial axis d.
runtime::NDArray slice_taps(const runtime::NDArray& w, const std::vector<int64_t>& lo,
                            const std::vector<int64_t>& hi) {
  const std::vector<int64_t>& shape = w.shape();
  std::vector<int64_t> out_shape = {shape[0], shape[1]};
  for (size_t d = 0; d < lo.size(); ++d) out_shape.push_back(hi[d] - lo[d] + 1);
  runtime::NDArray out = runtime::NDArray::empty(out_shape, runtime::kFloat32);
  const int64_t k0 = shape[2], k1 = shape.size() > 3 ? shape[3] : 1;
  const int64_t n0 = out_shape[2], n1 = out_shape.size() > 3 ? out_shape[3] : 1;
  const int64_t lo1 = lo.size() > 1 ? lo[1] : 0;
  const float* src = w.data<float>();
  float* dst = out.data<float>();
  for (int64_t f = 0; f < shape[0] * shape[1]; ++f) {
    for (int64_t a = 0; a < n0; ++a) {
      for (int64_t b = 0; b < n1; ++b) {
        dst[(f * n0 + a) * n1 + b] = src[(f * k0 + lo[0] + a) * k1 + lo1 + b];
      }
    }
  }
  return out;
}

bool trim(Graph& g, size_t ni) {
  const Node& n = g.nodes()[ni];
  if (n.op != "Conv" || n.inputs.size() < 2 || n.outputs.empty()) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  const Value& y = g.value(n.outputs[0]);
  if (!w.is_constant() || !runtime::dtype_equal(w.dtype, runtime::kFloat32) || !x.typed ||
      !y.typed) {
    return false;
  }
  const size_t dims = w.shape.size() - 2;
  if ((dims != 1 && dims != 2) || x.shape.size() != dims + 2 || y.shape.size() != dims + 2)
    return false;
  const std::vector<int64_t>&stride = n.ints("strides"), &dil_in = n.ints("dilations"),
        &pads_in = n.ints("pads");
  std::vector<int64_t> lo(dims), hi(dims), dil = dil_in, pads = pads_in, kernel(dims);
  bool changed = false;
  for (size_t d = 0; d < dims; ++d) {
    const int64_t k = w.shape[d + 2];
    lo[d] = 0;
    hi[d] = k - 1;
    kernel[d] = k;
    const TapRange r = live_taps(x.shape[d + 2], y.shape[d + 2], k, stride[d], dil[d], pads[d]);
    if (r.lo > r.hi || (r.lo == 0 && r.hi == k - 1)) continue;
    const int64_t begin = pads[d] - r.lo * dil[d], end = pads[d + dims] - (k - 1 - r.hi) * dil[d];
    if (begin < 0 || end < 0) continue;
    lo[d] = r.lo;
    hi[d] = r.hi;
    kernel[d] = r.hi - r.lo + 1;
    pads[d] = begin;
    pads[d + dims] = end;
    if (kernel[d] == 1) dil[d] = 1;
    changed = true;
  }
  if (!changed) return false;
  const ValueId trimmed = g.add_constant(w.name + ".trimmed", slice_taps(*w.data, lo, hi));
  Node& node = g.nodes()[ni];
  node.inputs[1] = trimmed;
  node.attrs["kernel_shape"] = kernel;
  node.attrs["dilations"] = dil;
  node.attrs["pads"] = pads;
  return true;
}

}  // namespace

size_t trim_conv_taps(Graph& graph) {
  size_t rewritten = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    if (trim(graph, i)) ++rewritten;
  }
  return rewritten;
}

}  // namespace kiln::graph
