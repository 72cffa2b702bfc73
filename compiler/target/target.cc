// Parsing and printing of target strings, and the device limits each kind of target implies.
#include "compiler/target/target.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "base/error.h"
#include "base/host_arch.h"
#include "deploy/vdla/device/config.h"

namespace kiln::target {
namespace {

constexpr std::array<std::string_view, 2> kArches = {"x86_64", "aarch64"};

/// The options each kind accepts, in the order str() prints them.
std::vector<std::string_view> known_options(TargetKind kind) {
  switch (kind) {
    case TargetKind::kCpu:
      return {"mtriple", "mcpu", "mattr", "model"};
    case TargetKind::kCuda:
      return {"arch", "max_num_threads", "model"};
    case TargetKind::kOpenCL:
      return {"device", "max_num_threads", "model"};
    case TargetKind::kVdla:
      break;
  }
  return {"model"};
}

template <typename C>
std::string join(const C& items, std::string_view prefix = "") {
  std::string out;
  for (const auto& it : items) {
    if (!out.empty()) out += ", ";
    out += prefix;
    out += it;
  }
  return out;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

/// The architecture part of a triple, with LLVM's aliases folded ("arm64" is "aarch64").
std::string triple_arch(const std::string& triple) {
  std::string a = triple.substr(0, triple.find('-'));
  if (a == "amd64" || a == "x86-64") return "x86_64";
  if (a == "arm64") return "aarch64";
  return a;
}

bool host_has(std::string_view feature) {
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (feature == "avx512f") return __builtin_cpu_supports("avx512f");
  if (feature == "avx2") return __builtin_cpu_supports("avx2");
  if (feature == "avx") return __builtin_cpu_supports("avx");
#endif
  (void)feature;
  return false;
}

/// SIMD width of an x86 CPU by name: the ones with AVX-512, then those with AVX/AVX2.
int x86_cpu_vector_bits(const std::string& cpu) {
  static const std::array<std::string_view, 17> k512 = {"skylake-avx512",
                                                        "cascadelake",
                                                        "cooperlake",
                                                        "cannonlake",
                                                        "icelake-client",
                                                        "icelake-server",
                                                        "tigerlake",
                                                        "rocketlake",
                                                        "sapphirerapids",
                                                        "emeraldrapids",
                                                        "graniterapids",
                                                        "graniterapids-d",
                                                        "znver4",
                                                        "znver5",
                                                        "x86-64-v4",
                                                        "knl",
                                                        "knm"};
  static const std::array<std::string_view, 19> k256 = {
      "sandybridge", "ivybridge",    "haswell",    "broadwell", "skylake",
      "alderlake",   "raptorlake",   "meteorlake", "arrowlake", "lunarlake",
      "gracemont",   "sierraforest", "znver1",     "znver2",    "znver3",
      "bdver1",      "bdver4",       "btver2",     "x86-64-v3"};
  if (std::find(k512.begin(), k512.end(), cpu) != k512.end()) return 512;
  if (std::find(k256.begin(), k256.end(), cpu) != k256.end()) return 256;
  return 128;
}

int llvm_vector_bits(const Target& t) {
  if (t.arch_name() == "aarch64") return 128;  // NEON; SVE widths are not used
  int bits = 128;
  if (t.cpu == "native") {
    bits = host_has("avx512f") ? 512 : (host_has("avx2") || host_has("avx")) ? 256 : 128;
  } else if (!t.cpu.empty()) {
    bits = x86_cpu_vector_bits(t.cpu);
  }
  // Explicit feature changes win over the CPU's defaults, the last mention of each first.
  if (!t.mattr.empty()) {
    for (const std::string& f : split(t.mattr, ',')) {
      const std::string name = f.substr(1);
      const bool on = f[0] == '+';
      if (name == "avx512f") {
        bits = on ? 512 : std::min(bits, 256);
      } else if (name == "avx2" || name == "avx") {
        bits = on ? std::max(bits, 256) : std::min(bits, 128);
      }
    }
  }
  return bits;
}

/// One core's L1 data and L2 cache of an llvm target: the host's where the code is for this
/// machine's CPU, else typical sizes (AVX-512 server cores: 32 KiB and 1 MiB or more; AVX2 cores
/// and ARM boards: 32 KiB and 256-512 KiB, the lower taken).
std::pair<int64_t, int64_t> llvm_cache_bytes(const Target& t) {
  if (t.is_host() && (t.cpu.empty() || t.cpu == "native")) {
    const long l1 = sysconf(_SC_LEVEL1_DCACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (l1 > 0 && l2 > 0) return {l1, l2};
  }
  if (t.vector_bits >= 512) return {32 << 10, 1 << 20};
  return {32 << 10, 256 << 10};
}

int parse_positive(const std::string& value, const std::string& option, const std::string& s) {
  int v = 0;
  auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  KILN_USER_CHECK(ec == std::errc() && ptr == value.data() + value.size() && v > 0)
      << "option '-" << option << "' in target string '" << s
      << "' must be a positive integer, got '" << value << "'";
  return v;
}

}  // namespace

std::string host_triple() { return std::string(host_arch()) + "-unknown-linux-gnu"; }

Target Target::parse(const std::string& s) {
  std::vector<std::string> tokens;
  {
    std::istringstream in(s);
    std::string tok;
    while (in >> tok) tokens.push_back(tok);
  }
  KILN_USER_CHECK(!tokens.empty())
      << "empty target string (known kinds: " << known_target_kinds() << ")";
  const std::optional<TargetKind> kind = find_target_kind(tokens[0]);
  KILN_USER_CHECK(kind) << "unknown target kind '" << tokens[0] << "' in target string '" << s
                        << "' (known: " << known_target_kinds() << ")";
  Target t;
  t.kind = *kind;

  const std::vector<std::string_view> known = known_options(t.kind);
  std::vector<std::string> seen;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const std::string& tok = tokens[i];
    const size_t eq = tok.find('=');
    const size_t start = tok[0] == '-' ? 1 : 0;
    const std::string name = tok.substr(start, eq == std::string::npos ? eq : eq - start);
    const bool is_known = start == 1 && std::find(known.begin(), known.end(), name) != known.end();
    KILN_USER_CHECK(is_known) << "unknown option '" << tok.substr(0, eq) << "' for target kind '"
                              << t.kind << "' in target string '" << s
                              << "' (known: " << join(known, "-") << ")";
    KILN_USER_CHECK(eq != std::string::npos && eq + 1 < tok.size())
        << "option '-" << name << "' in target string '" << s << "' needs a value (-" << name
        << "=...)";
    KILN_USER_CHECK(std::find(seen.begin(), seen.end(), name) == seen.end())
        << "option '-" << name << "' is given twice in target string '" << s << "'";
    seen.push_back(name);
    const std::string value = tok.substr(eq + 1);
    if (name == "mtriple") {
      t.triple = value;
    } else if (name == "mcpu") {
      t.cpu = value;
    } else if (name == "mattr") {
      t.mattr = value;
    } else if (name == "model") {
      t.model = value;
    } else if (name == "arch") {
      t.arch = value;
    } else if (name == "device") {
      t.device = value;
    } else if (name == "max_num_threads") {
      t.max_num_threads = parse_positive(value, name, s);
    }
  }

  if (t.kind == TargetKind::kCpu) {
    if (!t.triple.empty()) {
      const std::string a = triple_arch(t.triple);
      KILN_USER_CHECK(std::find(kArches.begin(), kArches.end(), a) != kArches.end())
          << "unsupported architecture '" << a << "' of -mtriple=" << t.triple
          << " in target string '" << s << "' (known: " << join(kArches) << ")";
    }
    KILN_USER_CHECK(t.cpu != "native" || t.is_host())
        << "-mcpu=native in target string '" << s << "' needs the host triple (this machine is "
        << host_triple() << ")";
    for (const std::string& f : split(t.mattr, ',')) {
      KILN_USER_CHECK(t.mattr.empty() || (f.size() > 1 && (f[0] == '+' || f[0] == '-')))
          << "feature '" << f << "' of -mattr in target string '" << s
          << "' must start with '+' or '-' (e.g. -mattr=+avx2,-avx512f)";
    }
    t.vector_bits = llvm_vector_bits(t);
    std::tie(t.l1d_bytes, t.l2_bytes) = llvm_cache_bytes(t);
  } else if (t.kind == TargetKind::kCuda) {
    const bool arch_ok = t.arch.empty() || (t.arch.size() > 3 && t.arch.rfind("sm_", 0) == 0 &&
                                            std::isdigit(static_cast<unsigned char>(t.arch[3])));
    KILN_USER_CHECK(arch_ok) << "option '-arch' in target string '" << s
                             << "' must look like sm_80, got '" << t.arch << "'";
    t.max_block_dims[0] = 1024, t.max_block_dims[1] = 1024, t.max_block_dims[2] = 64;
    if (t.max_num_threads == 0) t.max_num_threads = 1024;
    t.max_shared_memory_per_block = 48 * 1024;
    t.thread_warp_size = 32;
  } else if (t.kind == TargetKind::kOpenCL) {
    // OpenCL 1.2's minimum of CL_DEVICE_MAX_WORK_ITEM_SIZES for a GPU (Mali: 256 each).
    t.max_block_dims[0] = 256, t.max_block_dims[1] = 256, t.max_block_dims[2] = 64;
    if (t.max_num_threads == 0) t.max_num_threads = 256;
    t.max_shared_memory_per_block = 32 * 1024;
    t.thread_warp_size = 1;
  } else if (t.kind == TargetKind::kVdla) {
    t.clock_mhz = vdla::Config{}.clock_mhz;
  }
  return t;
}

std::string Target::str() const {
  std::string out(target_kind_name(kind));
  auto add = [&](const char* name, const std::string& v) {
    if (!v.empty()) out += std::string(" -") + name + "=" + v;
  };
  if (kind == TargetKind::kCpu) {
    add("mtriple", triple);
    add("mcpu", cpu);
    add("mattr", mattr);
  } else if (kind == TargetKind::kCuda) {
    add("arch", arch);
    if (max_num_threads != 1024) add("max_num_threads", std::to_string(max_num_threads));
  } else if (kind == TargetKind::kOpenCL) {
    add("device", device);
    if (max_num_threads != 256) add("max_num_threads", std::to_string(max_num_threads));
  }
  add("model", model);
  return out;
}

std::string Target::arch_name() const { return triple.empty() ? host_arch() : triple_arch(triple); }

std::string Target::llvm_triple() const { return triple.empty() ? host_triple() : triple; }

bool Target::is_host() const {
  if (kind != TargetKind::kCpu) return false;
  if (triple.empty()) return true;
  // The OS part matters too: a linux .so does not load on another OS.
  return triple_arch(triple) == host_arch() && triple.find("linux") != std::string::npos;
}

}  // namespace kiln::target
