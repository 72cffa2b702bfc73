// Workloads: one tunable operator instance described by value (the topi compute that makes it,
// its tensor arguments' shapes and dtypes, its attributes), so that any process can rebuild
// exactly the same tensor program from a line of text. Every tunable compute attaches its
// workload to the output it returns; a tuning task is made from it (autotune::Task::from_workload),
// which is how a worker of the farm builds a candidate from (template, workload, target, config)
// alone, without the model.
//
//   te::Tensor y = conv2d_nchw(x, w, {1, 1}, {1, 1, 1, 1});
//   std::string text = *workload_of(y);
//   // {"attrs":{"dilations":[1,1],"groups":1,"pads":[1,1,1,1],"strides":[1,1]},
//   //  "compute":"conv2d_nchw","inputs":[{"dtype":"float32","shape":[1,3,8,8]},
//   //  {"dtype":"float32","shape":[16,3,3,3]}]}            (one line)
//   te::Tensor z = compute_from_workload(Workload::parse(text));  // y's program, fresh inputs
//
// The text is canonical (keys sorted, no spaces), so equal workloads are equal strings. Parsing
// and building check everything (the text comes over the network): a malformed or inconsistent
// workload is a kiln::Error that names the field and its value.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "compiler/ir/type.h"
#include "compiler/te/tensor.h"
#include "deploy/runtime/random_fill.h"

namespace kiln::topi {

/// One tensor argument of a workload.
struct TensorSpec {
  std::vector<int64_t> shape;
  ir::DataType dtype = ir::kFloat32;
  bool operator==(const TensorSpec&) const = default;
};

/// An attribute: an integer, a flag, or a list of integers.
using AttrValue = std::variant<int64_t, bool, std::vector<int64_t>>;

struct Workload {
  /// The topi compute: conv2d_nchw, conv2d_nchwc, conv2d_nchwc_winograd, conv2d_nchwc_int8,
  /// group_conv2d_nchwc,
  /// depthwise_conv2d_nchwc, depthwise_conv2d_nchwc_int8, conv2d_transpose_nchw,
  /// conv2d_transpose_nchw_packed, dense, dense_packed, dense_int8, batch_matmul, max_pool2d,
  /// avg_pool2d, global_max_pool2d, global_avg_pool2d, vdla_conv2d (workload_computes()).
  std::string compute;
  /// Its tensor arguments in the order the compute takes them (data, then kernel; vdla_conv2d's
  /// then bias and shift, each of its own dtype).
  std::vector<TensorSpec> inputs;
  /// Its other arguments, named as in ONNX where ONNX has them: strides, pads (top, left, bottom,
  /// right), dilations, groups, output_padding, kernel_shape, ceil_mode, count_include_pad;
  /// trans_a, trans_b; n (dense_packed's output columns); pad_value (conv2d_nchwc_int8's data
  /// zero point, which its padding reads); vdla_conv2d: stride, pad (every side),
  /// relu.
  std::map<std::string, AttrValue> attrs;

  /// The canonical JSON text.
  std::string json() const;
  /// Parses and checks (check_workload) a JSON text; kiln::Error naming the field otherwise.
  static Workload parse(const std::string& text);
  bool operator==(const Workload&) const = default;
};

/// The computes a workload can name.
const std::vector<std::string>& workload_computes();

/// Checks that `w` is one its compute accepts: a known compute; exactly its inputs, with their
/// ranks, positive dims, at most 2^31 - 1 elements each (the loop IR indexes with int32) and one
/// numeric dtype; exactly its attributes, each of its kind, length and range; shapes consistent
/// with each other and the attributes (channels and groups, reduction extents, a kernel that fits
/// the padded input), every stage's size within the same limit. kiln::Error naming the field.
void check_workload(const Workload& w);

/// The compute of `w` (checked first) applied to fresh placeholders named after its arguments
/// ("data", "kernel", ...): the same program as the one `w` was taken from, with `w` attached.
te::Tensor compute_from_workload(const Workload& w);

/// The workload's canonical text attached to `out`; nullopt when `out` was not made by a tunable
/// topi compute.
std::optional<std::string> workload_of(const te::Tensor& out);

/// How the seeded inputs of `w`'s compute are generated (runtime::fill_input), one per tensor of
/// `inputs` (placeholders of compute_from_workload(w), matched by name): none for a float input,
/// for an integer one the range its compute declares (vdla_conv2d: int8 data and kernel in
/// [-128, 127], int32 bias in [-2^18, 2^18], shift in [0, 31]), else its dtype's whole range.
std::vector<std::optional<runtime::ValueRange>> input_ranges(const Workload& w,
                                                             const std::vector<te::Tensor>& inputs);

/// `out` with `w` attached (for the topi computes, on the output they return).
te::Tensor with_workload(const te::Tensor& out, const Workload& w);

/// An attribute of a fixed number of ints (strides, pads, ...).
template <size_t N>
AttrValue ints_attr(const std::array<int, N>& a) {
  return std::vector<int64_t>(a.begin(), a.end());
}

/// The TensorSpec of `t`, whose dimensions must be constants (kiln::Error naming `op` otherwise).
TensorSpec spec_of(const te::Tensor& t, const char* op);

}  // namespace kiln::topi
