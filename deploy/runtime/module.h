// Loading compiled code and calling it. A Module is a bag of symbols behind a ModuleNode: a shared
// object opened with dlopen here (from a file or from bytes in memory), or (in the compiler) an
// LLVM JIT session that subclasses ModuleNode. Module::function looks up an entry that follows the
// calling convention of c_abi.h and returns a Function, which checks arguments against the entry's
// signature string before the call and turns a non-zero return into kiln::Error.
//
// Ownership: a Function keeps its module alive; a module's code stays loaded while any Module or
// Function refers to it. Calls are thread-safe as long as the compiled code is (it is re-entrant).
#pragma once

#include <array>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "deploy/runtime/c_abi.h"
#include "deploy/runtime/ndarray.h"

namespace kiln::runtime {

/// What a module is underneath: anything that can find a symbol's address by name.
class ModuleNode {
 public:
  virtual ~ModuleNode() = default;
  /// The address of symbol `name`, or nullptr if the module has none.
  virtual void* symbol(const std::string& name) = 0;
  /// A short word for the kind of module: "library", "llvm-jit".
  virtual std::string kind() const = 0;
  /// Names this module in messages; by default its kind.
  virtual std::string name() const { return kind(); }
};

class Function;

class Module {
 public:
  /// A null module (defined() is false).
  Module() = default;

  /// Wraps a node. If it exports `__kiln_parallel_launch`, points it at the runtime's thread pool.
  static Module from_node(std::shared_ptr<ModuleNode> node);

  /// Opens a shared object (dlopen with RTLD_NOW | RTLD_LOCAL). Throws kiln::Error naming the file
  /// and the loader's reason if it cannot be opened, or, before the loader sees it, naming both
  /// architectures when its ELF header says it is for another CPU than this process's ("the
  /// library is for aarch64, this machine runs x86_64").
  static Module load_library(const std::string& path);

  /// Opens the shared object whose bytes are `library`, without writing a file: it is put in an
  /// anonymous memory file (memfd) that dlopen opens as /proc/self/fd/N and that stays open while
  /// the module is loaded. `origin` names it in messages ("bundle 'model.kiln'"). Throws
  /// kiln::Error with the loader's reason if it cannot be opened, and as load_library does for a
  /// library of another CPU.
  static Module load_library_bytes(const std::string& library, const std::string& origin);

  /// The entry function `name` with its signature `__kiln_sig_<name>`. Throws kiln::Error naming
  /// the function and the module if either is missing or the signature is malformed.
  Function function(const std::string& name) const;

  /// Whether `name` and its signature are both exported.
  bool has_function(const std::string& name) const;

  /// A raw symbol address, or nullptr.
  void* symbol(const std::string& name) const;

  bool defined() const { return node_ != nullptr; }
  std::string kind() const;
  std::string name() const;
  const std::shared_ptr<ModuleNode>& node() const { return node_; }

 private:
  explicit Module(std::shared_ptr<ModuleNode> node) : node_(std::move(node)) {}
  ModuleNode& checked_node() const;

  std::shared_ptr<ModuleNode> node_;
};

/// One argument of a call: a tensor, a 64-bit integer or a double. Holds no ownership: a tensor
/// argument must outlive the call.
class Arg {
 public:
  enum class Kind { kTensor, kInt, kFloat };

  Arg(NDArray& array) : kind_(Kind::kTensor) {  // NOLINT(google-explicit-constructor)
    value_.tensor = const_cast<KilnTensor*>(array.tensor());
  }
  Arg(const KilnTensor* tensor) : kind_(Kind::kTensor) {  // NOLINT(google-explicit-constructor)
    value_.tensor = const_cast<KilnTensor*>(tensor);
  }
  template <std::integral T>
  requires(!std::same_as<T, bool>) Arg(T v)
      : kind_(Kind::kInt) {  // NOLINT(google-explicit-constructor)
    value_.i = static_cast<int64_t>(v);
  }
  template <std::floating_point T>
  Arg(T v) : kind_(Kind::kFloat) {  // NOLINT(google-explicit-constructor)
    value_.f = static_cast<double>(v);
  }

  Kind kind() const { return kind_; }
  const KilnArg& value() const { return value_; }

 private:
  Kind kind_;
  KilnArg value_{};
};

/// A callable entry of a module.
class Function {
 public:
  /// A null function (defined() is false).
  Function() = default;

  /// Checks `args` against the signature, calls, and throws kiln::Error if the check fails or the
  /// function returns non-zero (the message is the function's, prefixed with its name). An integer
  /// is accepted where a float is expected; nothing else converts.
  void call(std::span<const Arg> args) const;

  /// f(a, b, 3) is call({a, b, 3}).
  template <typename... Ts>
  requires(std::constructible_from<Arg, Ts&&>&&...) void operator()(Ts&&... args) const {
    const std::array<Arg, sizeof...(Ts)> packed{Arg(std::forward<Ts>(args))...};
    call(packed);
  }

  bool defined() const { return func_ != nullptr; }
  const std::string& name() const { return name_; }
  /// One letter per argument: 't' tensor, 'i' int64, 'f' double.
  const std::string& signature() const { return signature_; }
  KilnFunc raw() const { return func_; }

 private:
  friend class Module;
  Function(std::shared_ptr<ModuleNode> module, KilnFunc func, std::string name,
           std::string signature)
      : module_(std::move(module)),
        func_(func),
        name_(std::move(name)),
        signature_(std::move(signature)) {}

  std::shared_ptr<ModuleNode> module_;
  KilnFunc func_ = nullptr;
  std::string name_;
  std::string signature_;
};

}  // namespace kiln::runtime
