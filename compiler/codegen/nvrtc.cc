// NVRTC through dlopen, and ptxas as a child process. The few NVRTC entry points Kiln calls are
// declared here (from CUDA 13's nvrtc.h, whose C ABI is stable) so that building Kiln needs no
// CUDA headers.
#include "compiler/codegen/nvrtc.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <regex>
#include <sstream>

#include "base/error.h"

namespace kiln::codegen {
namespace {

// ---- NVRTC's C API (nvrtc.h) ----
using nvrtcResult = int;  // NVRTC_SUCCESS = 0
using nvrtcProgram = struct _nvrtcProgram*;
constexpr nvrtcResult kNvrtcSuccess = 0;

struct Nvrtc {
  const char* (*GetErrorString)(nvrtcResult);
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char* src, const char* name, int num_headers,
                               const char* const* headers, const char* const* include_names);
  nvrtcResult (*DestroyProgram)(nvrtcProgram*);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int num_options, const char* const* options);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetPTX)(nvrtcProgram, char*);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*);
};

/// libnvrtc's entry points, loaded once; nullptr when the library is not there.
const Nvrtc* load_nvrtc() {
  static std::once_flag once;
  static Nvrtc api;
  static bool loaded = false;
  std::call_once(once, [] {
    void* lib = dlopen("libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) lib = dlopen("/usr/local/cuda/lib64/libnvrtc.so.13", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      return fn != nullptr;
    };
    loaded = get(api.GetErrorString, "nvrtcGetErrorString") &&
             get(api.CreateProgram, "nvrtcCreateProgram") &&
             get(api.DestroyProgram, "nvrtcDestroyProgram") &&
             get(api.CompileProgram, "nvrtcCompileProgram") &&
             get(api.GetPTXSize, "nvrtcGetPTXSize") && get(api.GetPTX, "nvrtcGetPTX") &&
             get(api.GetProgramLogSize, "nvrtcGetProgramLogSize") &&
             get(api.GetProgramLog, "nvrtcGetProgramLog");
  });
  return loaded ? &api : nullptr;
}

/// The kernel defined above line `line` (1-based) of `source`, or "" when none is.
std::string kernel_at_line(const std::string& source, int line) {
  static const std::regex kKernel(R"(__global__ void(?: __launch_bounds__\(\d+\))? (\w+)\()");
  std::istringstream in(source);
  std::string text, kernel;
  std::smatch m;
  for (int i = 1; i <= line && std::getline(in, text); ++i) {
    if (std::regex_search(text, m, kKernel)) kernel = m[1];
  }
  return kernel;
}

/// The digits and suffix of "sm_XY[a|f]"; raises kiln::Error otherwise.
std::pair<int, std::string> parse_sm(const std::string& sm_arch) {
  static const std::regex kSm(R"(sm_(\d+)([af]?))");
  std::smatch m;
  KILN_USER_CHECK(std::regex_match(sm_arch, m, kSm))
      << "cuda: arch '" << sm_arch << "' is not of the form sm_XY (e.g. -arch=sm_90)";
  return {std::stoi(m[1]), m[2]};
}

}  // namespace

bool nvrtc_available() { return load_nvrtc() != nullptr; }

bool nvrtc_accepts(const std::string& sm_arch) { return parse_sm(sm_arch).first >= 75; }

std::string nvrtc_virtual_arch(const std::string& sm_arch) {
  auto [number, suffix] = parse_sm(sm_arch);
  KILN_USER_CHECK(number >= 75)
      << "cuda: " << sm_arch << " is older than sm_75, and CUDA 13's NVRTC compiles only "
      << "compute_75 and newer (older GPUs get PTX from LLVM's NVPTX back-end)";
  return "compute_" + std::to_string(number) + suffix;
}

std::string nvrtc_compile(const std::string& source, const std::string& sm_arch,
                          const std::string& program) {
  const Nvrtc* api = load_nvrtc();
  KILN_USER_CHECK(api != nullptr) << "NVRTC not found (libnvrtc.so.13): install the CUDA toolkit";
  const std::string arch_option = "--gpu-architecture=" + nvrtc_virtual_arch(sm_arch);
  std::vector<const char*> options = {arch_option.c_str(), "--std=c++17"};
  // Headers beyond NVRTC's built-in ones (cuda_fp16.h) come from the toolkit when it is there.
  const std::string include = "-I/usr/local/cuda/include";
  if (std::filesystem::exists("/usr/local/cuda/include/cuda_fp16.h"))
    options.push_back(include.c_str());

  nvrtcProgram prog = nullptr;
  nvrtcResult r = api->CreateProgram(&prog, source.c_str(), program.c_str(), 0, nullptr, nullptr);
  KILN_SYSTEM_CHECK(r == kNvrtcSuccess)
      << "nvrtc: cannot create a program for " << program << ": " << api->GetErrorString(r);
  struct Destroy {
    const Nvrtc* api;
    nvrtcProgram* prog;
    ~Destroy() { api->DestroyProgram(prog); }
  } destroy{api, &prog};

  r = api->CompileProgram(prog, static_cast<int>(options.size()), options.data());
  if (r != kNvrtcSuccess) {
    size_t size = 0;
    api->GetProgramLogSize(prog, &size);
    std::string log(size, '\0');
    if (size > 0) api->GetProgramLog(prog, log.data());
    while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
    std::smatch m;
    const std::regex first_error("\\((\\d+)\\): (catastrophic )?error");
    std::string kernel;
    if (std::regex_search(log, m, first_error)) kernel = kernel_at_line(source, std::stoi(m[1]));
    KILN_USER_ERROR() << "nvrtc: " << program << " does not compile for " << sm_arch
                      << (kernel.empty() ? "" : " (kernel '" + kernel + "')") << ": "
                      << api->GetErrorString(r) << "\n"
                      << log;
  }
  size_t size = 0;
  r = api->GetPTXSize(prog, &size);
  KILN_SYSTEM_CHECK(r == kNvrtcSuccess)
      << "nvrtc: no PTX for " << program << ": " << api->GetErrorString(r);
  std::string ptx(size, '\0');
  r = api->GetPTX(prog, ptx.data());
  KILN_SYSTEM_CHECK(r == kNvrtcSuccess)
      << "nvrtc: no PTX for " << program << ": " << api->GetErrorString(r);
  while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  return ptx;
}

