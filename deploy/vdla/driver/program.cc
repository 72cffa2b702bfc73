// A VDLA program (program.h): replaying it on the driver, and its JSON.
#include "deploy/vdla/driver/program.h"

#include <sstream>

#include "base/error.h"
#include "base/fnv1a.h"

namespace kiln::vdla {

using kiln::Json;

std::string kernel_signature(const KernelCall& k) {
  uint64_t h = kFnv1a64Basis;
  auto mix = [&](uint64_t v) { h = fnv1a64(&v, sizeof v, h); };
  mix(k.gemm);
  mix(k.reset);
  mix(static_cast<uint64_t>(k.op));
  mix(k.use_imm);
  mix(static_cast<uint64_t>(static_cast<uint32_t>(k.imm)));
  for (const auto& l : k.loops) {
    mix(l.extent);
    mix(l.dst_factor);
    mix(l.src_factor);
    mix(l.wgt_factor);
  }
  for (const auto& u : k.uops) mix((uint64_t{u.dst} << 42) | (uint64_t{u.src} << 21) | u.wgt);
  std::ostringstream os;
  os << (k.gemm ? (k.reset ? "gemm.reset" : "gemm") : alu_op_name(k.op)) << " n" << k.uops.size()
     << " l" << k.loops.size() << " #" << std::hex << h;
  return os.str();
}

namespace {
const char* kStageNames[] = {"?", "load", "compute", "store"};
}  // namespace

void VdlaProgram::emit(CommandQueue& q, const std::vector<uint64_t>& addrs) const {
  KILN_USER_CHECK(addrs.size() == arg_names.size())
      << "vdla program '" << name << "' takes " << arg_names.size() << " tensors, got "
      << addrs.size();
  const Config& cfg = q.config();
  for (const DriverCall& c : calls) {
    if (auto d = std::get_if<DmaCall>(&c)) {
      const int64_t row_bytes = d->store                  ? cfg.out_row_bytes()
                                : d->mem == MemType::kWgt ? cfg.wgt_row_bytes()
                                : d->mem == MemType::kAcc ? cfg.acc_row_bytes()
                                                          : cfg.inp_row_bytes();
      KILN_USER_CHECK(addrs[static_cast<size_t>(d->arg)] % static_cast<uint64_t>(row_bytes) == 0)
          << "vdla program '" << name << "': tensor '" << arg_names[static_cast<size_t>(d->arg)]
          << "' at byte address " << addrs[static_cast<size_t>(d->arg)]
          << " is not aligned to its rows of " << row_bytes << " bytes";
      const uint64_t addr =
          addrs[static_cast<size_t>(d->arg)] + d->dram_row * static_cast<uint64_t>(row_bytes);
      if (d->store) {
        q.store_buffer_2d(d->sram, addr, d->x_size, d->y_size, d->x_stride);
      } else {
        q.load_buffer_2d(d->mem, d->sram, addr, d->x_size, d->y_size, d->x_stride, d->x_pad0,
                         d->y_pad0, d->x_pad1, d->y_pad1);
      }
    } else if (auto k = std::get_if<KernelCall>(&c)) {
      auto record = [k](UopKernel& u) {
        for (const auto& l : k->loops)
          u.loop_begin(l.extent, l.dst_factor, l.src_factor, l.wgt_factor);
        for (const auto& x : k->uops) u.push(x.dst, x.src, x.wgt);
        for (size_t i = 0; i < k->loops.size(); ++i) u.loop_end();
      };
      if (k->gemm) {
        q.push_gemm(k->signature, k->reset, record);
      } else {
        q.push_alu(k->signature, k->op, k->use_imm, k->imm, record);
      }
    } else {
      const auto& t = std::get<TokenCall>(c);
      if (t.push) {
        q.dep_push(t.from, t.to);
      } else {
        q.dep_pop(t.from, t.to);
      }
    }
  }
}

std::string VdlaProgram::summary() const {
  int64_t loads = 0, stores = 0, gemm = 0, alu = 0, tokens = 0;
  for (const DriverCall& c : calls) {
    if (auto d = std::get_if<DmaCall>(&c)) {
      (d->store ? stores : loads)++;
    } else if (auto k = std::get_if<KernelCall>(&c)) {
      (k->gemm ? gemm : alu)++;
    } else {
      ++tokens;
    }
  }
  std::ostringstream os;
  os << "loads=" << loads << " stores=" << stores << " gemm=" << gemm << " alu=" << alu
     << " tokens=" << tokens;
  return os.str();
}

std::string VdlaProgram::to_string() const {
  std::ostringstream os;
  const char* const* stage = kStageNames;
  for (const DriverCall& c : calls) {
    if (auto d = std::get_if<DmaCall>(&c)) {
      os << (d->store ? "STORE" : "LOAD ") << " " << (d->store ? "ACC" : mem_type_name(d->mem))
         << "[" << d->sram << "] " << arg_names[static_cast<size_t>(d->arg)] << " row "
         << d->dram_row << " " << d->y_size << "x" << d->x_size << " stride " << d->x_stride
         << " pad " << d->y_pad0 << "," << d->x_pad0 << "," << d->y_pad1 << "," << d->x_pad1
         << "\n";
    } else if (auto k = std::get_if<KernelCall>(&c)) {
      os << (k->gemm ? "GEMM " : "ALU  ") << k->signature << " dst0 "
         << (k->uops.empty() ? 0 : k->uops[0].dst) << " src0 "
         << (k->uops.empty() ? 0 : k->uops[0].src) << "\n";
    } else {
      const auto& t = std::get<TokenCall>(c);
      os << (t.push ? "push " : "pop  ") << stage[t.from] << "->" << stage[t.to] << "\n";
    }
  }
  return os.str();
}

namespace {

Json uint_array(const std::vector<uint32_t>& v) {
  Json::Array a;
  for (uint32_t x : v) a.emplace_back(int64_t{x});
  return a;
}

/// Reads calls[i]'s field `key` as an integer in [lo, hi], naming origin, call and field.
struct Reader {
  const std::string& origin;
  size_t index;
  const Json& j;
  std::string what(const std::string& key) const {
    std::ostringstream os;
    os << origin << ": call " << index << " field '" << key << "'";
    return os.str();
  }
  int64_t num(const std::string& key, int64_t lo, int64_t hi) const {
    const int64_t v = j.at(key, what(key)).as_int(what(key));
    KILN_USER_CHECK(v >= lo && v <= hi)
        << what(key) << " is " << v << ", outside [" << lo << ", " << hi << "]";
    return v;
  }
  bool flag(const std::string& key) const { return j.at(key, what(key)).as_bool(what(key)); }
};

}  // namespace

Json VdlaProgram::to_json() const {
  Json::Array names, bytes, cs;
  for (const auto& n : arg_names) names.emplace_back(n);
  for (int64_t b : arg_bytes) bytes.emplace_back(b);
  for (const DriverCall& c : calls) {
    Json::Object o;
    if (auto d = std::get_if<DmaCall>(&c)) {
      o = {{"kind", d->store ? "store" : "load"},
           {"mem", int64_t{static_cast<uint8_t>(d->mem)}},
           {"sram", int64_t{d->sram}},
           {"arg", d->arg},
           {"dram_row", static_cast<int64_t>(d->dram_row)},
           {"size", uint_array({d->x_size, d->y_size, d->x_stride})},
           {"pad", uint_array({d->x_pad0, d->y_pad0, d->x_pad1, d->y_pad1})}};
    } else if (auto k = std::get_if<KernelCall>(&c)) {
      Json::Array loops, uops;
      for (const auto& l : k->loops)
        loops.emplace_back(uint_array({l.extent, l.dst_factor, l.src_factor, l.wgt_factor}));
      for (const auto& u : k->uops) uops.emplace_back(uint_array({u.dst, u.src, u.wgt}));
      o = {{"kind", k->gemm ? "gemm" : "alu"},
           {"reset", k->reset},
           {"op", int64_t{static_cast<uint8_t>(k->op)}},
           {"use_imm", k->use_imm},
           {"imm", int64_t{k->imm}},
           {"loops", loops},
           {"uops", uops}};
    } else {
      const auto& t = std::get<TokenCall>(c);
      o = {{"kind", t.push ? "push" : "pop"}, {"from", t.from}, {"to", t.to}};
    }
    cs.emplace_back(std::move(o));
  }
  return Json::Object{{"name", name}, {"arg_names", names}, {"arg_bytes", bytes}, {"calls", cs}};
}

VdlaProgram VdlaProgram::from_json(const Json& j, const std::string& origin) {
  VdlaProgram p;
  p.name = j.at("name", origin).as_string(origin + ": 'name'");
  for (const Json& n : j.at("arg_names", origin).as_array(origin + ": 'arg_names'")) {
    p.arg_names.push_back(n.as_string(origin + ": an argument's name"));
  }
  for (const Json& b : j.at("arg_bytes", origin).as_array(origin + ": 'arg_bytes'")) {
    const int64_t v = b.as_int(origin + ": an argument's bytes");
    KILN_USER_CHECK(v > 0 && v <= (int64_t{1} << 32))
        << origin << ": an argument of " << v << " bytes (the VDLA addresses 32-bit DRAM)";
    p.arg_bytes.push_back(v);
  }
  KILN_USER_CHECK(!p.arg_names.empty() && p.arg_names.size() == p.arg_bytes.size())
      << origin << ": " << p.arg_names.size() << " argument names for " << p.arg_bytes.size()
      << " sizes";
  const Json::Array& cs = j.at("calls", origin).as_array(origin + ": 'calls'");
  const int64_t nargs = static_cast<int64_t>(p.arg_names.size());
  constexpr int64_t k16 = 0xffff, k32 = 0xffffffff;
  for (size_t i = 0; i < cs.size(); ++i) {
    Reader r{origin, i, cs[i]};
    const std::string kind = cs[i].at("kind", r.what("kind")).as_string(r.what("kind"));
    auto fields = [&](const std::string& key, size_t n) {
      const Json::Array& a = cs[i].at(key, r.what(key)).as_array(r.what(key));
      KILN_USER_CHECK(a.size() == n) << r.what(key) << " has " << a.size() << " values, not " << n;
      std::vector<uint32_t> v;
      for (const Json& x : a) {
        const int64_t y = x.as_int(r.what(key));
        KILN_USER_CHECK(y >= 0 && y <= k32) << r.what(key) << " holds " << y;
        v.push_back(static_cast<uint32_t>(y));
      }
      return v;
    };
    if (kind == "load" || kind == "store") {
      DmaCall d;
      d.store = kind == "store";
      d.mem = static_cast<MemType>(r.num("mem", 0, 5));
      KILN_USER_CHECK(d.store ? d.mem == MemType::kAcc
                              : d.mem == MemType::kInp || d.mem == MemType::kWgt ||
                                    d.mem == MemType::kAcc)
          << r.what("mem") << ": a " << kind << " of " << mem_type_name(d.mem)
          << " is not a program's DMA";
      d.sram = static_cast<uint32_t>(r.num("sram", 0, k16));
      d.arg = static_cast<int>(r.num("arg", 0, nargs - 1));
      d.dram_row = static_cast<uint64_t>(r.num("dram_row", 0, k32));
      const auto size = fields("size", 3), pad = fields("pad", 4);
      d.x_size = size[0], d.y_size = size[1], d.x_stride = size[2];
      d.x_pad0 = pad[0], d.y_pad0 = pad[1], d.x_pad1 = pad[2], d.y_pad1 = pad[3];
      KILN_USER_CHECK(d.x_size <= k16 && d.y_size <= k16 && d.x_stride <= k16)
          << r.what("size") << ": sizes and stride are 16 bits";
      for (uint32_t x : pad) KILN_USER_CHECK(x <= 15) << r.what("pad") << ": padding is at most 15";
      p.calls.emplace_back(d);
    } else if (kind == "gemm" || kind == "alu") {
      KernelCall k;
      k.gemm = kind == "gemm";
      k.reset = r.flag("reset");
      k.op = static_cast<AluOp>(r.num("op", 0, 4));
      k.use_imm = r.flag("use_imm");
      k.imm = static_cast<int32_t>(r.num("imm", -32768, 32767));
      const Json::Array& loops = cs[i].at("loops", r.what("loops")).as_array(r.what("loops"));
      KILN_USER_CHECK(loops.size() <= 2)
          << r.what("loops") << ": a micro-kernel has at most two loops";
      for (const Json& l : loops) {
        const Json::Array& a = l.as_array(r.what("loops"));
        KILN_USER_CHECK(a.size() == 4)
            << r.what("loops") << ": a loop is [extent, dst, src, wgt factors]";
        std::vector<uint32_t> v;
        for (const Json& x : a) {
          const int64_t y = x.as_int(r.what("loops"));
          KILN_USER_CHECK(y >= 0 && y <= 0x3fff)
              << r.what("loops") << " holds " << y << " (14 bits at most)";
          v.push_back(static_cast<uint32_t>(y));
        }
        k.loops.push_back(UopLoop{v[0], v[1], v[2], v[3]});
      }
      const Json::Array& uops = cs[i].at("uops", r.what("uops")).as_array(r.what("uops"));
      KILN_USER_CHECK(!uops.empty() && uops.size() <= 8192)
          << r.what("uops") << " has " << uops.size() << " micro-ops";
      for (const Json& u : uops) {
        const Json::Array& a = u.as_array(r.what("uops"));
        KILN_USER_CHECK(a.size() == 3) << r.what("uops") << ": a micro-op is [dst, src, wgt]";
        const int64_t dst = a[0].as_int(r.what("uops")), src = a[1].as_int(r.what("uops")),
                      wgt = a[2].as_int(r.what("uops"));
        KILN_USER_CHECK(dst >= 0 && dst < 2048 && src >= 0 && src < 2048 && wgt >= 0 && wgt < 1024)
            << r.what("uops") << ": micro-op [" << dst << ", " << src << ", " << wgt
            << "] does not fit its fields (11, 11 and 10 bits)";
        k.uops.push_back(Uop{static_cast<uint32_t>(dst), static_cast<uint32_t>(src),
                             static_cast<uint32_t>(wgt)});
      }
      k.signature = kernel_signature(k);
      p.calls.emplace_back(std::move(k));
    } else if (kind == "push" || kind == "pop") {
      TokenCall t;
      t.push = kind == "push";
      t.from = static_cast<int>(r.num("from", kLoadStage, kStoreStage));
      t.to = static_cast<int>(r.num("to", kLoadStage, kStoreStage));
      KILN_USER_CHECK(t.from - t.to == 1 || t.to - t.from == 1)
          << r.what("to") << ": tokens go between neighbouring stages, not " << kStageNames[t.from]
          << " and " << kStageNames[t.to];
      p.calls.emplace_back(t);
    } else {
      KILN_USER_ERROR() << r.what("kind") << " is '" << kind
                        << "' (load, store, gemm, alu, push or pop)";
    }
  }
  return p;
}

}  // namespace kiln::vdla
