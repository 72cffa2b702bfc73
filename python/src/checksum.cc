// `_kiln.fnv1a64`: the farm's checksum (base/fnv1a.h) over a Python buffer, for kiln.Farm's
// uploads and downloads. In C++ because a byte loop in Python runs at about 90 ns a byte (47 s
// for a 500 MiB model); this one releases the GIL, so the upload's gRPC thread keeps sending.
#include <cstdint>

#include "base/fnv1a.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace kiln::python {

void register_checksum(py::module_& m) {
  m.def(
      "fnv1a64",
      [](const py::buffer& data, uint64_t h) {
        const py::buffer_info info = data.request();  // bytes, bytearray, memoryview, ...
        const auto n = static_cast<size_t>(info.size * info.itemsize);
        py::gil_scoped_release release;
        return fnv1a64(info.ptr, n, h);
      },
      py::arg("data"), py::arg("h") = kFnv1a64Basis,
      "FNV-1a (64-bit) of `data`'s bytes, continuing from `h` (the basis by default): the "
      "checksum of a model upload and of a fetched bundle.");
}

}  // namespace kiln::python
