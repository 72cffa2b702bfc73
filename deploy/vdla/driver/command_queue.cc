// Building instruction streams: DMA descriptors, the micro-kernel cache over the UOP buffer, and
// the dependence-token rules of VTA's runtime.
#include "deploy/vdla/driver/command_queue.h"

#include <cstring>

#include "base/error.h"
#include "deploy/vdla/device/cycle_model.h"

namespace kiln::vdla {

Stage stage_of(const Insn& insn) {
  return static_cast<Stage>(static_cast<int>(module_of(insn)) + 1);
}

namespace {

void check_stage_pair(const char* what, int from, int to) {
  KILN_USER_CHECK(from >= kLoadStage && from <= kStoreStage && to >= kLoadStage &&
                  to <= kStoreStage)
      << "vdla: " << what << "(" << from << ", " << to
      << "): stages are load 1, compute 2, store 3";
  KILN_USER_CHECK(from - to == 1 || to - from == 1)
      << "vdla: " << what << "(" << from << ", " << to
      << "): tokens flow only between neighbouring stages "
      << "(load-compute, compute-store)";
}

}  // namespace

CommandQueue::CommandQueue(Device& device, Dram& dram) : device_(device), dram_(dram) {}

Insn& CommandQueue::append(Stage stage, Insn insn) {
  insn.dep.pop_prev = pending_pop_prev_[stage];
  insn.dep.pop_next = pending_pop_next_[stage];
  pending_pop_prev_[stage] = pending_pop_next_[stage] = false;
  insns_.push_back(insn);
  return insns_.back();
}

void CommandQueue::push_noop(Stage stage, bool push_prev, bool push_next) {
  Insn noop = stage == kStoreStage
                  ? make_store(0, 0, 0, 0, 0)
                  : make_load(stage == kLoadStage ? MemType::kInp : MemType::kUop, 0, 0, 0, 0, 0);
  Insn& i = append(stage, noop);
  i.dep.push_prev = push_prev;
  i.dep.push_next = push_next;
}

void CommandQueue::commit_pending_pop(int stage) {
  if (pending_pop_prev_[stage] || pending_pop_next_[stage])
    push_noop(static_cast<Stage>(stage), false, false);
}

void CommandQueue::load_buffer_2d(MemType mem, uint32_t sram_index, uint64_t dram_addr,
                                  uint32_t x_size, uint32_t y_size, uint32_t x_stride,
                                  uint32_t x_pad_before, uint32_t y_pad_before,
                                  uint32_t x_pad_after, uint32_t y_pad_after) {
  const Config& cfg = device_.config();
  const int64_t eb = dram_elem_bytes(cfg, mem);
  KILN_USER_CHECK(mem != MemType::kOut) << "vdla: load_buffer_2d: OUT is a store's memory type";
  KILN_USER_CHECK(dram_addr % eb == 0)
      << "vdla: load_buffer_2d: DRAM address " << dram_addr << " is not aligned to the " << eb
      << "-byte " << mem_type_name(mem) << " element";
  KILN_USER_CHECK(x_size > 0)
      << "vdla: load_buffer_2d: x_size must be positive (0 is the no-op encoding)";
  Insn insn = make_load(mem, sram_index, static_cast<uint32_t>(dram_addr / eb), y_size, x_size,
                        x_stride, y_pad_before, y_pad_after, x_pad_before, x_pad_after);
  encode(insn, "vdla: load_buffer_2d " + std::string(mem_type_name(mem)));  // field widths
  append(stage_of(insn), insn);
}

void CommandQueue::store_buffer_2d(uint32_t sram_index, uint64_t dram_addr, uint32_t x_size,
                                   uint32_t y_size, uint32_t x_stride) {
  const int64_t eb = device_.config().out_row_bytes();
  KILN_USER_CHECK(dram_addr % eb == 0) << "vdla: store_buffer_2d: DRAM address " << dram_addr
                                       << " is not aligned to the " << eb << "-byte output element";
  KILN_USER_CHECK(x_size > 0)
      << "vdla: store_buffer_2d: x_size must be positive (0 is the no-op encoding)";
  Insn insn =
      make_store(sram_index, static_cast<uint32_t>(dram_addr / eb), y_size, x_size, x_stride);
  encode(insn, "vdla: store_buffer_2d");
  append(kStoreStage, insn);
}

CommandQueue::CachedKernel& CommandQueue::lookup(const std::string& signature, UopKernel&& fresh,
                                                 const std::function<void(UopKernel&)>& record) {
  auto it = kernels_.find(signature);
  if (it != kernels_.end()) {
    const UopKernel& k = it->second->kernel;
    KILN_USER_CHECK(k.opcode() == fresh.opcode() && k.reset() == fresh.reset() &&
                    k.alu_op() == fresh.alu_op() && k.use_imm() == fresh.use_imm() &&
                    k.imm() == fresh.imm())
        << "vdla: micro-kernel signature '" << signature
        << "' was recorded as another kind of kernel";
    return *it->second;
  }
  record(fresh);
  fresh.finish();
  const uint64_t n = fresh.uops().size();
  KILN_USER_CHECK(n <= static_cast<uint64_t>(device_.config().uop_depth()))
      << "vdla: micro-kernel '" << signature << "' has " << n
      << " micro-ops, more than the UOP buffer's " << device_.config().uop_depth();
  auto cached = std::make_unique<CachedKernel>(CachedKernel{std::move(fresh), 0, -1});
  cached->dram_addr = dram_.alloc(n * Config::kUopBytes, 64);
  uint8_t* p = dram_.at(cached->dram_addr, n * Config::kUopBytes);
  for (const Uop& u : cached->kernel.uops()) {
    const uint32_t bits = encode_uop(u);
    std::memcpy(p, &bits, 4);
    p += 4;
  }
  return *kernels_.emplace(signature, std::move(cached)).first->second;
}

void CommandQueue::issue_kernel(CachedKernel& k) {
  const UopKernel& kernel = k.kernel;
  const uint32_t n = static_cast<uint32_t>(kernel.uops().size());
  if (k.sram_begin < 0) {
    // Place it in the ring, evicting whatever it overlaps.
    const uint32_t depth = static_cast<uint32_t>(device_.config().uop_depth());
    if (uop_ring_next_ + n > depth) uop_ring_next_ = 0;
    const int64_t b = uop_ring_next_, e = b + n;
    for (auto& [sig, other] : kernels_) {
      if (other->sram_begin < 0) continue;
      const int64_t ob = other->sram_begin,
                    oe = ob + static_cast<int64_t>(other->kernel.uops().size());
      if (ob < e && b < oe) other->sram_begin = -1;
    }
    k.sram_begin = b;
    uop_ring_next_ += n;
    append(kComputeStage,
           make_load(MemType::kUop, static_cast<uint32_t>(b),
                     static_cast<uint32_t>(k.dram_addr / Config::kUopBytes), 1, n, n));
    ++uop_loads_;
  }
  const auto& loops = kernel.loops();
  const UopLoop outer = loops.size() > 0 ? loops[0] : UopLoop{};
  const UopLoop inner = loops.size() > 1 ? loops[1] : UopLoop{};
  const uint32_t bgn = static_cast<uint32_t>(k.sram_begin);
  Insn insn = kernel.opcode() == Opcode::kGemm
                  ? make_gemm(kernel.reset(), bgn, bgn + n, outer.extent, inner.extent,
                              outer.dst_factor, inner.dst_factor, outer.src_factor,
                              inner.src_factor, outer.wgt_factor, inner.wgt_factor)
                  : make_alu(kernel.alu_op(), bgn, bgn + n, outer.extent, inner.extent,
                             outer.dst_factor, inner.dst_factor, outer.src_factor, inner.src_factor,
                             kernel.use_imm(), kernel.imm());
  encode(insn, "vdla: micro-kernel '" + kernel.signature() + "'");
  append(kComputeStage, insn);
}

void CommandQueue::push_gemm(const std::string& signature, bool reset,
                             const std::function<void(UopKernel&)>& record) {
  issue_kernel(lookup(signature, UopKernel::gemm(signature, reset), record));
}

void CommandQueue::push_alu(const std::string& signature, AluOp op, bool use_imm, int32_t imm,
                            const std::function<void(UopKernel&)>& record) {
  issue_kernel(lookup(signature, UopKernel::alu(signature, op, use_imm, imm), record));
}

void CommandQueue::dep_push(int from, int to) {
  check_stage_pair("dep_push", from, to);
  commit_pending_pop(from);
  if (!insns_.empty()) {
    Insn& last = insns_.back();
    if (stage_of(last) == from) {
      if (from < to && !last.dep.push_next) {
        last.dep.push_next = true;
        return;
      }
      if (from > to && !last.dep.push_prev) {
        last.dep.push_prev = true;
        return;
      }
    }
  }
  push_noop(static_cast<Stage>(from), from > to, from < to);
}

void CommandQueue::dep_pop(int from, int to) {
  check_stage_pair("dep_pop", from, to);
  bool& pending = from < to ? pending_pop_prev_[to] : pending_pop_next_[to];
  if (pending) commit_pending_pop(to);
  pending = true;
}

Stats CommandQueue::synchronize(const RunOptions& opt) {
  dep_push(kStoreStage, kComputeStage);
  dep_push(kLoadStage, kComputeStage);
  dep_pop(kStoreStage, kComputeStage);
  dep_pop(kLoadStage, kComputeStage);
  commit_pending_pop(kComputeStage);  // FINISH carries no pop
  insns_.push_back(make_finish());
  const uint64_t addr = dram_.alloc(insns_.size() * 16, 16);
  uint8_t* p = dram_.at(addr, insns_.size() * 16);
  for (const Insn& insn : insns_) {
    const EncodedInsn e = encode(insn);
    std::memcpy(p, e.words.data(), 16);
    p += 16;
  }
  const uint32_t count = static_cast<uint32_t>(insns_.size());
  insns_.clear();
  for (int s = 0; s < 4; ++s) pending_pop_prev_[s] = pending_pop_next_[s] = false;
  return device_.run(dram_.bytes(), addr, count, opt);
}

}  // namespace kiln::vdla
