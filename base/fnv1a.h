// FNV-1a, 64-bit: the checksum of bundles (whole and in streamed chunks) and the seed of a task's
// generated inputs. Fixed arithmetic, so every machine of a farm computes the same value.
//
//   uint64_t h = fnv1a64(bytes.data(), bytes.size());
//   h = fnv1a64(more.data(), more.size(), h);          // continues over a second piece
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln {

inline constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;

inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Basis) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kiln
