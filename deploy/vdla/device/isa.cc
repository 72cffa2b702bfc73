// Encoding and decoding of VDLA instructions and micro-ops: one table of (field, low bit, width)
// per kind, walked by both directions so that they cannot disagree.
#include "deploy/vdla/device/isa.h"

#include <sstream>

#include "base/error.h"

namespace kiln::vdla {

namespace {

uint64_t get_bits(const EncodedInsn& e, int lo, int width) {
  uint64_t v = 0;
  for (int b = 0; b < width; ++b) {
    const int bit = lo + b;
    v |= ((e.words[bit / 64] >> (bit % 64)) & 1u) << b;
  }
  return v;
}

void set_bits(EncodedInsn& e, int lo, int width, uint64_t v) {
  for (int b = 0; b < width; ++b) {
    const int bit = lo + b;
    const uint64_t mask = uint64_t{1} << (bit % 64);
    if ((v >> b) & 1u) {
      e.words[bit / 64] |= mask;
    } else {
      e.words[bit / 64] &= ~mask;
    }
  }
}

void put(EncodedInsn& e, const std::string& where, const char* field, int lo, int width,
         uint64_t v) {
  KILN_USER_CHECK(width == 64 || v < (uint64_t{1} << width))
      << where << ": field " << field << " = " << v << " does not fit its " << width
      << " bits (at most " << ((uint64_t{1} << width) - 1) << ")";
  set_bits(e, lo, width, v);
}

// The fields of LOAD/STORE and GEMM/ALU, (name, member, low bit, width), shared by both directions.
struct Field {
  const char* name;
  uint32_t Insn::*member;
  int lo, width;
};

constexpr Field kMemFields[] = {
    {"sram_base", &Insn::sram_base, 10, 16}, {"dram_base", &Insn::dram_base, 26, 32},
    {"y_size", &Insn::y_size, 64, 16},       {"x_size", &Insn::x_size, 80, 16},
    {"x_stride", &Insn::x_stride, 96, 16},   {"y_pad_0", &Insn::y_pad_0, 112, 4},
    {"y_pad_1", &Insn::y_pad_1, 116, 4},     {"x_pad_0", &Insn::x_pad_0, 120, 4},
    {"x_pad_1", &Insn::x_pad_1, 124, 4},
};

constexpr Field kComputeFields[] = {
    {"uop_bgn", &Insn::uop_bgn, 8, 13},
    {"uop_end", &Insn::uop_end, 21, 14},
    {"iter_out", &Insn::iter_out, 35, 14},
    {"iter_in", &Insn::iter_in, 49, 14},
    {"dst_factor_out", &Insn::dst_factor_out, 64, 11},
    {"dst_factor_in", &Insn::dst_factor_in, 75, 11},
    {"src_factor_out", &Insn::src_factor_out, 86, 11},
    {"src_factor_in", &Insn::src_factor_in, 97, 11},
};

constexpr Field kWgtFields[] = {
    {"wgt_factor_out", &Insn::wgt_factor_out, 108, 10},
    {"wgt_factor_in", &Insn::wgt_factor_in, 118, 10},
};

}  // namespace

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::kLoad:
      return "LOAD";
    case Opcode::kStore:
      return "STORE";
    case Opcode::kGemm:
      return "GEMM";
    case Opcode::kFinish:
      return "FINISH";
    case Opcode::kAlu:
      return "ALU";
  }
  return "?";
}

const char* mem_type_name(MemType m) {
  switch (m) {
    case MemType::kUop:
      return "UOP";
    case MemType::kWgt:
      return "WGT";
    case MemType::kInp:
      return "INP";
    case MemType::kAcc:
      return "ACC";
    case MemType::kOut:
      return "OUT";
    case MemType::kAcc8:
      return "ACC_8BIT";
  }
  return "?";
}

const char* alu_op_name(AluOp op) {
  switch (op) {
    case AluOp::kMin:
      return "MIN";
    case AluOp::kMax:
      return "MAX";
    case AluOp::kAdd:
      return "ADD";
    case AluOp::kShr:
      return "SHR";
    case AluOp::kMul:
      return "MUL";
  }
  return "?";
}

