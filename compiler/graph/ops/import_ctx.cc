// The accessors of ImportCtx (import_ctx.h).
#include "compiler/graph/ops/import_ctx.h"

#include <cstring>

#include "base/error.h"
#include "compiler/graph/onnx_detail.h"

namespace kiln::graph::ops {

void ImportCtx::fail(const std::string& what) const {
  throw Error("error: '" + origin_ + "': " + where_ + ": " + what);
}

const Value& ImportCtx::in_value(size_t i) const {
  if (in(i) == kNoValue) fail("input " + std::to_string(i) + " is required");
  return g_.value(in(i));
}

const Value& ImportCtx::output(size_t i) const {
  const int k = static_cast<int>(i);
  if (k >= proto_.output_size() || proto_.output(k).empty()) {
    fail("output " + std::to_string(i) + (i == 0 ? " is required" : " is unnamed"));
  }
  return g_.value(values_.at(proto_.output(k)));
}

const runtime::NDArray* ImportCtx::const_input(size_t i) const {
  const ValueId v = in(i);
  return v == kNoValue || !g_.value(v).is_constant() ? nullptr : g_.value(v).data.get();
}

const runtime::NDArray& ImportCtx::need_constant(size_t i, const char* what) const {
  const runtime::NDArray* a = const_input(i);
  if (a != nullptr) return *a;
  if (in(i) != kNoValue && g_.input_default(in(i)) != nullptr) {
    const std::string& name = g_.value(in(i)).name;
    fail(std::string("input '") + what + "' is graph input '" + name + "', whose " +
         "initializer is only a default that callers may replace; Kiln needs a constant " +
         "here (remove '" + name + "' from the graph's inputs)");
  }
  fail(std::string("input '") + what + "' must be a constant");
}

std::vector<int64_t> ImportCtx::const_ints(size_t i, const char* what) const {
  const runtime::NDArray* a = &need_constant(i, what);
  if (runtime::dtype_equal(a->dtype(), runtime::kInt64)) return a->to_vector<int64_t>();
  if (!runtime::dtype_equal(a->dtype(), runtime::kInt32)) {
    fail(std::string("input '") + what + "' must be int32 or int64");
  }
  const std::vector<int32_t> v = a->to_vector<int32_t>();
  return std::vector<int64_t>(v.begin(), v.end());
}

float ImportCtx::const_float(size_t i, const char* what, float dflt) const {
  if (in(i) == kNoValue) return dflt;
  const runtime::NDArray* a = &need_constant(i, what);
  if (a->num_elements() != 1) fail(std::string("input '") + what + "' must be a scalar");
  return static_cast<float>(onnx_detail::element_as_double(*a, 0));
}

const onnx::AttributeProto* ImportCtx::attr(const std::string& name) const {
  for (const onnx::AttributeProto& a : proto_.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t ImportCtx::attr_i(const char* name, int64_t dflt) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? a->i() : dflt;
}

float ImportCtx::attr_f(const char* name, float dflt) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? a->f() : dflt;
}

std::string ImportCtx::attr_s(const char* name, const std::string& dflt) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? a->s() : dflt;
}

std::vector<int64_t> ImportCtx::attr_ints(const char* name, std::vector<int64_t> dflt) const {
  const onnx::AttributeProto* a = attr(name);
  return a ? std::vector<int64_t>(a->ints().begin(), a->ints().end()) : dflt;
}

void check_folded(const ImportCtx& c, const Value& out, bool ok) {
  if (!ok) c.fail("the inferred output " + out.type_string() + " does not match the inputs");
}

bool fold_strided_view(const ImportCtx& c, const Value& out, const std::vector<int64_t>& axis_of,
                       const std::vector<int64_t>& start, const std::vector<int64_t>& step,
                       runtime::NDArray* result) {
  const runtime::NDArray& x = *c.const_input(0);
  if (out.num_elements() > kImportFoldMaxElements) return false;
  const size_t rank = out.shape.size();
  check_folded(c, out,
               runtime::dtype_equal(x.dtype(), out.dtype) && x.shape().size() == rank &&
                   axis_of.size() == rank && start.size() == rank && step.size() == rank);
  std::vector<int64_t> x_stride(rank, 1);
  for (size_t d = rank; d-- > 1;) x_stride[d - 1] = x_stride[d] * x.shape()[d];
  *result = runtime::NDArray::empty(out.shape, out.dtype);
  const int64_t elem = runtime::dtype_bytes(out.dtype);
  const auto* src = static_cast<const char*>(x.data());
  auto* dst = static_cast<char*>(result->data());
  std::vector<int64_t> i(rank, 0);
  for (int64_t k = 0; k < out.num_elements(); ++k) {
    int64_t at = 0;
    for (size_t d = 0; d < rank; ++d) {
      const int64_t xi = start[d] + i[d] * step[d];
      const size_t ax = static_cast<size_t>(axis_of[d]);
      check_folded(c, out, xi >= 0 && xi < x.shape()[ax]);
      at += xi * x_stride[ax];
    }
    std::memcpy(dst + k * elem, src + at * elem, static_cast<size_t>(elem));
    for (size_t d = rank; d-- > 0;) {  // the next output index, last axis fastest
      if (++i[d] < out.shape[d]) break;
      i[d] = 0;
    }
  }
  return true;
}

std::vector<int64_t> resolve_pads(const ImportCtx& c, const std::vector<int64_t>& in_sizes,
                                  const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& strides,
                                  const std::vector<int64_t>& dilations) {
  std::vector<int64_t> extent;
  for (size_t i = 0; i < kernel.size(); ++i) extent.push_back((kernel[i] - 1) * dilations[i] + 1);
  return onnx_detail::window_pads(c.attr_s("auto_pad", "NOTSET"),
                                  c.attr_ints("pads", std::vector<int64_t>(2 * kernel.size(), 0)),
                                  in_sizes, extent, strides);
}

}  // namespace kiln::graph::ops
