// The semantics of LOAD, STORE, GEMM and ALU (after VTA's sim_driver.cc):
// every row index is checked against its buffer and every byte against the DRAM region before
// anything is written, so a malformed instruction leaves the device as it was.
#include "deploy/vdla/device/execute.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "deploy/vdla/device/cycle_model.h"

namespace kiln::vdla {

namespace {

struct BufferInfo {
  const char* name;
  int64_t depth;
};

BufferInfo load_target(const Config& cfg, MemType m) {
  switch (m) {
    case MemType::kUop:
      return {"UOP", cfg.uop_depth()};
    case MemType::kWgt:
      return {"WGT", cfg.wgt_depth()};
    case MemType::kInp:
      return {"INP", cfg.inp_depth()};
    case MemType::kAcc:
    case MemType::kAcc8:
    case MemType::kOut:
      return {"ACC", cfg.acc_depth()};
  }
  return {"?", 0};
}

// The DRAM bytes a 2D access touches: rows dram_base + y * x_stride + [0, x_size) for y < y_size.
void check_dram(const InsnRef& where, const Insn& insn, int64_t elem_bytes, size_t dram_size) {
  if (insn.y_size == 0) return;
  const uint64_t first = uint64_t{insn.dram_base} * elem_bytes;
  const uint64_t last_row = uint64_t{insn.dram_base} + uint64_t{insn.y_size - 1} * insn.x_stride;
  const uint64_t end = (last_row + insn.x_size) * elem_bytes;
  KILN_USER_CHECK(end <= dram_size)
      << where << ": DRAM bytes [" << first << ", " << end << ") (element " << insn.dram_base
      << ", " << insn.y_size << " rows of " << insn.x_size << " with stride " << insn.x_stride
      << ", " << elem_bytes << " bytes each) are outside the " << dram_size << "-byte DRAM region";
}

void execute_load(const Config& cfg, std::vector<int8_t>& inp, std::vector<int8_t>& wgt,
                  std::vector<int32_t>& acc, std::vector<uint32_t>& uop, std::span<uint8_t> dram,
                  const InsnRef& where, const Insn& insn, bool execute, Stats& stats) {
  KILN_USER_CHECK(insn.mem_type != MemType::kOut)
      << where
      << ": memory type OUT is only a STORE's; a LOAD reads UOP, WGT, INP, ACC or ACC_8BIT";
  if (insn.x_size == 0) return;  // a no-op that only moves tokens
  const BufferInfo buf = load_target(cfg, insn.mem_type);
  const int64_t eb = dram_elem_bytes(cfg, insn.mem_type);
  if (insn.mem_type == MemType::kUop) {
    KILN_USER_CHECK(insn.y_pad_0 == 0 && insn.y_pad_1 == 0 && insn.x_pad_0 == 0 &&
                    insn.x_pad_1 == 0)
        << where << ": a micro-op load takes no padding";
  }
  const uint64_t width = uint64_t{insn.x_pad_0} + insn.x_size + insn.x_pad_1;
  const uint64_t height = uint64_t{insn.y_pad_0} + insn.y_size + insn.y_pad_1;
  const uint64_t end = uint64_t{insn.sram_base} + width * height;
  KILN_USER_CHECK(end <= static_cast<uint64_t>(buf.depth))
      << where << ": " << buf.name << " rows [" << insn.sram_base << ", " << end << ") (" << height
      << " x " << width << " with padding) are beyond the " << buf.name << " buffer's " << buf.depth
      << " rows";
  check_dram(where, insn, eb, dram.size());

  const uint64_t nbytes = uint64_t{insn.y_size} * insn.x_size * eb;
  switch (insn.mem_type) {
    case MemType::kUop:
      stats.uop_load_nbytes += nbytes;
      break;
    case MemType::kWgt:
      stats.wgt_load_nbytes += nbytes;
      break;
    case MemType::kInp:
      stats.inp_load_nbytes += nbytes;
      break;
    default:
      stats.acc_load_nbytes += nbytes;
      break;
  }
  if (!execute && insn.mem_type != MemType::kUop) return;

  const int lanes = cfg.batch() * cfg.block_out();  // int32 lanes of an ACC row
  for (uint64_t y = 0; y < height; ++y) {
    for (uint64_t x = 0; x < width; ++x) {
      const uint64_t row = insn.sram_base + y * width + x;
      const bool pad = y < insn.y_pad_0 || y >= insn.y_pad_0 + insn.y_size || x < insn.x_pad_0 ||
                       x >= insn.x_pad_0 + insn.x_size;
      const uint8_t* src = nullptr;
      if (!pad) {
        const uint64_t elem =
            insn.dram_base + (y - insn.y_pad_0) * insn.x_stride + (x - insn.x_pad_0);
        src = dram.data() + elem * eb;
      }
      switch (insn.mem_type) {
        case MemType::kUop:
          std::memcpy(&uop[row], src, sizeof(uint32_t));
          break;
        case MemType::kWgt:
          if (pad)
            std::fill_n(&wgt[row * eb], eb, 0);
          else
            std::memcpy(&wgt[row * eb], src, eb);
          break;
        case MemType::kInp:
          if (pad)
            std::fill_n(&inp[row * eb], eb, 0);
          else
            std::memcpy(&inp[row * eb], src, eb);
          break;
        case MemType::kAcc:
          if (pad)
            std::fill_n(&acc[row * lanes], lanes, 0);
          else
            std::memcpy(&acc[row * lanes], src, eb);
          break;
        case MemType::kAcc8:
          for (int l = 0; l < lanes; ++l)
            acc[row * lanes + l] = pad ? 0 : static_cast<int8_t>(src[l]);
          break;
        case MemType::kOut:
          break;
      }
    }
  }
}

void execute_store(const Config& cfg, std::vector<int32_t>& acc, std::span<uint8_t> dram,
                   const InsnRef& where, const Insn& insn, bool execute, Stats& stats) {
  KILN_USER_CHECK(insn.mem_type == MemType::kOut)
      << where << ": a STORE's memory type must be OUT (4), got " << mem_type_name(insn.mem_type);
  KILN_USER_CHECK(insn.y_pad_0 == 0 && insn.y_pad_1 == 0 && insn.x_pad_0 == 0 && insn.x_pad_1 == 0)
      << where << ": a STORE takes no padding, got pad=(" << insn.y_pad_0 << "," << insn.y_pad_1
      << "," << insn.x_pad_0 << "," << insn.x_pad_1 << ")";
  if (insn.x_size == 0) return;
  const uint64_t end = uint64_t{insn.sram_base} + uint64_t{insn.y_size} * insn.x_size;
  KILN_USER_CHECK(end <= static_cast<uint64_t>(cfg.acc_depth()))
      << where << ": ACC rows [" << insn.sram_base << ", " << end
      << ") are beyond the ACC buffer's " << cfg.acc_depth() << " rows";
  const int64_t eb = cfg.out_row_bytes();
  check_dram(where, insn, eb, dram.size());
  stats.out_store_nbytes += uint64_t{insn.y_size} * insn.x_size * eb;
  if (!execute) return;
  const int lanes = cfg.batch() * cfg.block_out();
  for (uint64_t y = 0; y < insn.y_size; ++y) {
    for (uint64_t x = 0; x < insn.x_size; ++x) {
      const int32_t* src = &acc[(insn.sram_base + y * insn.x_size + x) * lanes];
      uint8_t* dst = dram.data() + (insn.dram_base + y * insn.x_stride + x) * eb;
      for (int l = 0; l < lanes; ++l) dst[l] = static_cast<uint8_t>(src[l]);
    }
  }
}

// The largest row a micro-op's index reaches over the two loops.
uint64_t max_index(uint32_t base, uint32_t fo, uint32_t fi, const Insn& insn) {
  return uint64_t{base} + uint64_t{insn.iter_out - 1} * fo + uint64_t{insn.iter_in - 1} * fi;
}

void check_compute(const Config& cfg, const std::vector<uint32_t>& uop, const InsnRef& where,
                   const Insn& insn) {
  KILN_USER_CHECK(insn.uop_bgn < insn.uop_end)
      << where << ": empty micro-op range [" << insn.uop_bgn << ", " << insn.uop_end << ")";
  KILN_USER_CHECK(insn.uop_end <= cfg.uop_depth())
      << where << ": micro-ops [" << insn.uop_bgn << ", " << insn.uop_end
      << ") are beyond the UOP buffer's " << cfg.uop_depth() << " rows";
  KILN_USER_CHECK(insn.iter_out > 0 && insn.iter_in > 0)
      << where << ": loop extents iter_out=" << insn.iter_out << " and iter_in=" << insn.iter_in
      << " must be positive";
  const bool gemm = insn.opcode == Opcode::kGemm;
  const char* src_name = gemm ? "INP" : "ACC";
  const int64_t src_depth = gemm ? cfg.inp_depth() : cfg.acc_depth();
  for (uint32_t u = insn.uop_bgn; u < insn.uop_end; ++u) {
    const Uop op = decode_uop(uop[u]);
    const uint64_t d = max_index(op.dst, insn.dst_factor_out, insn.dst_factor_in, insn);
    KILN_USER_CHECK(d < static_cast<uint64_t>(cfg.acc_depth()))
        << where << ": micro-op " << u << " (dst=" << op.dst << " src=" << op.src
        << " wgt=" << op.wgt << ") reaches ACC row " << d << ", beyond the ACC buffer's "
        << cfg.acc_depth() << " rows";
    if (gemm && insn.reset) continue;
    const uint64_t s = max_index(op.src, insn.src_factor_out, insn.src_factor_in, insn);
    KILN_USER_CHECK(s < static_cast<uint64_t>(src_depth))
        << where << ": micro-op " << u << " (dst=" << op.dst << " src=" << op.src
        << " wgt=" << op.wgt << ") reaches " << src_name << " row " << s << ", beyond the "
        << src_name << " buffer's " << src_depth << " rows";
    if (!gemm) continue;
    const uint64_t w = max_index(op.wgt, insn.wgt_factor_out, insn.wgt_factor_in, insn);
    KILN_USER_CHECK(w < static_cast<uint64_t>(cfg.wgt_depth()))
        << where << ": micro-op " << u << " (dst=" << op.dst << " src=" << op.src
        << " wgt=" << op.wgt << ") reaches WGT row " << w << ", beyond the WGT buffer's "
        << cfg.wgt_depth() << " rows";
    // The accumulating pipeline issues one micro-op per cycle: the same ACC row twice in a row
    // reads the row before the first write lands (VTA's UopKernel::VerifyDep).
    if (u > insn.uop_bgn) {
      const Uop prev = decode_uop(uop[u - 1]);
      KILN_USER_CHECK(prev.dst != op.dst)
          << where << ": micro-ops " << u - 1 << " and " << u << " both accumulate into ACC row "
          << op.dst << " (a read-after-write hazard of the II=1 pipeline)";
    }
  }
}

void execute_gemm(const Config& cfg, std::vector<int8_t>& inp, std::vector<int8_t>& wgt,
                  std::vector<int32_t>& acc, const std::vector<uint32_t>& uop, const Insn& insn) {
  const int batch = cfg.batch(), bi = cfg.block_in(), bo = cfg.block_out();
  for (uint32_t i = 0; i < insn.iter_out; ++i) {
    for (uint32_t j = 0; j < insn.iter_in; ++j) {
      for (uint32_t u = insn.uop_bgn; u < insn.uop_end; ++u) {
        const Uop op = decode_uop(uop[u]);
        const uint64_t a = op.dst + i * insn.dst_factor_out + j * insn.dst_factor_in;
        int32_t* out = &acc[a * batch * bo];
        if (insn.reset) {
          std::fill_n(out, batch * bo, 0);
          continue;
        }
        const uint64_t s = op.src + i * insn.src_factor_out + j * insn.src_factor_in;
        const uint64_t w = op.wgt + i * insn.wgt_factor_out + j * insn.wgt_factor_in;
        const int8_t* x = &inp[s * batch * bi];
        const int8_t* wr = &wgt[w * bo * bi];
        for (int b = 0; b < batch; ++b) {
          for (int o = 0; o < bo; ++o) {
            int32_t sum = 0;
            for (int k = 0; k < bi; ++k) sum += int32_t{x[b * bi + k]} * int32_t{wr[o * bi + k]};
            // Accumulation wraps at 32 bits.
            int32_t& r = out[b * bo + o];
            r = static_cast<int32_t>(static_cast<uint32_t>(r) + static_cast<uint32_t>(sum));
          }
        }
      }
    }
  }
}

int32_t alu(AluOp op, int32_t a, int32_t b) {
  switch (op) {
    case AluOp::kMin:
      return std::min(a, b);
    case AluOp::kMax:
      return std::max(a, b);
    case AluOp::kAdd:
      return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
    case AluOp::kMul:
      return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b));
    case AluOp::kShr:
      // Arithmetic shift right; a negative amount shifts left (VTA's simulator). Amounts past 31
      // saturate: right by 31 keeps the sign, left by 32 or more gives 0.
      if (b >= 0) return a >> std::min(b, 31);
      if (b <= -32) return 0;
      return static_cast<int32_t>(static_cast<uint32_t>(a) << -b);
  }
  return a;
}

