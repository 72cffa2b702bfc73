// The DRAM the VDLA shares with the host: one growable byte region, handed out by a bump
// allocator. Addresses are byte offsets into it (the device's physical addresses); a pointer from
// `at` is valid until an `alloc` grows the region beyond what `reserve` set aside (without a
// reserve: until the next `alloc`).
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
  /// Sets aside `bytes` in all, so that allocations up to that size keep every pointer valid.
  void reserve(uint64_t bytes) { bytes_.reserve(bytes); }
  uint64_t capacity() const { return bytes_.capacity(); }
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