EncodedInsn encode(const Insn& insn, const std::string& where_arg) {
  const std::string where = where_arg.empty() ? "vdla: " + insn_kind(insn) : where_arg;
  EncodedInsn e;
  put(e, where, "opcode", 0, 3, static_cast<uint64_t>(insn.opcode));
  set_bits(e, 3, 1, insn.dep.pop_prev);
  set_bits(e, 4, 1, insn.dep.pop_next);
  set_bits(e, 5, 1, insn.dep.push_prev);
  set_bits(e, 6, 1, insn.dep.push_next);
  switch (insn.opcode) {
    case Opcode::kLoad:
    case Opcode::kStore:
      put(e, where, "memory_type", 7, 3, static_cast<uint64_t>(insn.mem_type));
      for (const Field& f : kMemFields) put(e, where, f.name, f.lo, f.width, insn.*f.member);
      break;
    case Opcode::kGemm:
    case Opcode::kAlu:
      set_bits(e, 7, 1, insn.reset);
      for (const Field& f : kComputeFields) put(e, where, f.name, f.lo, f.width, insn.*f.member);
      if (insn.opcode == Opcode::kGemm) {
        for (const Field& f : kWgtFields) put(e, where, f.name, f.lo, f.width, insn.*f.member);
      } else {
        put(e, where, "alu_opcode", 108, 3, static_cast<uint64_t>(insn.alu_op));
        set_bits(e, 111, 1, insn.use_imm);
        KILN_USER_CHECK(insn.imm >= -32768 && insn.imm <= 32767)
            << where << ": field imm = " << insn.imm << " does not fit its 16 signed bits";
        set_bits(e, 112, 16, static_cast<uint16_t>(static_cast<int16_t>(insn.imm)));
      }
      break;
    case Opcode::kFinish:
      break;
  }
  return e;
}

Insn decode(const EncodedInsn& e, const std::string& where) {
  Insn insn;
  const uint64_t op = get_bits(e, 0, 3);
  KILN_USER_CHECK(op <= 4) << where << ": bad opcode " << op
                           << " (known: LOAD=0, STORE=1, GEMM=2, FINISH=3, ALU=4)";
  insn.opcode = static_cast<Opcode>(op);
  insn.dep.pop_prev = get_bits(e, 3, 1);
  insn.dep.pop_next = get_bits(e, 4, 1);
  insn.dep.push_prev = get_bits(e, 5, 1);
  insn.dep.push_next = get_bits(e, 6, 1);
  switch (insn.opcode) {
    case Opcode::kLoad:
    case Opcode::kStore: {
      const uint64_t m = get_bits(e, 7, 3);
      KILN_USER_CHECK(m <= 5) << where << " (" << opcode_name(insn.opcode) << "): bad memory type "
                              << m << " (known: UOP=0, WGT=1, INP=2, ACC=3, OUT=4, ACC_8BIT=5)";
      insn.mem_type = static_cast<MemType>(m);
      for (const Field& f : kMemFields)
        insn.*f.member = static_cast<uint32_t>(get_bits(e, f.lo, f.width));
      break;
    }
    case Opcode::kGemm:
    case Opcode::kAlu:
      insn.reset = get_bits(e, 7, 1);
      for (const Field& f : kComputeFields)
        insn.*f.member = static_cast<uint32_t>(get_bits(e, f.lo, f.width));
      if (insn.opcode == Opcode::kGemm) {
        for (const Field& f : kWgtFields)
          insn.*f.member = static_cast<uint32_t>(get_bits(e, f.lo, f.width));
      } else {
        const uint64_t a = get_bits(e, 108, 3);
        KILN_USER_CHECK(a <= 4) << where << " (ALU): bad ALU opcode " << a
                                << " (known: MIN=0, MAX=1, ADD=2, SHR=3, MUL=4)";
        insn.alu_op = static_cast<AluOp>(a);
        insn.use_imm = get_bits(e, 111, 1);
        insn.imm = static_cast<int16_t>(static_cast<uint16_t>(get_bits(e, 112, 16)));
      }
      break;
    case Opcode::kFinish:
      break;
  }
  return insn;
}

uint32_t encode_uop(const Uop& u) {
  KILN_USER_CHECK(u.dst < (1u << 11))
      << "vdla: micro-op dst " << u.dst << " does not fit its 11 bits";
  KILN_USER_CHECK(u.src < (1u << 11))
      << "vdla: micro-op src " << u.src << " does not fit its 11 bits";
  KILN_USER_CHECK(u.wgt < (1u << 10))
      << "vdla: micro-op wgt " << u.wgt << " does not fit its 10 bits";
  return u.dst | (u.src << 11) | (u.wgt << 22);
}

Uop decode_uop(uint32_t bits) {
  return Uop{bits & 0x7ffu, (bits >> 11) & 0x7ffu, (bits >> 22) & 0x3ffu};
}

