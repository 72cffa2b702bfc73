// Malformed VDLA instruction streams: each is a kiln::Error naming the instruction (its index and
// kind) and the problem, never a hang or a crash (deploy/vdla/device/device.h lists them).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "base/error.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/vdla/conv2d_schedule.h"
#include "compiler/vdla/program.h"
#include "deploy/vdla/device/device.h"
#include "deploy/vdla/driver/command_queue.h"
#include "deploy/vdla/driver/dram.h"

namespace kiln::vdla {
namespace {

/// Runs f, expecting kiln::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const kiln::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
    return;
  } catch (const std::exception& e) {
    FAIL() << "expected kiln::Error, got another exception: " << e.what();
  }
  FAIL() << "expected kiln::Error, nothing was raised";
}

Insn with(Insn i, bool pop_prev, bool pop_next, bool push_prev, bool push_next) {
  i.dep = DepFlags{pop_prev, pop_next, push_prev, push_next};
  return i;
}

const Insn kComputeNoop = make_load(MemType::kUop, 0, 0, 0, 0, 0);
const Insn kLoadNoop = make_load(MemType::kInp, 0, 0, 0, 0, 0);

struct Fixture {
  Device dev{Config{}};
  Dram dram;
  Fixture() {
    dram.alloc(4096);
    dev.uop()[0] = encode_uop(Uop{0, 0, 0});
  }
  void run(const std::vector<Insn>& prog) { dev.run(dram.bytes(), prog); }
};

TEST(VdlaErrors, UnbalancedTokensDeadlockNamingModuleQueueAndInstruction) {
  Fixture f;
  // The GEMM waits for a load that never pushes.
  expect_error(
      [&] {
        f.run({make_load(MemType::kInp, 0, 0, 1, 1, 1),
               with(make_gemm(false, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), true, false, false, false),
               make_finish()});
      },
      {"deadlock", "compute module blocked at instruction #1 (GEMM)", "queue l2c (load->compute)",
       "empty"});
  // Load and store wait for each other through compute.
  expect_error(
      [&] {
        f.run({with(kLoadNoop, false, true, false, false),
               with(make_store(0, 0, 1, 1, 1), true, false, false, false), make_finish()});
      },
      {"deadlock", "load module blocked at instruction #0 (LOAD INP (no-op))", "c2l",
       "store module blocked at instruction #1 (STORE)", "c2s"});
}

TEST(VdlaErrors, LeftoverTokensAreUnbalanced) {
  Fixture f;
  expect_error(
      [&] {
        f.run({with(kComputeNoop, false, false, true, false), make_finish()});
      },
      {"unbalanced token stream", "1 token(s) left in queue c2l (compute->load)", "FINISH (#1)"});
}

// Load pushes 9 tokens to compute before it pops; compute pushes 9 to load before it pops: with
// FIFOs of 8 both wait on a full queue.
TEST(VdlaErrors, TokenQueueOverflowBeyondTheFifoDepth) {
  Fixture f;
  std::vector<Insn> prog;
  for (int i = 0; i < 9; ++i) prog.push_back(with(kLoadNoop, false, false, false, true));
  for (int i = 0; i < 9; ++i) prog.push_back(with(kLoadNoop, false, true, false, false));
  for (int i = 0; i < 9; ++i) prog.push_back(with(kComputeNoop, false, false, true, false));
  for (int i = 0; i < 9; ++i) prog.push_back(with(kComputeNoop, true, false, false, false));
  prog.push_back(make_finish());
  expect_error([&] { f.run(prog); }, {"deadlock", "load module blocked at instruction #8",
                                      "queue l2c (load->compute), which is full (8 tokens",
                                      "compute module blocked at instruction #26",
                                      "queue c2l (compute->load), which is full"});
  // Eight in flight is fine.
  prog.clear();
  for (int i = 0; i < 8; ++i) prog.push_back(with(kLoadNoop, false, false, false, true));
  for (int i = 0; i < 8; ++i) prog.push_back(with(kComputeNoop, true, false, false, false));
  prog.push_back(make_finish());
  f.run(prog);
}

