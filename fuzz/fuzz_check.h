// What the fuzz targets share: KILN_FUZZ_CHECK, a property of an accepted input that must hold
// (a round trip, a bound). A failure prints the property and aborts, which libFuzzer reports as a
// crash and the regression runner as a failed test. Not KILN_ICHECK: that throws, and a target
// may catch exceptions of the code it drives.
#pragma once

#include <cstdio>
#include <cstdlib>

#define KILN_FUZZ_CHECK(cond)                                                               \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      std::fprintf(stderr, "%s:%d: fuzz property failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (false)
