// Shape arithmetic folded at import. PyTorch's exporter computes shapes in the graph even when
// they are static once the batch is bound: Shape -> Gather -> Div -> Cast -> Unsqueeze -> Concat ->
// Reshape in a vision transformer's patch embedding, Shape -> Slice -> Concat -> Resize's sizes in
// a segmentation head, ConstantOfShape -> Mul -> Equal -> Where -> Expand for a class token. Kiln
// needs those shapes as constants when the consumer is imported, so the small integer vectors on
// the way are evaluated here, exactly, on int64 (ONNX's Div on integers truncates, as C++ does;
// Mod takes the divisor's sign unless fmod = 1).
#include <algorithm>
#include <cstring>
#include <set>

#include "compiler/graph/onnx_detail.h"

namespace kiln::graph::onnx_detail {
namespace {

/// Shape vectors are short; anything bigger is data, left to the graph.
constexpr int64_t kMaxShapeElements = 64;

bool is_int64(const runtime::NDArray& a) {
  return runtime::dtype_equal(a.dtype(), runtime::kInt64);
}
bool is_bool(const runtime::NDArray& a) { return runtime::dtype_equal(a.dtype(), runtime::kBool); }

int64_t element_i64(const runtime::NDArray& a, int64_t i) {
  return is_bool(a) ? static_cast<const uint8_t*>(a.data())[i] != 0 : a.data<int64_t>()[i];
}

/// Slice of a 1-D vector (starts, ends, axes, steps as ONNX clamps them).
bool slice_1d(const std::vector<const runtime::NDArray*>& in, std::vector<int64_t>* out) {
  if (in.size() < 3 || in[0]->ndim() != 1) return false;
  auto scalar = [&](size_t i, int64_t dflt, int64_t* v) {
    if (i >= in.size() || in[i] == nullptr) {
      *v = dflt;
      return true;
    }
    if (!is_int64(*in[i]) || in[i]->num_elements() != 1) return false;
    *v = in[i]->data<int64_t>()[0];
    return true;
  };
  int64_t start = 0, end = 0, axis = 0, step = 1;
  if (!scalar(1, 0, &start) || !scalar(2, 0, &end) || !scalar(3, 0, &axis) ||
      !scalar(4, 1, &step)) {
    return false;
  }
  if ((axis != 0 && axis != -1) || step == 0) return false;
  const int64_t dim = in[0]->num_elements();
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    for (int64_t i = start; i < end; i += step) out->push_back(element_i64(*in[0], i));
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    for (int64_t i = start; i > end; i += step) out->push_back(element_i64(*in[0], i));
  }
  return true;
}

}  // namespace

bool fold_shape_arithmetic(const onnx::NodeProto& n,
                           const std::vector<const runtime::NDArray*>& inputs, const Value& out,
                           runtime::NDArray* result) {
  static const std::set<std::string> kOps = {"Neg",     "Add", "Sub",   "Mul",   "Div",
                                             "Mod",     "Max", "Min",   "Equal", "Less",
                                             "Greater", "Not", "Where", "Slice"};
  const std::string& op = n.op_type();
  // An empty result (a Slice [0:0] of a shape, as the expanded LayerNorm takes its prefix) is left
  // to the graph: ONNX's data propagation carries it, where an empty constant would stop Concat's
  // shape inference.
  if (!kOps.count(op) || out.shape.size() > 1 || out.num_elements() > kMaxShapeElements ||
      out.num_elements() == 0) {
    return false;
  }
  const bool out_bool = runtime::dtype_equal(out.dtype, runtime::kBool);
  if (!out_bool && !runtime::dtype_equal(out.dtype, runtime::kInt64)) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const runtime::NDArray* a = inputs[i];
    if (a == nullptr) {
      if (op == "Slice" && i >= 3) continue;  // axes and steps are optional
      return false;
    }
    if ((!is_int64(*a) && !is_bool(*a)) || a->ndim() > 1 || a->num_elements() > kMaxShapeElements) {
      return false;
    }
  }
  const int64_t count = out.num_elements();
  std::vector<int64_t> values;
  if (op == "Slice") {
    if (!slice_1d(inputs, &values) || static_cast<int64_t>(values.size()) != count) return false;
  } else {
    // Elementwise over 1-D vectors and scalars (numpy broadcasting of those shapes).
    for (const runtime::NDArray* a : inputs) {
      if (a->num_elements() != 1 && a->num_elements() != count) return false;
    }
    const bool arithmetic = op != "Where" && op != "Not";
    for (size_t i = 0; arithmetic && i < inputs.size(); ++i) {
      if (!is_int64(*inputs[i])) return false;
    }
    values.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
      auto at = [&](size_t k) {
        const runtime::NDArray& a = *inputs[k];
        return element_i64(a, a.num_elements() == 1 ? 0 : i);
      };
      int64_t v = 0;
      if (op == "Neg") {
        v = -at(0);
      } else if (op == "Not") {
        v = at(0) == 0;
      } else if (op == "Where") {
        v = at(0) != 0 ? at(1) : at(2);
      } else if (op == "Div") {
        if (at(1) == 0) return false;  // left to the graph, which defines what it does
        v = at(0) / at(1);
      } else if (op == "Mod") {  // a window's padding: (window - size % window) % window
        const int64_t a = at(0), b = at(1);
        if (b == 0) return false;
        v = a % b;  // fmod = 1: the sign of the dividend, as C++'s %
        bool fmod = false;
        for (const auto& attr : n.attribute())
          if (attr.name() == "fmod") fmod = attr.i() != 0;
        if (!fmod && v != 0 && (v < 0) != (b < 0)) v += b;  // fmod = 0: the divisor's sign
      } else {
        const int64_t a = at(0), b = at(1);
        v = op == "Add"     ? a + b
            : op == "Sub"   ? a - b
            : op == "Mul"   ? a * b
            : op == "Max"   ? std::max(a, b)
            : op == "Min"   ? std::min(a, b)
            : op == "Equal" ? a == b
            : op == "Less"  ? a < b
                            : a > b;  // Greater
      }
      values[static_cast<size_t>(i)] = v;
    }
  }
  if (out_bool) {
    runtime::NDArray r = runtime::NDArray::empty(out.shape, out.dtype);
    auto* p = static_cast<uint8_t*>(r.data());
    for (int64_t i = 0; i < count; ++i) p[i] = values[static_cast<size_t>(i)] != 0;
    *result = std::move(r);
  } else {
    *result = runtime::NDArray::from_vector(values, out.shape);
  }
  return true;
}

}  // namespace kiln::graph::onnx_detail
