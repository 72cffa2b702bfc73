// Reading and writing NumPy's .npy files (format versions 1, 2 and 3), so that inputs, weights and
// reference outputs can travel between Python and Kiln. Only little-endian, C-order arrays of the
// element types the runtime knows are supported: f2, f4, f8, i1, i2, i4, i8, u1, u2, u4, u8, b1.
// Every failure (missing file, bad magic, unsupported dtype, Fortran order, truncated data) raises
// kiln::Error naming the file.
#pragma once

#include <string>

#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

/// Reads the array stored in the .npy file at `path`.
NDArray load_npy(const std::string& path);

/// Parses an .npy image already in memory; `origin` names it in error messages.
NDArray parse_npy(const std::string& bytes, const std::string& origin);

/// Writes `array` to `path` as .npy (version 1.0, or 2.0 if the header needs it).
void save_npy(const std::string& path, const NDArray& array);

/// The .npy image of `array`, as save_npy writes it.
std::string serialize_npy(const NDArray& array);

}  // namespace kiln::runtime
