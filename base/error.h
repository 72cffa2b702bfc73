// Errors shared by every layer. Three kinds, never mixed:
//  - kiln::Error is a user's mistake (bad shape, bad schedule, bad target string): its message
//  names
//    the thing and what is wrong, and callers may catch it and report it.
//  - kiln::SystemError is the environment failing Kiln (a file that cannot be written, a disk
//    full, a database that cannot be read): not the user's fault, so a service answers it as
//    UNAVAILABLE / INTERNAL, never as INVALID_ARGUMENT.
//  - kiln::InternalError is a broken invariant inside Kiln: file, line and a plea to report it.
// KILN_USER_CHECK raises the first, KILN_SYSTEM_CHECK the second, KILN_ICHECK the third.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace kiln {

/// A mistake of the user of Kiln; the message is meant to be shown as it is.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

/// The environment failed (I/O, disk, database); the message names the file or store and why.
class SystemError : public std::runtime_error {
 public:
  explicit SystemError(const std::string& msg) : std::runtime_error(msg) {}
};

/// A bug in Kiln: an internal invariant did not hold.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& msg) : std::logic_error(msg) {}
};

namespace detail {

/// Collects a message with operator<< and throws when it goes out of scope.
template <typename E>
class Thrower {
 public:
  Thrower(const char* file, int line, const char* cond) {
    if constexpr (std::is_same_v<E, InternalError>) {
      os_ << "internal error at " << file << ":" << line << ": check failed: " << cond << ": ";
    } else {
      (void)file, (void)line, (void)cond;
      os_ << "error: ";
    }
  }
  template <typename T>
  Thrower& operator<<(const T& v) {
    os_ << v;
    return *this;
  }
  [[noreturn]] ~Thrower() noexcept(false) {
    if constexpr (std::is_same_v<E, InternalError>) {
      os_ << " (please report this with KILN_DUMP_IR=1)";
    }
    throw E(os_.str());
  }

 private:
  std::ostringstream os_;
};

}  // namespace detail
}  // namespace kiln

/// Raises kiln::Error with the streamed message when `cond` is false.
#define KILN_USER_CHECK(cond) \
  if (cond) {                 \
  } else                      \
    ::kiln::detail::Thrower<::kiln::Error>(__FILE__, __LINE__, #cond)

/// Raises kiln::Error unconditionally.
#define KILN_USER_ERROR() ::kiln::detail::Thrower<::kiln::Error>(__FILE__, __LINE__, "")

/// Raises kiln::SystemError with the streamed message when `cond` is false.
#define KILN_SYSTEM_CHECK(cond) \
  if (cond) {                   \
  } else                        \
    ::kiln::detail::Thrower<::kiln::SystemError>(__FILE__, __LINE__, #cond)

/// Raises kiln::SystemError unconditionally.
#define KILN_SYSTEM_ERROR() ::kiln::detail::Thrower<::kiln::SystemError>(__FILE__, __LINE__, "")

/// Raises kiln::InternalError with the streamed message when `cond` is false.
#define KILN_ICHECK(cond) \
  if (cond) {             \
  } else                  \
    ::kiln::detail::Thrower<::kiln::InternalError>(__FILE__, __LINE__, #cond)

/// Marks a point that cannot be reached.
#define KILN_UNREACHABLE() \
  ::kiln::detail::Thrower<::kiln::InternalError>(__FILE__, __LINE__, "unreachable")
