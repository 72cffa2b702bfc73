// The decoupled access-execute pipeline: three in-order modules, four token queues, one DRAM port,
// and the checks that turn a malformed stream into an error naming its instruction.
#include "deploy/vdla/device/device.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <limits>
#include <sstream>

#include "base/error.h"
#include "deploy/vdla/device/cycle_model.h"
#include "deploy/vdla/device/execute.h"

namespace kiln::vdla {

const char* module_name(Module m) {
  switch (m) {
    case Module::kLoad:
      return "load";
    case Module::kCompute:
      return "compute";
    case Module::kStore:
      return "store";
  }
  return "?";
}

Module module_of(const Insn& insn) {
  if (insn.opcode == Opcode::kStore) return Module::kStore;
  if (insn.opcode == Opcode::kLoad &&
      (insn.mem_type == MemType::kInp || insn.mem_type == MemType::kWgt)) {
    return Module::kLoad;
  }
  return Module::kCompute;
}

namespace {

enum Queue { kL2C = 0, kC2L = 1, kC2S = 2, kS2C = 3 };
constexpr const char* kQueueNames[] = {"l2c (load->compute)", "c2l (compute->load)",
                                       "c2s (compute->store)", "s2c (store->compute)"};

// The queues an instruction of a module pops and pushes, by its flags.
struct QueueUse {
  std::array<int, 2> pops{-1, -1};
  std::array<int, 2> pushes{-1, -1};
};

QueueUse queue_use(Module m, const DepFlags& f) {
  QueueUse q;
  switch (m) {
    case Module::kLoad:
      if (f.pop_next) q.pops[0] = kC2L;
      if (f.push_next) q.pushes[0] = kL2C;
      break;
    case Module::kCompute:
      if (f.pop_prev) q.pops[0] = kL2C;
      if (f.pop_next) q.pops[1] = kS2C;
      if (f.push_prev) q.pushes[0] = kC2L;
      if (f.push_next) q.pushes[1] = kC2S;
      break;
    case Module::kStore:
      if (f.pop_prev) q.pops[0] = kC2S;
      if (f.push_prev) q.pushes[0] = kS2C;
      break;
  }
  return q;
}

}  // namespace

Device::Device(const Config& cfg) : cfg_(cfg) {
  cfg_.validate();
  inp_.assign(cfg_.inp_depth() * cfg_.inp_row_bytes(), 0);
  wgt_.assign(cfg_.wgt_depth() * cfg_.wgt_row_bytes(), 0);
  acc_.assign(cfg_.acc_depth() * cfg_.batch() * cfg_.block_out(), 0);
  uop_.assign(cfg_.uop_depth(), 0);
}

Stats Device::run(std::span<uint8_t> dram, uint64_t insn_addr, uint32_t count,
                  const RunOptions& opt) {
  KILN_USER_CHECK(insn_addr % 16 == 0)
      << "vdla: the instruction stream's address " << insn_addr << " is not 16-byte aligned";
  KILN_USER_CHECK(insn_addr + uint64_t{count} * 16 <= dram.size())
      << "vdla: the instruction stream [" << insn_addr << ", " << insn_addr + uint64_t{count} * 16
      << ") is outside the " << dram.size() << "-byte DRAM region";
  std::vector<Insn> program;
  program.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    EncodedInsn e;
    std::memcpy(e.words.data(), dram.data() + insn_addr + uint64_t{i} * 16, 16);
    program.push_back(decode(e, "vdla: instruction #" + std::to_string(i)));
  }
  return run_decoded(dram, program, opt);
}

Stats Device::run(std::span<uint8_t> dram, std::span<const Insn> program, const RunOptions& opt) {
  std::vector<Insn> insns(program.begin(), program.end());
  for (uint32_t i = 0; i < insns.size(); ++i) encode(insns[i], insn_where(i, insns[i]));
  return run_decoded(dram, insns, opt);
}