void execute_alu(const Config& cfg, std::vector<int32_t>& acc, const std::vector<uint32_t>& uop,
                 const Insn& insn) {
  const int lanes = cfg.batch() * cfg.block_out();
  for (uint32_t i = 0; i < insn.iter_out; ++i) {
    for (uint32_t j = 0; j < insn.iter_in; ++j) {
      for (uint32_t u = insn.uop_bgn; u < insn.uop_end; ++u) {
        const Uop op = decode_uop(uop[u]);
        const uint64_t d = op.dst + i * insn.dst_factor_out + j * insn.dst_factor_in;
        const uint64_t s = op.src + i * insn.src_factor_out + j * insn.src_factor_in;
        int32_t* dst = &acc[d * lanes];
        const int32_t* src = &acc[s * lanes];
        for (int l = 0; l < lanes; ++l)
          dst[l] = alu(insn.alu_op, dst[l], insn.use_imm ? insn.imm : src[l]);
      }
    }
  }
}

}  // namespace

std::string insn_where(uint32_t index, const Insn& insn) {
  return "vdla: instruction #" + std::to_string(index) + " (" + insn_kind(insn) + ")";
}

std::ostream& operator<<(std::ostream& os, const InsnRef& where) {
  return os << insn_where(where.index, where.insn);
}

