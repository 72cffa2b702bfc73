// The target of the machine the tests run on ("llvm -mcpu=native"), parsed once.
#pragma once

#include "compiler/target/target.h"

namespace kiln::testing {

inline const target::Target& host() {
  static const target::Target t = target::Target::parse("llvm -mcpu=native");
  return t;
}

}  // namespace kiln::testing
