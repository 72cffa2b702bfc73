// What the files of the `_kiln` module share: each file registers its part of the module.
#pragma once

#include <pybind11/pybind11.h>

namespace kiln::python {

void register_bundle(pybind11::module_& m);   // bundle.cc: the runtime
void register_compile(pybind11::module_& m);  // compile.cc: compile, tune, quantize

void register_checksum(pybind11::module_& m);  // checksum.cc: fnv1a64, for kiln.Farm

}  // namespace kiln::python
