// The bump allocator over the shared DRAM region.
#include "deploy/vdla/driver/dram.h"

#include "base/error.h"

namespace kiln::vdla {

uint64_t Dram::alloc(uint64_t bytes, uint64_t align) {
  KILN_USER_CHECK(align > 0 && (align & (align - 1)) == 0)
      << "vdla: DRAM alignment " << align << " is not a power of two";
  const uint64_t addr = (bytes_.size() + align - 1) / align * align;
  KILN_USER_CHECK(addr + bytes <= (uint64_t{1} << 32))
      << "vdla: DRAM allocation of " << bytes
      << " bytes does not fit the 4 GiB the instructions address";
  bytes_.resize(addr + bytes, 0);
  return addr;
}

uint8_t* Dram::at(uint64_t addr, uint64_t bytes) {
  KILN_USER_CHECK(addr + bytes <= bytes_.size())
      << "vdla: DRAM bytes [" << addr << ", " << addr + bytes << ") are outside the "
      << bytes_.size() << "-byte region";
  return bytes_.data() + addr;
}

}  // namespace kiln::vdla
