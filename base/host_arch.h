// The CPU architecture this program was built for, as Kiln names architectures in target triples
// and board descriptions: "x86_64", "aarch64", or "unknown".
#pragma once

namespace kiln {

inline const char* host_arch() {
#if defined(__x86_64__) || defined(_M_X64)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#else
  return "unknown";
#endif
}

}  // namespace kiln
