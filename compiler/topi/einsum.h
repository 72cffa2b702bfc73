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

/// The compute; operands of one dtype.
te::Tensor einsum(const std::string& equation, const std::vector<te::Tensor>& xs,
                  const std::string& name);

}  // namespace kiln::topi