std::string insn_kind(const Insn& insn) {
  std::string s = opcode_name(insn.opcode);
  switch (insn.opcode) {
    case Opcode::kLoad:
      s += " ";
      s += mem_type_name(insn.mem_type);
      if (insn.x_size == 0) s += " (no-op)";
      break;
    case Opcode::kStore:
      if (insn.x_size == 0) s += " (no-op)";
      break;
    case Opcode::kGemm:
      if (insn.reset) s += " reset";
      break;
    case Opcode::kAlu:
      s += " ";
      s += alu_op_name(insn.alu_op);
      break;
    case Opcode::kFinish:
      break;
  }
  return s;
}

std::string describe(const Insn& insn) {
  std::ostringstream os;
  os << insn_kind(insn);
  switch (insn.opcode) {
    case Opcode::kLoad:
    case Opcode::kStore:
      os << " sram=" << insn.sram_base << " dram=" << insn.dram_base << " y=" << insn.y_size
         << " x=" << insn.x_size << " stride=" << insn.x_stride << " pad=(" << insn.y_pad_0 << ","
         << insn.y_pad_1 << "," << insn.x_pad_0 << "," << insn.x_pad_1 << ")";
      break;
    case Opcode::kGemm:
    case Opcode::kAlu:
      os << " uop=[" << insn.uop_bgn << "," << insn.uop_end << ") iter=" << insn.iter_out << "x"
         << insn.iter_in << " dst=(" << insn.dst_factor_out << "," << insn.dst_factor_in
         << ") src=(" << insn.src_factor_out << "," << insn.src_factor_in << ")";
      if (insn.opcode == Opcode::kGemm) {
        os << " wgt=(" << insn.wgt_factor_out << "," << insn.wgt_factor_in << ")";
      } else if (insn.use_imm) {
        os << " imm=" << insn.imm;
      }
      break;
    case Opcode::kFinish:
      break;
  }
  if (insn.dep.pop_prev) os << " pop_prev";
  if (insn.dep.pop_next) os << " pop_next";
  if (insn.dep.push_prev) os << " push_prev";
  if (insn.dep.push_next) os << " push_next";
  return os.str();
}

Insn make_load(MemType m, uint32_t sram_base, uint32_t dram_base, uint32_t y_size, uint32_t x_size,
               uint32_t x_stride, uint32_t y_pad_0, uint32_t y_pad_1, uint32_t x_pad_0,
               uint32_t x_pad_1) {
  Insn i;
  i.opcode = Opcode::kLoad;
  i.mem_type = m;
  i.sram_base = sram_base;
  i.dram_base = dram_base;
  i.y_size = y_size;
  i.x_size = x_size;
  i.x_stride = x_stride;
  i.y_pad_0 = y_pad_0;
  i.y_pad_1 = y_pad_1;
  i.x_pad_0 = x_pad_0;
  i.x_pad_1 = x_pad_1;
  return i;
}

Insn make_store(uint32_t sram_base, uint32_t dram_base, uint32_t y_size, uint32_t x_size,
                uint32_t x_stride) {
  Insn i = make_load(MemType::kOut, sram_base, dram_base, y_size, x_size, x_stride);
  i.opcode = Opcode::kStore;
  return i;
}

Insn make_gemm(bool reset, uint32_t uop_bgn, uint32_t uop_end, uint32_t iter_out, uint32_t iter_in,
               uint32_t dst_fo, uint32_t dst_fi, uint32_t src_fo, uint32_t src_fi, uint32_t wgt_fo,
               uint32_t wgt_fi) {
  Insn i;
  i.opcode = Opcode::kGemm;
  i.reset = reset;
  i.uop_bgn = uop_bgn;
  i.uop_end = uop_end;
  i.iter_out = iter_out;
  i.iter_in = iter_in;
  i.dst_factor_out = dst_fo;
  i.dst_factor_in = dst_fi;
  i.src_factor_out = src_fo;
  i.src_factor_in = src_fi;
  i.wgt_factor_out = wgt_fo;
  i.wgt_factor_in = wgt_fi;
  return i;
}

Insn make_alu(AluOp op, uint32_t uop_bgn, uint32_t uop_end, uint32_t iter_out, uint32_t iter_in,
              uint32_t dst_fo, uint32_t dst_fi, uint32_t src_fo, uint32_t src_fi, bool use_imm,
              int32_t imm) {
  Insn i =
      make_gemm(false, uop_bgn, uop_end, iter_out, iter_in, dst_fo, dst_fi, src_fo, src_fi, 0, 0);
  i.opcode = Opcode::kAlu;
  i.alu_op = op;
  i.use_imm = use_imm;
  i.imm = imm;
  return i;
}

Insn make_finish() { return Insn{}; }

}  // namespace kiln::vdla
