// Prints the IR as readable loop code in the style of the paper's listings:
//
//   for y in range(1024):
//     for x in range(1024):
//       C[y, x] = 0f
//       for k in range(1024):
//         C[y, x] = C[y, x] + A[k, y]*B[k, x]
//
// Integer division and remainder print as Python's // and % (they round toward minus infinity,
// like FloorDiv and FloorMod); C-style truncating ones print as truncdiv/truncmod.
#pragma once

#include <ostream>
#include <string>

#include "compiler/ir/expr.h"
#include "compiler/ir/stmt.h"

namespace kiln::ir {

std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::ostream& operator<<(std::ostream& os, const Expr& e);
std::ostream& operator<<(std::ostream& os, const Stmt& s);
std::ostream& operator<<(std::ostream& os, const DataType& t);

}  // namespace kiln::ir
