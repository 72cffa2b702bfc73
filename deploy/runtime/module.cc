// Module loading (dlopen) and checked calls through the c_abi.h convention.
#include "deploy/runtime/module.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "deploy/runtime/workspace.h"

namespace kiln::runtime {
namespace {

/// A shared object opened with dlopen; closed when the last reference goes. A library loaded from
/// bytes also owns its memfd, closed after dlclose: while the library is loaded its descriptor
/// number cannot be reused, so no other library is ever opened under the same /proc/self/fd/N
/// name (the loader would take that for the library already loaded).
class LibraryModuleNode final : public ModuleNode {
 public:
  LibraryModuleNode(void* handle, std::string name, int memfd = -1)
      : handle_(handle), name_(std::move(name)), memfd_(memfd) {}
  ~LibraryModuleNode() override {
    dlclose(handle_);
    if (memfd_ >= 0) ::close(memfd_);
  }

  void* symbol(const std::string& name) override { return dlsym(handle_, name.c_str()); }
  std::string kind() const override { return "library"; }
  std::string name() const override { return name_; }

 private:
  void* handle_;
  std::string name_;
  int memfd_;
};

/// dlerror() keeps its message in per-thread state, but dlopen and dlerror together are not
/// atomic with respect to other loader users in this process; serialize ours.
std::mutex g_dl_mu;

/// dlopen(path, RTLD_NOW | RTLD_LOCAL), or nullptr with the loader's reason in *reason.
void* open_library(const std::string& path, std::string* reason) {
  std::lock_guard<std::mutex> lock(g_dl_mu);
  dlerror();  // clear
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = dlerror();
    *reason = e != nullptr ? e : "unknown reason";
  }
  return handle;
}

/// A memfd whose pages may be mapped executable: MFD_EXEC (Linux 6.3) where the kernel knows it,
/// so that a vm.memfd_noexec policy does not seal it against execution.
int executable_memfd(const char* name) {
  constexpr unsigned kMfdExec = 0x0010U;  // MFD_EXEC, missing from older headers
  const int fd = memfd_create(name, MFD_CLOEXEC | kMfdExec);
  if (fd >= 0 || errno != EINVAL) return fd;
  return memfd_create(name, MFD_CLOEXEC);
}

/// The ELF machine this process runs (e_machine of its own code), 0 where unknown.
constexpr uint16_t host_elf_machine() {
#if defined(__x86_64__)
  return 62;  // EM_X86_64
#elif defined(__aarch64__)
  return 183;  // EM_AARCH64
#elif defined(__i386__)
  return 3;  // EM_386
#elif defined(__arm__)
  return 40;  // EM_ARM
#elif defined(__riscv)
  return 243;  // EM_RISCV
#elif defined(__powerpc64__)
  return 21;  // EM_PPC64
#else
  return 0;
#endif
}

std::string elf_machine_name(uint16_t machine) {
  switch (machine) {
    case 62:
      return "x86_64";
    case 183:
      return "aarch64";
    case 3:
      return "i386";
    case 40:
      return "arm (32-bit)";
    case 243:
      return "riscv";
    case 21:
      return "ppc64";
    default:
      return "ELF machine " + std::to_string(machine);
  }
}

/// kiln::Error when `header` (a library's first bytes) is an ELF file for another CPU
/// architecture than this process's: the loader would only say "wrong ELF class" or "invalid ELF
/// header". Anything that is not ELF is left to the loader.
void check_machine(std::string_view header, const std::string& what) {
  constexpr size_t kMachineOffset = 18;  // e_machine, after e_ident[16] and e_type
  constexpr char kElfMagic[] = {'\x7f', 'E', 'L', 'F'};
  if (header.size() < kMachineOffset + 2 || header.substr(0, 4) != std::string_view(kElfMagic, 4)) {
    return;
  }
  const auto b0 = static_cast<uint8_t>(header[kMachineOffset]);
  const auto b1 = static_cast<uint8_t>(header[kMachineOffset + 1]);
  const bool big_endian = header[5] == 2;  // e_ident[EI_DATA]: 1 little-, 2 big-endian
  const auto machine = static_cast<uint16_t>(big_endian ? (b0 << 8) | b1 : (b1 << 8) | b0);
  constexpr uint16_t host = host_elf_machine();
  if (host == 0 || machine == host) return;
  KILN_USER_ERROR() << what << " is for " << elf_machine_name(machine) << ", this machine runs "
                    << elf_machine_name(host) << " (compile the model with a --target for this "
                    << "machine, or run it on the machine it was compiled for)";
}

const char* kind_word(char c) {
  switch (c) {
    case 't':
      return "tensor";
    case 'i':
      return "int";
    case 'f':
      return "float";
    default:
      return "?";
  }
}

const char* kind_noun(Arg::Kind k) {
  switch (k) {
    case Arg::Kind::kTensor:
      return "a tensor";
    case Arg::Kind::kInt:
      return "an integer";
    case Arg::Kind::kFloat:
      return "a float";
  }
  return "?";
}

}  // namespace

Module Module::from_node(std::shared_ptr<ModuleNode> node) {
  KILN_USER_CHECK(node != nullptr) << "Module::from_node: null module node";
  if (void* p = node->symbol("__kiln_parallel_launch")) {
    *static_cast<KilnParallelLaunch*>(p) = &kiln_parallel_launch;
  }
  if (void* p = node->symbol("__kiln_workspace_alloc")) {
    *static_cast<KilnWorkspaceAlloc*>(p) = &kiln_workspace_alloc;
  }
  if (void* p = node->symbol("__kiln_workspace_free")) {
    *static_cast<KilnWorkspaceFree*>(p) = &kiln_workspace_free;
  }
  return Module(std::move(node));
}

