// The counters' one-line form.
#include "deploy/vdla/device/stats.h"

#include <sstream>

namespace kiln::vdla {

std::string Stats::to_string() const {
  std::ostringstream os;
  os << "cycles=" << cycles << " gemm_counter=" << gemm_counter << " alu_counter=" << alu_counter
     << " utilization=" << utilization() << " inp_load_nbytes=" << inp_load_nbytes
     << " wgt_load_nbytes=" << wgt_load_nbytes << " acc_load_nbytes=" << acc_load_nbytes
     << " uop_load_nbytes=" << uop_load_nbytes << " out_store_nbytes=" << out_store_nbytes
     << " load_busy=" << load_busy << " compute_busy=" << compute_busy
     << " store_busy=" << store_busy << " dram_busy=" << dram_busy << " insns=" << load_insns << "/"
     << compute_insns << "/" << store_insns;
  return os.str();
}

}  // namespace kiln::vdla
