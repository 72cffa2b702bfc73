// The `_kiln` extension module: the C++ libraries behind the Python package's compiler and
// runtime (python/kiln wraps it; users never import it directly). Kiln's exceptions become the
// package's (kiln/errors.py): kiln::Error (a user's mistake) InvalidInputError, kiln::SystemError
// (the environment) KilnSystemError, anything else KilnError, each with Kiln's message.
#include <pybind11/stl.h>

#include <exception>

#include "base/error.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/thread_pool.h"
#include "python/src/bindings.h"

namespace py = pybind11;

namespace {

void raise(const char* cls, const char* message) {
  py::object type = py::module_::import("kiln.errors").attr(cls);
  PyErr_SetObject(type.ptr(), py::str(message).ptr());
}

}  // namespace

PYBIND11_MODULE(_kiln, m) {
  m.doc() = "Kiln's compiler and runtime (use the package `kiln`, which wraps this module)";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const kiln::Error& e) {
      raise("InvalidInputError", e.what());
    } catch (const kiln::SystemError& e) {
      raise("KilnSystemError", e.what());
    } catch (const kiln::InternalError& e) {
      raise("KilnError", (std::string("internal error: ") + e.what()).c_str());
    }
  });
  m.def("num_threads", &kiln::runtime::num_threads,
        "Threads a bundle's parallel loops run on (the runtime's pool, one per process).");
  m.def(
      "set_num_threads", [](int n) { kiln::runtime::set_num_threads(n); }, py::arg("n"),
      "Resizes the runtime's pool (1: everything on the calling thread; 0: the default).");
  m.def("supported_onnx_ops", &kiln::graph::supported_onnx_ops,
        "The ONNX operator types Kiln compiles, sorted.");
  kiln::python::register_bundle(m);
  kiln::python::register_compile(m);
  kiln::python::register_checksum(m);
}