void execute_insn(const Config& cfg, std::vector<int8_t>& inp, std::vector<int8_t>& wgt,
                  std::vector<int32_t>& acc, std::vector<uint32_t>& uop, std::span<uint8_t> dram,
                  uint32_t index, const Insn& insn, bool execute, Stats& stats) {
  switch (insn.opcode) {
    case Opcode::kLoad:
      execute_load(cfg, inp, wgt, acc, uop, dram, InsnRef{index, insn}, insn, execute, stats);
      return;
    case Opcode::kStore:
      execute_store(cfg, acc, dram, InsnRef{index, insn}, insn, execute, stats);
      return;
    case Opcode::kGemm: {
      check_compute(cfg, uop, InsnRef{index, insn}, insn);
      const uint64_t n = uint64_t{insn.iter_out} * insn.iter_in * (insn.uop_end - insn.uop_bgn);
      if (insn.reset)
        stats.reset_counter += n;
      else
        stats.gemm_counter += n;
      if (execute) execute_gemm(cfg, inp, wgt, acc, uop, insn);
      return;
    }
    case Opcode::kAlu:
      check_compute(cfg, uop, InsnRef{index, insn}, insn);
      stats.alu_counter += uint64_t{insn.iter_out} * insn.iter_in * (insn.uop_end - insn.uop_bgn);
      if (execute) execute_alu(cfg, acc, uop, insn);
      return;
    case Opcode::kFinish:
      return;
  }
}

}  // namespace kiln::vdla
