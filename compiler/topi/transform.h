// Shape and layout operators: reshape, transpose, squeeze, unsqueeze, concat, pad and slice, with
// ONNX semantics (negative axes count from the end; reshape's 0 and -1; slice's clamping). Each is
// an injective compute whose shape is fixed when the operator is built (input shapes must be
// constant), so schedule_injective_x86 schedules any of them, inlined producers included.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/te/schedule.h"

namespace kiln::topi {

/// The constant shape of `t`, or kiln::Error naming `op` and the tensor when a dimension is
/// symbolic.
std::vector<int64_t> const_shape(const te::Tensor& t, const std::string& op);

/// ONNX Reshape's output shape: 0 copies the input's dimension at the same position (unless
/// `allow_zero`), one -1 is inferred from the remaining size. kiln::Error naming both shapes when
/// the sizes do not match, for more than one -1, or a value below -1.
std::vector<int64_t> infer_reshape_shape(const std::vector<int64_t>& input,
                                         const std::vector<int64_t>& target,
                                         bool allow_zero = false);

/// x with the same elements in row-major order and shape infer_reshape_shape(x's shape, shape).
te::Tensor reshape(const te::Tensor& x, const std::vector<int64_t>& shape,
                   const std::string& name = "reshape");

/// out[i_0, ..., i_n] = x[j] with j[perm[k]] = i_k; `perm` empty reverses the axes.
te::Tensor transpose(const te::Tensor& x, std::vector<int64_t> perm = {},
                     const std::string& name = "transpose");

/// x without the listed size-1 axes (all size-1 axes when `axes` is empty).
te::Tensor squeeze(const te::Tensor& x, const std::vector<int64_t>& axes = {},
                   const std::string& name = "squeeze");

/// x with size-1 axes inserted at `axes` (positions in the output, negative from its end).
te::Tensor unsqueeze(const te::Tensor& x, const std::vector<int64_t>& axes,
                     const std::string& name = "unsqueeze");

/// The inputs joined along `axis`; all other dimensions and the dtypes must agree.
te::Tensor concat(const std::vector<te::Tensor>& inputs, int64_t axis,
                  const std::string& name = "concat");

/// A gather of channels from several rank-4 inputs (graph/channel_gather.h: a channel shuffle):
/// output channel c is channel table[1, c] of inputs[table[0, c]], or zero where table[0, c] is
/// -1. The inputs are NCHW (`data_block` 0) or all NCHW[data_block]c; the output is NCHW with
/// table's C columns (`out_block` 0), or NCHW[out_block]c of C / out_block blocks (the table
/// covers the padding of a last block). Every read is clamped into its input (a select evaluates
/// all of them); in blocks, each output vector reads its table's columns as one vector.
te::Tensor channel_gather(const std::vector<te::Tensor>& inputs, const te::Tensor& table,
                          int data_block, int out_block,
                          const std::string& name = "channel_gather");

enum class PadMode : uint8_t {
  kConstant,  ///< outside points take `value`
  kReflect,   ///< mirrored without repeating the edge: [a b c] -> b [a b c] b
  kEdge,      ///< the edge repeated: [a b c] -> a [a b c] c
};

/// x padded by pad_before[i] / pad_after[i] elements on each side of axis i (a negative pad
/// crops). Reflect mode needs pads smaller than the dimension.
te::Tensor pad(const te::Tensor& x, const std::vector<int64_t>& pad_before,
               const std::vector<int64_t>& pad_after, double value = 0.0,
               PadMode mode = PadMode::kConstant, const std::string& name = "pad");

/// ONNX Gather: out[o..., j..., i...] = data[o..., indices[j...], i...] along `axis` (negative
/// counts from the end): the output's shape is data's with that axis replaced by the indices'
/// shape. Indices are integers (any width); a negative index counts from the end of the axis, and
/// one still outside it is clamped to the axis (never a read out of bounds).
te::Tensor take(const te::Tensor& data, const te::Tensor& indices, int64_t axis,
                const std::string& name = "take");

/// ONNX Slice: along each axes[i] (all axes in order when empty), elements starts[i], starts[i] +
/// steps[i], ... up to ends[i] (exclusive), with negative positions counted from the end and
/// clamped to the dimension (to [0, d] for positive steps, [-1, d - 1] for negative ones).
/// `steps` empty means all 1. An empty result is a kiln::Error.
te::Tensor slice(const te::Tensor& x, const std::vector<int64_t>& starts,
                 const std::vector<int64_t>& ends, const std::vector<int64_t>& axes = {},
                 const std::vector<int64_t>& steps = {}, const std::string& name = "slice");

/// ONNX GatherElements: out[i] = data[i with its `axis` coordinate replaced by indices[i]]
/// (indices of data's rank; out has their shape); negative indices count from the end, and one
/// still outside the axis is clamped to it.
te::Tensor gather_elements(const te::Tensor& data, const te::Tensor& indices, int64_t axis,
                           const std::string& name = "gather_elements");

/// ONNX Tile: x repeated repeats[d] times along each dimension d (repeats: one non-negative
/// count per dimension), out[i] = x[i mod dim].
te::Tensor tile(const te::Tensor& x, const std::vector<int64_t>& repeats,
                const std::string& name = "tile");

}  // namespace kiln::topi

namespace kiln::topi {

/// How ONNX Resize interpolates: `mode` "nearest" (rounded by `nearest_mode`:
/// round_prefer_floor, round_prefer_ceil, floor, ceil), "linear" (the 2 neighbours along each
/// resized axis, weighted) or "cubic" (4 neighbours with Keys' kernel of parameter `cubic_a`;
/// with `exclude_outside` the weights of neighbours outside the input are dropped and the rest
/// renormalized); neighbours' indices are clamped to the edge. `coord`: half_pixel,
/// pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nearest.
struct ResizeMethod {
  std::string mode = "nearest";
  std::string coord = "half_pixel";
  std::string nearest_mode = "round_prefer_floor";
  float cubic_a = -0.75f;
  bool exclude_outside = false;
};

/// ONNX Resize (and Upsample): out[i] reads x at source coordinates computed per axis from i,
/// the axis' scale and the coordinate transformation. Linear and cubic resizing are computed
/// axis by axis (innermost first), in stages that schedule_resize_x86 schedules.
te::Tensor resize(const te::Tensor& x, const std::vector<int64_t>& out_shape,
                  const std::vector<float>& scales, const ResizeMethod& method,
                  const std::string& name = "resize");
/// Schedules the stages of `out` = resize(...) before its last (linear mode's passes over the
/// inner axes), each at root, vectorized and in parallel; `out` itself is left to the caller.
void schedule_resize_x86(te::Schedule& s, const te::Tensor& out);

}  // namespace kiln::topi