std::string find_ptxas() {
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME")) dirs.push_back(std::string(home) + "/bin");
  dirs.emplace_back("/usr/local/cuda/bin");
  if (const char* path = std::getenv("PATH")) {
    std::istringstream in(path);
    for (std::string d; std::getline(in, d, ':');) dirs.push_back(d);
  }
  for (const std::string& d : dirs) {
    const std::string p = d + "/ptxas";
    if (!d.empty() && access(p.c_str(), X_OK) == 0 && p.find('\'') == std::string::npos) return p;
  }
  return "";
}

std::vector<KernelResources> ptxas_resources(const std::string& ptx, const std::string& sm_arch) {
  parse_sm(sm_arch);
  const std::string ptxas = find_ptxas();
  KILN_USER_CHECK(!ptxas.empty()) << "ptxas not found: install the CUDA toolkit";
  char path[] = "/tmp/kiln-ptxas-XXXXXX.ptx";
  const int fd = mkstemps(path, 4);
  KILN_SYSTEM_CHECK(fd >= 0) << "ptxas: cannot create a temporary file in /tmp";
  close(fd);
  struct Remove {
    const char* p;
    ~Remove() { std::remove(p); }
  } remove{path};
  {
    std::ofstream out(path, std::ios::binary);
    out << ptx;
    KILN_SYSTEM_CHECK(out.good()) << "ptxas: cannot write " << path;
  }
  const std::string command =
      "'" + ptxas + "' -arch=" + sm_arch + " -v -o /dev/null '" + path + "' 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  KILN_SYSTEM_CHECK(pipe != nullptr) << "ptxas: cannot run " << ptxas;
  std::string output;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) output.append(buf, n);
  const int status = pclose(pipe);
  KILN_USER_CHECK(status == 0) << "ptxas rejects the PTX for " << sm_arch << ":\n" << output;

  // ptxas info    : Compiling entry function 'mm' for 'sm_90'
  // ptxas info    : Function properties for mm
  //     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
  // ptxas info    : Used 40 registers, 8192 bytes smem, 380 bytes cmem[0]
  static const std::regex kEntry(R"(Compiling entry function '(\w+)')");
  static const std::regex kFrame(R"((\d+) bytes stack frame, (\d+) bytes spill stores)");
  static const std::regex kUsed(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  std::vector<KernelResources> out;
  std::istringstream in(output);
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (std::regex_search(line, m, kEntry)) {
      out.push_back({m[1], 0, 0, 0, 0});
    } else if (out.empty()) {
      continue;
    } else if (std::regex_search(line, m, kFrame)) {
      out.back().stack_bytes = std::stoll(m[1]);
      out.back().spill_bytes = std::stoll(m[2]);
    } else if (std::regex_search(line, m, kUsed)) {
      out.back().registers = std::stoi(m[1]);
      if (std::regex_search(line, m, kSmem)) out.back().shared_bytes = std::stoll(m[1]);
    }
  }
  return out;
}

void check_kernel_resources(const std::vector<KernelResources>& resources,
                            const target::Target& target) {
  constexpr int kMaxRegisters = 255;
  for (const KernelResources& r : resources) {
    KILN_USER_CHECK(r.registers <= kMaxRegisters)
        << "cuda: kernel '" << r.kernel << "' needs " << r.registers
        << " registers per thread; a thread has at most " << kMaxRegisters;
    KILN_USER_CHECK(target.max_shared_memory_per_block <= 0 ||
                    r.shared_bytes <= target.max_shared_memory_per_block)
        << "cuda: kernel '" << r.kernel << "' needs " << r.shared_bytes
        << " bytes of shared memory per block; " << target.str() << " gives a block "
        << target.max_shared_memory_per_block;
  }
}

}  // namespace kiln::codegen
