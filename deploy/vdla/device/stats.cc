// The counters' one-line form.
#include "deploy/vdla/device/stats.h"

#include <sstream>

namespace kiln::vdla {

void Stats::add(const Stats& o) {
  inp_load_nbytes += o.inp_load_nbytes;
  wgt_load_nbytes += o.wgt_load_nbytes;
  acc_load_nbytes += o.acc_load_nbytes;
  uop_load_nbytes += o.uop_load_nbytes;
  out_store_nbytes += o.out_store_nbytes;
  gemm_counter += o.gemm_counter;
  alu_counter += o.alu_counter;
  reset_counter += o.reset_counter;
  load_insns += o.load_insns;
  compute_insns += o.compute_insns;
  store_insns += o.store_insns;
  load_busy += o.load_busy;
  compute_busy += o.compute_busy;
  store_busy += o.store_busy;
  dram_busy += o.dram_busy;
  cycles += o.cycles;
}

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