Module Module::load_library(const std::string& path) {
  {
    std::ifstream file(path, std::ios::binary);
    char header[20] = {};
    file.read(header, sizeof header);
    check_machine(std::string_view(header, static_cast<size_t>(file.gcount())),
                  "cannot load module '" + path + "': the library");
  }
  std::string reason;
  void* handle = open_library(path, &reason);
  KILN_USER_CHECK(handle != nullptr) << "cannot load module '" << path << "': " << reason;
  return from_node(std::make_shared<LibraryModuleNode>(handle, "library '" + path + "'"));
}

Module Module::load_library_bytes(const std::string& library, const std::string& origin) {
  check_machine(library, "cannot load the library of " + origin + ": the library");
  const int fd = executable_memfd("kiln-library");
  KILN_ICHECK(fd >= 0) << "cannot load the library of " << origin
                       << ": memfd_create failed: " << std::strerror(errno);
  size_t done = 0;
  while (done < library.size()) {
    const ssize_t n = ::write(fd, library.data() + done, library.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int write_errno = errno;
  if (done != library.size()) ::close(fd);
  KILN_ICHECK(done == library.size())
      << "cannot load the library of " << origin
      << ": writing it to its memfd failed: " << std::strerror(write_errno);
  std::string reason;
  void* handle = open_library("/proc/self/fd/" + std::to_string(fd), &reason);
  if (handle == nullptr) {
    ::close(fd);
    KILN_USER_ERROR() << "cannot load the library of " << origin << ": " << reason;
  }
  return from_node(std::make_shared<LibraryModuleNode>(handle, "library of " + origin, fd));
}

ModuleNode& Module::checked_node() const {
  KILN_USER_CHECK(node_ != nullptr) << "use of a null Module";
  return *node_;
}

void* Module::symbol(const std::string& name) const { return checked_node().symbol(name); }
std::string Module::kind() const { return checked_node().kind(); }
std::string Module::name() const { return checked_node().name(); }

bool Module::has_function(const std::string& name) const {
  return symbol(name) != nullptr && symbol("__kiln_sig_" + name) != nullptr;
}

Function Module::function(const std::string& name) const {
  ModuleNode& node = checked_node();
  void* func = node.symbol(name);
  KILN_USER_CHECK(func != nullptr) << "function '" << name << "' not found in " << node.name();
  const auto* sig = static_cast<const char*>(node.symbol("__kiln_sig_" + name));
  KILN_USER_CHECK(sig != nullptr) << "function '" << name << "' in " << node.name()
                                  << " has no signature (symbol '__kiln_sig_" << name << "')";
  std::string signature(sig);
  for (char c : signature) {
    KILN_USER_CHECK(c == 't' || c == 'i' || c == 'f')
        << "function '" << name << "' in " << node.name() << " has a malformed signature '"
        << signature << "' (expected letters t, i, f)";
  }
  return Function(node_, reinterpret_cast<KilnFunc>(func), name, std::move(signature));
}

void Function::call(std::span<const Arg> args) const {
  KILN_USER_CHECK(func_ != nullptr) << "call of a null Function";
  if (args.size() != signature_.size()) {
    std::ostringstream kinds;
    for (size_t i = 0; i < signature_.size(); ++i) {
      kinds << (i ? ", " : "") << kind_word(signature_[i]);
    }
    KILN_USER_ERROR() << "function '" << name_ << "' expects " << signature_.size()
                      << (signature_.size() == 1 ? " argument (" : " arguments (") << kinds.str()
                      << "), got " << args.size();
  }
  constexpr size_t kInline = 8;
  KilnArg inline_values[kInline];
  std::vector<KilnArg> heap_values;
  KilnArg* values = inline_values;
  if (args.size() > kInline) {
    heap_values.resize(args.size());
    values = heap_values.data();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    const char want = signature_[i];
    const Arg::Kind got = args[i].kind();
    values[i] = args[i].value();
    if (want == 't') {
      KILN_USER_CHECK(got == Arg::Kind::kTensor)
          << "argument " << i << " of '" << name_ << "' must be a tensor, got " << kind_noun(got);
      KILN_USER_CHECK(values[i].tensor != nullptr)
          << "argument " << i << " of '" << name_ << "' is a null tensor";
    } else if (want == 'i') {
      KILN_USER_CHECK(got == Arg::Kind::kInt)
          << "argument " << i << " of '" << name_ << "' must be an integer, got " << kind_noun(got);
    } else {
      KILN_USER_CHECK(got == Arg::Kind::kFloat || got == Arg::Kind::kInt)
          << "argument " << i << " of '" << name_ << "' must be a float, got " << kind_noun(got);
      if (got == Arg::Kind::kInt) values[i].f = static_cast<double>(args[i].value().i);
    }
  }
  const char* error = nullptr;
  const int32_t rc = func_(values, static_cast<int32_t>(args.size()), &error);
  KILN_USER_CHECK(rc == 0) << name_ << ": "
                           << (error != nullptr ? error : "failed without a message")
                           << (error != nullptr ? "" : " (code " + std::to_string(rc) + ")");
}

}  // namespace kiln::runtime