/// One run: the modules' queues and clocks, the token FIFOs (push time stamps), the DRAM port.
class Pipeline {
 public:
  Pipeline(Device& dev, std::span<uint8_t> dram, const std::vector<Insn>& program,
           const RunOptions& opt)
      : dev_(dev), cfg_(dev.cfg_), dram_(dram), program_(program), opt_(opt) {}

  Stats run() {
    for (uint32_t i = 0; i < program_.size(); ++i) {
      const Module m = module_of(program_[i]);
      check_flags(i, m);
      queues_[static_cast<int>(m)].push_back(i);
    }
    while (true) {
      // The module whose next instruction can start earliest runs it; FINISH waits until the
      // load and store modules can do nothing more.
      int best = -1;
      uint64_t best_start = std::numeric_limits<uint64_t>::max();
      bool finish_ready = false;
      for (int m = 0; m < 3; ++m) {
        if (pc_[m] == queues_[m].size()) continue;
        const uint32_t idx = queues_[m][pc_[m]];
        uint64_t start = 0;
        if (!ready(static_cast<Module>(m), idx, &start)) continue;
        if (program_[idx].opcode == Opcode::kFinish) {
          finish_ready = true;
          continue;
        }
        if (start < best_start) {
          best_start = start;
          best = m;
        }
      }
      if (best < 0 && finish_ready) {
        finish();
        break;
      }
      if (best < 0) deadlock();
      step(static_cast<Module>(best), best_start);
    }
    return stats_;
  }

 private:
  // Whether the module's next instruction can start, and when: its module is free, its popped
  // tokens exist (and were pushed), its pushes have room.
  bool ready(Module m, uint32_t idx, uint64_t* start) const {
    const QueueUse q = queue_use(m, program_[idx].dep);
    uint64_t t = std::max(clock_[static_cast<int>(m)], now_);
    for (int p : q.pops) {
      if (p < 0) continue;
      if (tokens_[p].empty()) return false;
      t = std::max(t, tokens_[p].front());
    }
    for (int p : q.pushes) {
      if (p >= 0 && tokens_[p].size() >= static_cast<size_t>(cfg_.token_depth)) return false;
    }
    *start = t;
    return true;
  }

  void step(Module m, uint64_t start) {
    const int mi = static_cast<int>(m);
    const uint32_t idx = queues_[mi][pc_[mi]];
    const Insn& insn = program_[idx];
    const QueueUse q = queue_use(m, insn.dep);
    for (int p : q.pops) {
      if (p >= 0) tokens_[p].pop_front();
    }
    execute_insn(cfg_, dev_.inp_, dev_.wgt_, dev_.acc_, dev_.uop_, dram_, idx, insn, opt_.execute,
                 stats_);

    uint64_t end = start;
    if ((insn.opcode == Opcode::kLoad || insn.opcode == Opcode::kStore) && insn.x_size > 0) {
      const DmaCost c = dma_cost(cfg_, insn);
      const uint64_t transfer_start = std::max(start + c.latency, port_free_);
      port_free_ = transfer_start + c.transfer;
      stats_.dram_busy += c.transfer;
      end = port_free_ + c.pad;
    } else {
      end = start + compute_cost(cfg_, insn);
    }
    const uint64_t busy = end - start;
    switch (m) {
      case Module::kLoad:
        stats_.load_insns++, stats_.load_busy += busy;
        break;
      case Module::kCompute:
        stats_.compute_insns++, stats_.compute_busy += busy;
        break;
      case Module::kStore:
        stats_.store_insns++, stats_.store_busy += busy;
        break;
    }
    for (int p : q.pushes) {
      if (p >= 0) tokens_[p].push_back(end);
    }
    clock_[mi] = end;
    now_ = start;
    pc_[mi]++;
  }

