// How much arithmetic a tensor program does by its definition: the work figure of a compiled
// kernel (its GFLOP/s in `kiln run --profile`), counted from the compute stages rather than from
// a loop program, so that it does not depend on the schedule (tiling, inlining, vectorization).
//
//   Tensor C = compute({m, n}, [&](Var i, Var j) { return sum(A(i, k) * B(k, j), {k}); });
//   Tensor D = compute({m, n}, [&](Var i, Var j) { return max(C(i, j) + bias(j), 0.0f); });
//   count_flops({D});  // m*n*K*2 (C: a multiply and the sum's add per step) + m*n*2 (D)
#pragma once

#include <optional>
#include <vector>

#include "compiler/te/tensor.h"

namespace kiln::te {

/// The operations one evaluation of `outputs` performs by definition: every compute stage they
/// read (each once, however many readers it has) once per element of its output; placeholders are
/// free. Per element, the operations of the stage's value; for a reduction, its steps times the
/// operations of its source plus the combiner's one (a multiply-accumulate counts 2). Add, sub,
/// mul, div, mod, min, max and shifts count 1, fma() 2, any other math call (exp, tanh, sqrt, ...)
/// 1; casts, selects' conditions, comparisons, constants and the index arithmetic of reads count
/// nothing (nor does a reduction's `where`). Both sides of a select count (both are evaluated).
/// Integer value arithmetic (an int8 convolution's) counts as float arithmetic does. Work a layout
/// adds to the definition (channels padded to a whole block, groups merged block-diagonally)
/// counts as the kernel does it.
/// std::nullopt when a stage's shape or a reduction's extent is not a constant.
std::optional<double> count_flops(const std::vector<Tensor>& outputs);

}  // namespace kiln::te
