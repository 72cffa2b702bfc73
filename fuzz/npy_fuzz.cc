// Fuzz target: .npy images (deploy/runtime/npy.h), the arrays `kiln run --input` reads. A file is
// either refused with kiln::Error or read; what is read must come back unchanged through
// serialize_npy and parse_npy. Anything else (a crash, another exception) is a bug.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/error.h"
#include "deploy/runtime/npy.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kiln::runtime::NDArray;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  NDArray a;
  try {
    a = kiln::runtime::parse_npy(bytes, "fuzz.npy");
  } catch (const kiln::Error&) {
    return 0;  // refused with a message: what a malformed file must get
  }
  const NDArray b = kiln::runtime::parse_npy(kiln::runtime::serialize_npy(a), "round trip");
  KILN_FUZZ_CHECK(b.shape() == a.shape() && kiln::runtime::dtype_equal(b.dtype(), a.dtype()) &&
                  b.nbytes() == a.nbytes() &&
                  std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())) == 0);
  return 0;
}
