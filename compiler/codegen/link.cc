// Linking the objects of a set of functions (emit_objects: compiled side by side) into an ELF
// shared object with lld running inside this process, from memory to memory: no file is created
// anywhere.
//
// lld only reads and writes paths, so it is given /proc/self/fd paths. The objects go in as memfds.
// The shared object comes out through a pipe that a thread drains while lld writes: for a regular
// output file (which a memfd is) lld first checks that it can create a temporary file beside it and
// renames that into place, which /proc/self/fd cannot hold; a pipe it writes in place.
//
// lld keeps its state in globals (lld::CommonLinkerContext, the ELF driver's context), so one
// mutex serializes every link in the process; a link is a few milliseconds. After a link that
// ends in a fatal error lld's state cannot be trusted (lld::Result::canRunAgain): every later link
// in the process is refused with that reason.
#include <fcntl.h>
#include <lld/Common/Driver.h>
#include <llvm/Support/raw_ostream.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "compiler/codegen/build.h"
#include "compiler/codegen/codegen_llvm.h"

LLD_HAS_DRIVER(elf)

namespace kiln::codegen {
namespace {

/// A file descriptor closed when this goes out of scope.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  /// lld's name for this descriptor.
  std::string proc_path() const { return "/proc/self/fd/" + std::to_string(fd_); }

 private:
  int fd_;
};

/// Writes all of `bytes` to `fd`; false (with errno) when a write fails.
bool write_all(int fd, const char* bytes, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::mutex g_lld_mu;
std::string g_lld_broken;  // GUARDED_BY(g_lld_mu): why lld cannot run again in this process

/// Runs lld on `argv` under the lock; returns its exit code, its messages in *log.
int run_lld(const std::vector<const char*>& argv, std::string* log) {
  llvm::raw_string_ostream out(*log);
  std::lock_guard<std::mutex> lock(g_lld_mu);
  if (!g_lld_broken.empty()) {
    out << "the in-process linker cannot run again in this process after a fatal error: "
        << g_lld_broken;
    return -1;
  }
  const lld::Result r = lld::lldMain(argv, out, out, {{lld::Gnu, &lld::elf::link}});
  out.flush();
  if (!r.canRunAgain) g_lld_broken = log->empty() ? "(lld said nothing)" : *log;
  apply_llvm_options();  // lld has reset them to LLVM's defaults
  return r.retCode;
}

}  // namespace

std::string link_shared_object(const std::vector<ir::PrimFunc>& funcs,
                               const target::Target& target) {
  const LLVMTarget lt = resolve_llvm_target(target);
  const std::vector<std::vector<uint8_t>> objs = emit_objects(funcs, target);
  std::string names;
  for (const ir::PrimFunc& f : funcs) names += (names.empty() ? "'" : ", '") + f.name + "'";

  std::deque<Fd> objects;  // Fd does not move: a deque keeps each in place
  std::vector<std::string> object_paths;
  for (const std::vector<uint8_t>& obj : objs) {
    const Fd& object = objects.emplace_back(memfd_create("kiln-object", MFD_CLOEXEC));
    KILN_ICHECK(object.get() >= 0)
        << "link_shared_object: memfd_create failed: " << std::strerror(errno);
    KILN_ICHECK(write_all(object.get(), reinterpret_cast<const char*>(obj.data()), obj.size()))
        << "link_shared_object: cannot write an object to its memfd: " << std::strerror(errno);
    object_paths.push_back(object.proc_path());
  }

  const std::string emulation = lt.is_aarch64 ? "aarch64linux" : "elf_x86_64";
  int pipe_fds[2];
  KILN_ICHECK(::pipe2(pipe_fds, O_CLOEXEC) == 0)
      << "link_shared_object: pipe2 failed: " << std::strerror(errno);
  Fd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  const std::string output_path = write_end.proc_path();
  std::vector<const char*> argv{
      "ld.lld", "-shared",          "-m", emulation.c_str(), "--hash-style=both", "--threads=1",
      "-o",     output_path.c_str()};
  for (const std::string& p : object_paths) argv.push_back(p.c_str());
  std::string library;
  int read_errno = 0;
  std::thread drain([&] {
    char buf[1 << 16];
    for (;;) {
      const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
      if (n > 0) {
        library.append(buf, static_cast<size_t>(n));
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        if (n < 0) read_errno = errno;
        return;
      }
    }
  });

  std::string log;
  int rc = -1;
  try {
    rc = run_lld(argv, &log);
  } catch (...) {  // out of memory: let the reader go before the exception does
    write_end.reset();
    drain.join();
    throw;
  }
  write_end.reset();  // lld has closed its own descriptor of the pipe: the reader sees the end
  drain.join();

  while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) log.pop_back();
  KILN_ICHECK(rc == 0) << "lld could not link the shared object of " << names << " for "
                       << lt.triple << " (exit code " << rc << "): " << log;
  KILN_ICHECK(read_errno == 0) << "link_shared_object: reading lld's output failed: "
                               << std::strerror(read_errno);
  KILN_ICHECK(!library.empty()) << "lld wrote no shared object for " << names;
  return library;
}

void export_library(const std::vector<ir::PrimFunc>& funcs, const target::Target& target,
                    const std::string& path) {
  const std::string library = link_shared_object(funcs, target);
  Fd file(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755));
  KILN_USER_CHECK(file.get() >= 0)
      << "export_library: cannot write '" << path << "': " << std::strerror(errno);
  KILN_USER_CHECK(write_all(file.get(), library.data(), library.size()))
      << "export_library: cannot write '" << path << "': " << std::strerror(errno);
}

}  // namespace kiln::codegen
