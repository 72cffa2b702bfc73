// Expecting a user error (kiln::Error) whose message names the problem.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

/// Expects `stmt` to throw kiln::Error whose message contains `needle`.
#define EXPECT_ERROR_CONTAINS(stmt, needle)                                         \
  do {                                                                              \
    try {                                                                           \
      stmt;                                                                         \
      ADD_FAILURE() << "expected kiln::Error containing: " << (needle);             \
    } catch (const ::kiln::Error& e) {                                              \
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what(); \
    }                                                                               \
  } while (0)