  void finish() {
    const int c = static_cast<int>(Module::kCompute);
    const uint32_t idx = queues_[c][pc_[c]];
    const std::string blocked = blocked_modules();
    KILN_USER_CHECK(blocked.empty())
        << "vdla: deadlock: " << blocked << "; FINISH (#" << idx
        << ") is reached and cannot wait for them (the stream must make FINISH wait for "
           "every module, with a token to compute)";
    uint64_t start = 0;
    ready(Module::kCompute, idx, &start);
    step(Module::kCompute, start);
    stats_.cycles = clock_[c];
    if (pc_[c] < queues_[c].size()) {
      const uint32_t after = queues_[c][pc_[c]];
      KILN_USER_ERROR() << insn_where(after, program_[after]) << ": instruction after FINISH (#"
                        << idx << ")";
    }
    for (int p = 0; p < 4; ++p) {
      KILN_USER_CHECK(tokens_[p].empty())
          << "vdla: unbalanced token stream: " << tokens_[p].size() << " token(s) left in queue "
          << kQueueNames[p] << " after FINISH (#" << idx << ")";
    }
  }

  std::string waiting_on(Module m, uint32_t idx) const {
    const QueueUse q = queue_use(m, program_[idx].dep);
    std::ostringstream os;
    for (int p : q.pops) {
      if (p >= 0 && tokens_[p].empty())
        os << ", popping queue " << kQueueNames[p] << ", which is empty";
    }
    for (int p : q.pushes) {
      if (p >= 0 && tokens_[p].size() >= static_cast<size_t>(cfg_.token_depth)) {
        os << ", pushing to queue " << kQueueNames[p] << ", which is full (" << cfg_.token_depth
           << " tokens, the FIFO's depth)";
      }
    }
    return os.str();
  }

  // "load module blocked at instruction #3 (LOAD INP), popping queue c2l ..., which is empty; ..."
  // for every module that has instructions left (FINISH excluded).
  std::string blocked_modules() const {
    std::ostringstream os;
    bool any = false;
    for (int m = 0; m < 3; ++m) {
      if (pc_[m] == queues_[m].size()) continue;
      const uint32_t idx = queues_[m][pc_[m]];
      if (program_[idx].opcode == Opcode::kFinish) continue;
      os << (any ? "; " : "") << module_name(static_cast<Module>(m))
         << " module blocked at instruction #" << idx << " (" << insn_kind(program_[idx]) << ")"
         << waiting_on(static_cast<Module>(m), idx);
      any = true;
    }
    return os.str();
  }

  [[noreturn]] void deadlock() const {
    const std::string blocked = blocked_modules();
    if (blocked.empty())
      KILN_USER_ERROR() << "vdla: the stream of " << program_.size()
                        << " instructions has no FINISH";
    KILN_USER_ERROR() << "vdla: deadlock: " << blocked;
  }

  void check_flags(uint32_t i, Module m) const {
    const DepFlags& f = program_[i].dep;
    if (m == Module::kLoad) {
      KILN_USER_CHECK(!f.pop_prev && !f.push_prev)
          << insn_where(i, program_[i])
          << ": the load module has no previous stage (pop_prev/push_prev set)";
    }
    if (m == Module::kStore) {
      KILN_USER_CHECK(!f.pop_next && !f.push_next)
          << insn_where(i, program_[i])
          << ": the store module has no next stage (pop_next/push_next set)";
    }
  }

  Device& dev_;
  const Config& cfg_;
  std::span<uint8_t> dram_;
  const std::vector<Insn>& program_;
  const RunOptions& opt_;
  Stats stats_;
  std::array<std::vector<uint32_t>, 3> queues_;
  std::array<size_t, 3> pc_{};
  std::array<uint64_t, 3> clock_{};
  std::array<std::deque<uint64_t>, 4> tokens_;
  uint64_t port_free_ = 0;
  uint64_t now_ = 0;
};

Stats Device::run_decoded(std::span<uint8_t> dram, const std::vector<Insn>& program,
                          const RunOptions& opt) {
  return Pipeline(*this, dram, program, opt).run();
}

}  // namespace kiln::vdla
