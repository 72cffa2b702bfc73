// The DRAM the VDLA shares with the host: one growable byte region, handed out by a bump
// allocator. Addresses are byte offsets into it (the device's physical addresses); a pointer from
// `at` is valid until the next `alloc`.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace kiln::vdla {

class Dram {
 public:
  /// A zeroed block of `bytes` aligned to `align` (a power of two); returns its address.
  uint64_t alloc(uint64_t bytes, uint64_t align = 64);
  /// Pointer to the byte at `addr`; raises kiln::Error when [addr, addr + bytes) is outside.
  uint8_t* at(uint64_t addr, uint64_t bytes = 1);
  /// Frees everything from `size` on (what was allocated after a size() taken earlier).
  void truncate(uint64_t size) {
    if (size < bytes_.size()) bytes_.resize(size);
  }
  std::span<uint8_t> bytes() { return bytes_; }
  uint64_t size() const { return bytes_.size(); }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace kiln::vdla