TEST(VdlaErrors, SramIndexOutOfRange) {
  Fixture f;
  expect_error(
      [&] {
        f.run({make_load(MemType::kInp, 2040, 0, 1, 10, 10), make_finish()});
      },
      {"instruction #0 (LOAD INP)", "INP rows [2040, 2050)", "2048 rows"});
  // Padding counts: 1 + 3 + 1 rows of 1 + 1 + 1 at row 2040.
  expect_error(
      [&] {
        f.run({make_load(MemType::kInp, 2040, 0, 1, 1, 1, 1, 1, 1, 1), make_finish()});
      },
      {"INP rows [2040, 2049)"});
  expect_error(
      [&] {
        f.run({make_load(MemType::kWgt, 127, 0, 1, 2, 2), make_finish()});
      },
      {"#0 (LOAD WGT)", "WGT rows [127, 129)", "128 rows"});
  expect_error(
      [&] {
        f.run({kComputeNoop, make_store(2047, 0, 1, 2, 2), make_finish()});
      },
      {"#1 (STORE)", "ACC rows [2047, 2049)"});
  expect_error(
      [&] {
        f.run({make_gemm(false, 8190, 8193, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()});
      },
      {"#0 (GEMM)", "micro-ops [8190, 8193)", "8192 rows"});
}

TEST(VdlaErrors, MicroOpIndexOutOfRange) {
  Fixture f;
  f.dev.uop()[1] = encode_uop(Uop{5, 7, 130});
  expect_error(
      [&] {
        f.run({make_gemm(false, 1, 2, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()});
      },
      {"instruction #0 (GEMM)", "micro-op 1 (dst=5 src=7 wgt=130)", "WGT row 130", "128 rows"});
  // Through the loops: dst 5 + 3 * 700 = 2105.
  expect_error(
      [&] {
        f.run({make_gemm(true, 1, 2, 4, 1, 700, 0, 0, 0, 0, 0), make_finish()});
      },
      {"#0 (GEMM reset)", "ACC row 2105"});
  f.dev.uop()[2] = encode_uop(Uop{0, 2047, 0});
  expect_error(
      [&] {
        f.run({make_alu(AluOp::kAdd, 2, 3, 2, 1, 0, 0, 1, 0, false, 0), make_finish()});
      },
      {"#0 (ALU ADD)", "ACC row 2048"});
}

TEST(VdlaErrors, DramAccessOutsideTheRegion) {
  Fixture f;
  // 4096 bytes = 256 INP elements; rows 250 and 254 (stride 4) of 3 elements end at element 257.
  expect_error(
      [&] {
        f.run({make_load(MemType::kInp, 0, 250, 2, 3, 4), make_finish()});
      },
      {"instruction #0 (LOAD INP)", "DRAM bytes [4000, 4112)", "4096-byte DRAM region"});
  expect_error(
      [&] {
        f.run({kComputeNoop, make_store(0, 256, 1, 1, 1), make_finish()});
      },
      {"#1 (STORE)", "outside the 4096-byte"});
  expect_error([&] { f.dev.run(f.dram.bytes(), 4096 - 16, 2); }, {"instruction stream", "outside"});
}

TEST(VdlaErrors, BadOpcodeAndMemoryType) {
  Fixture f;
  const uint64_t at = f.dram.alloc(48, 16);
  EncodedInsn bad = encode(make_finish());
  bad.words[0] = (bad.words[0] & ~uint64_t{7}) | 6;
  const EncodedInsn fin = encode(make_finish());
  std::memcpy(f.dram.at(at, 16), fin.words.data(), 16);
  std::memcpy(f.dram.at(at + 16, 16), bad.words.data(), 16);
  expect_error([&] { f.dev.run(f.dram.bytes(), at, 2); }, {"instruction #1", "bad opcode 6"});
  EncodedInsn badmem = encode(make_load(MemType::kInp, 0, 0, 1, 1, 1));
  badmem.words[0] |= uint64_t{7} << 7;
  std::memcpy(f.dram.at(at + 32, 16), badmem.words.data(), 16);
  expect_error([&] { f.dev.run(f.dram.bytes(), at + 32, 1); },
               {"instruction #0", "bad memory type 7"});
  expect_error(
      [&] {
        f.run({make_load(MemType::kOut, 0, 0, 1, 1, 1), make_finish()});
      },
      {"#0 (LOAD OUT)", "memory type OUT is only a STORE's"});
  Insn st = make_store(0, 0, 1, 1, 1);
  st.mem_type = MemType::kInp;
  expect_error([&] { f.run({kComputeNoop, st, make_finish()}); }, {"#1 (STORE)", "must be OUT"});
}

TEST(VdlaErrors, StoreWithPadding) {
  Fixture f;
  Insn st = make_store(0, 0, 1, 1, 1);
  st.x_pad_1 = 2;
  expect_error(
      [&] {
        f.run({st, make_finish()});
      },
      {"instruction #0 (STORE)", "takes no padding", "pad=(0,0,0,2)"});
}

TEST(VdlaErrors, SameAccRowInConsecutiveMicroOps) {
  Fixture f;
  f.dev.uop()[3] = encode_uop(Uop{9, 0, 0});
  f.dev.uop()[4] = encode_uop(Uop{9, 1, 1});
  expect_error(
      [&] {
        f.run({make_gemm(false, 3, 5, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()});
      },
      {"instruction #0 (GEMM)", "micro-ops 3 and 4 both accumulate into ACC row 9"});
  // Where it does not matter: a reset only writes.
  f.run({make_gemm(true, 3, 5, 1, 1, 0, 0, 0, 0, 0, 0), make_finish()});
}

TEST(VdlaErrors, FinishMustComeLastAndWaitForEveryModule) {
  Fixture f;
  expect_error([&] { f.run({make_load(MemType::kInp, 0, 0, 1, 1, 1)}); }, {"has no FINISH"});
  expect_error(
      [&] {
        f.run({make_finish(), kComputeNoop});
      },
      {"instruction #1 (LOAD UOP (no-op))", "after FINISH (#0)"});
  // A store that waits on a token nobody pushes when FINISH comes.
  expect_error(
      [&] {
        f.run({with(make_store(0, 0, 1, 1, 1), true, false, false, false), make_finish()});
      },
      {"deadlock", "store module blocked at instruction #0 (STORE)", "c2s",
       "FINISH (#1) is reached"});
}

TEST(VdlaErrors, FlagsAModuleDoesNotHave) {
  Fixture f;
  expect_error(
      [&] {
        f.run({with(make_load(MemType::kWgt, 0, 0, 1, 1, 1), true, false, false, false),
               make_finish()});
      },
      {"#0 (LOAD WGT)", "load module has no previous stage"});
  expect_error(
      [&] {
        f.run({with(make_store(0, 0, 1, 1, 1), false, false, false, true), make_finish()});
      },
      {"#0 (STORE)", "store module has no next stage"});
}

TEST(VdlaErrors, FieldsThatDoNotFitNameTheInstruction) {
  Fixture f;
  expect_error(
      [&] {
        f.run({kComputeNoop, make_gemm(false, 0, 1, 20000, 1, 0, 0, 0, 0, 0, 0), make_finish()});
      },
      {"instruction #1 (GEMM)", "iter_out = 20000", "14 bits"});
}

// The compiled conv2d (compiler/topi/vdla_conv2d.h, compiler/vdla): a config that does not fit
// names what overflows or does not divide; tensors at addresses not aligned to their rows are
// refused by the program, naming the tensor.
TEST(VdlaErrors, Conv2dConfigThatDoesNotFit) {
  const Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d({14, 14, 256, 256, 3, 1, 1}, false);
  vdla_compiler::VdlaConv2dConfig c;
  c.tile_oc = 16;
  c.tile_ic = 16;
  c.tile_h = 14;
  expect_error([&] { vdla_compiler::schedule_vdla_conv2d(op, c, cfg); },
               {"vdla conv2d", "WGT tile of 2304 rows x 1 exceeds 128"});
  c = vdla_compiler::VdlaConv2dConfig{};
  c.tile_oc = 3;
  expect_error([&] { vdla_compiler::schedule_vdla_conv2d(op, c, cfg); },
               {"tile_oc must divide 16"});
  c = vdla_compiler::VdlaConv2dConfig{};
  c.vthreads = 2;
  c.tile_oc = 16;
  expect_error([&] { vdla_compiler::schedule_vdla_conv2d(op, c, cfg); },
               {"two virtual threads split 1 tiles along oc"});
  c = vdla_compiler::VdlaConv2dConfig{};
  c.tile_h = 7;
  const vdla_compiler::VdlaProgram prog = vdla_compiler::build_vdla(
      vdla_compiler::schedule_vdla_conv2d(op, c, cfg), op.args(), "conv2d", cfg);
  Device dev(cfg);
  Dram dram;
  CommandQueue q(dev, dram);
  expect_error(
      [&] {
        prog.emit(q, {0, 64, 0, 0, 0});
      },
      {"vdla program 'conv2d'",
       "tensor 'kernel' at byte address 64 is not aligned to its rows of 256"});
}

// A program comes from a bundle or over the wire: from_json names the call and field of every
// malformed value.
TEST(VdlaErrors, MalformedProgramJsonNamesTheCallAndField) {
  const Config cfg;
  const topi::VdlaConv2d op = topi::vdla_conv2d({8, 8, 32, 32, 3, 1, 1}, false);
  const vdla_compiler::VdlaProgram prog = vdla_compiler::build_vdla(
      vdla_compiler::schedule_vdla_conv2d(op, vdla_compiler::VdlaConv2dConfig{}, cfg), op.args(),
      "conv2d", cfg);
  const std::string good = prog.to_json().dump();
  auto parse = [](const std::string& t) {
    return VdlaProgram::from_json(kiln::Json::parse(t), "p.json");
  };
  EXPECT_EQ(parse(good).calls.size(), prog.calls.size());
  auto broken = [&](const std::string& from, const std::string& to) {
    std::string t = good;
    const size_t at = t.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    return t.replace(at, from.size(), to);
  };
  expect_error([&] { parse(broken("\"kind\":\"load\"", "\"kind\":\"jump\"")); },
               {"p.json: call", "field 'kind' is 'jump'"});
  expect_error([&] { parse(broken("\"arg\":0", "\"arg\":7")); },
               {"p.json: call", "field 'arg' is 7, outside [0, 4]"});
  expect_error([&] { parse(broken("\"pad\":[", "\"pad\":[99,")); },
               {"field 'pad' has 5 values, not 4"});
  expect_error([&] { parse(broken("\"from\":", "\"from\":9,\"x\":")); },
               {"field 'from' is 9, outside [1, 3]"});
  expect_error([&] { parse(broken("\"uops\":[[", "\"uops\":[[4096,0,0],[")); },
               {"micro-op [4096, 0, 0] does not fit its fields"});
  expect_error([&] { parse(broken("\"arg_bytes\":[", "\"arg_bytes\":[-1,")); },
               {"an argument of -1 bytes"});
  expect_error([&] { parse("{\"name\":\"x\"}"); }, {"p.json", "arg_names"});
}

// Random instruction streams (random bits under valid and invalid opcodes, random flags and fields,
// with FINISH or without) either run or raise kiln::Error: never another exception, a crash or a
// hang. Iteration counts are kept small where the stream is executed, so that every run is short.
TEST(VdlaErrors, RandomStreamsRunOrFailCleanly) {
  std::mt19937_64 rng(20181008);
  Device dev{Config{}};
  Dram dram;
  const uint64_t insn_at = dram.alloc(64 * 16, 16);
  dram.alloc(1 << 16);
  for (uint64_t i = insn_at + 64 * 16; i < dram.size(); ++i)
    *dram.at(i) = static_cast<uint8_t>(rng());
  for (uint32_t u = 0; u < 8192; ++u) dev.uop()[u] = static_cast<uint32_t>(rng());
  int ran = 0, refused = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const bool execute = trial % 2 == 0;
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % 40);
    const bool flags = rng() % 4 == 0;  // otherwise no tokens, so that some streams run
    for (uint32_t i = 0; i < n; ++i) {
      EncodedInsn e;
      e.words = {rng(), rng()};
      const uint64_t kinds[] = {0, 0, 1, 2, 4, 3, 5, 6, 7};
      const uint64_t op = kinds[rng() % 1000 < 995 ? rng() % 5 : 5 + rng() % 4];
      e.words[0] = (e.words[0] & ~uint64_t{0x7f}) | op;
      if (flags) e.words[0] |= (rng() % 16) << 3;
      if (op == 0 || op == 1) {
        // A memory type that exists (mostly the kind's own), small sizes, strides and addresses.
        const uint64_t mem =
            rng() % 50 == 0 ? rng() % 8
                            : (op == 1 ? 4 : std::array<uint64_t, 5>{0, 1, 2, 3, 5}[rng() % 5]);
        e.words[0] &=
            ~(uint64_t{7} << 7) & ~(uint64_t{0xffff} << 10) & ~(uint64_t{0xffffffff} << 26);
        e.words[0] |= mem << 7 | (rng() % 2100) << 10 | (rng() % 2048) << 26;
        if (mem == 1) e.words[0] = (e.words[0] & ~(uint64_t{0xffff} << 10)) | (rng() % 130) << 10;
        e.words[1] = (rng() % 8) | (rng() % 64) << 16 | (rng() % 128) << 32;
        if (rng() % 3 == 0) e.words[1] |= (rng() % 65536) << 48;  // padding
      }
      if (op == 2 || op == 4) {
        // Short loops and micro-op ranges, so that executed streams stay fast.
        e.words[0] &=
            ~((uint64_t{0x3fff} << 35) | (uint64_t{0x3fff} << 49) | (uint64_t{0x7ffffff} << 8));
        const uint64_t bgn = rng() % 8200;
        e.words[0] |=
            (1 + rng() % 8) << 35 | (1 + rng() % 8) << 49 | bgn << 8 | (bgn + 1 + rng() % 16) << 21;
        e.words[1] &= ~(uint64_t{0x7ffff} << 44);  // factors below 2^11 (GEMM) / small ALU fields
        if (op == 4 && rng() % 20)
          e.words[1] = (e.words[1] & ~(uint64_t{7} << 44)) | (rng() % 5) << 44;
      }
      std::memcpy(dram.at(insn_at + i * 16, 16), e.words.data(), 16);
    }
    if (rng() % 8) {
      const EncodedInsn fin = encode(make_finish());
      std::memcpy(dram.at(insn_at + n * 16, 16), fin.words.data(), 16);
    } else {
      std::memset(dram.at(insn_at + n * 16, 16), 0, 16);  // a no-op load instead of FINISH
    }
    try {
      dev.run(dram.bytes(), insn_at, n + 1, RunOptions{execute});
      ++ran;
    } catch (const kiln::Error& e) {
      ASSERT_NE(std::string(e.what()).find("vdla"), std::string::npos) << e.what();
      ++refused;
      if (std::getenv("VDLA_FUZZ_VERBOSE")) std::printf("%s\n", e.what());
    } catch (const std::exception& e) {
      FAIL() << "trial " << trial << ": not a kiln::Error: " << e.what();
    }
  }
  EXPECT_GT(refused, 0);
  EXPECT_GT(ran, 0);
  std::printf("random streams: %d ran, %d refused\n", ran, refused);
}

}  // namespace
}  // namespace kiln::vdla
