// ONNX Einsum: an equation over the operands' axes, e.g. "bhid,bhjd->bhij" (attention's scores),
// "ii->i" (a diagonal), "...ij->...ji" (a transpose under broadcast batch axes).
//
// The equation is parsed once into labels per operand (`EinsumSpec`): each letter is an axis; an
// ellipsis stands for the operand's remaining leading axes, right-aligned with the other
// operands' and broadcast as NumPy does. Without "->" the output is the ellipsis's axes, then the
// letters that occur once, in alphabetical order. Letters absent from the output are summed.
// The compute is one tensor: the product of the operands at each point, summed over those
// letters (a repeated letter in one operand reads its diagonal).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/te/tensor.h"

namespace kiln::topi {

struct EinsumSpec {
  /// Labels per operand and for the output: 0..51 for a-z and A-Z, 64 + k for the k-th axis of
  /// the ellipsis counted from its first (outermost) axis.
  std::vector<std::vector<int>> inputs;
  std::vector<int> output;
  int ellipsis_rank = 0;  ///< axes the ellipsis spans in the output (the most any operand has)
};

/// Parses `equation` for operands of `ranks`; kiln::Error saying what is wrong with it (a bad
/// character, a term per operand, a term's letters against its operand's rank, an output letter
/// no operand has or one given twice).
EinsumSpec parse_einsum(const std::string& equation, const std::vector<size_t>& ranks);

/// The output's shape for operands of `shapes`; kiln::Error naming the letter (or ellipsis axis)
/// whose sizes disagree.
std::vector<int64_t> einsum_shape(const std::string& equation,
                                  const std::vector<std::vector<int64_t>>& shapes);

/// A two-operand equation that is one batched matrix product, as MatMul computes it: each letter
/// is a batch axis (in both operands and the output), a row axis (the first operand and the
/// output), a column axis (the second operand and the output) or a contracted axis (both operands,
/// not the output). `einsum_contraction` gives the operands' axes in that order and how the
/// product [batch..., rows..., columns...] maps to the output.
struct EinsumContraction {
  /// Axis d of A's view [batch..., rows..., contracted...] is A's axis perm_a[d].
  std::vector<int64_t> perm_a;
  std::vector<int64_t> perm_b;  ///< B's view [batch..., contracted..., columns...], likewise
  std::vector<int64_t> batch;   ///< the batch axes' sizes, in the output's order
  int64_t m = 1, k = 1, n = 1;  ///< the rows', contracted and columns' axes' sizes multiplied
  /// The product's axes [batch..., rows..., columns...] (each group in the output's order).
  std::vector<int64_t> product_shape;
  std::vector<int64_t> perm_out;  ///< output axis d is the product's axis perm_out[d]
};

/// The product `equation` over operands of `shapes` is, or nothing where it is not one matrix
/// product worth MatMul's kernels: other than two operands, a letter repeated in a term (a
/// diagonal), a letter of one operand alone that is summed, an axis broadcast from 1 (a size
/// differing between the operands), no contracted axis (an outer or elementwise product), or
/// neither a row nor a column axis (a dot product per batch: a plain reduction). The equation must
/// be valid (einsum_shape).
std::optional<EinsumContraction> einsum_contraction(
    const std::string& equation, const std::vector<std::vector<int64_t>>& shapes);

/// The compute; operands of one dtype.
te::Tensor einsum(const std::string& equation, const std::vector<te::Tensor>& xs,
                  const std::string& name);

}  // namespace kiln::topi
