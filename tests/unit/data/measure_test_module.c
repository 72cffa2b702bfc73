/* A hand-written module that follows c_abi.h, standing in for generated kernels in the tests of
 * measurement in a guarded child (runtime_measure_test.cc): a correct kernel, a slow one, a wrong
 * one, one that crashes, one that hangs, one that fails with a message, one that floods stdout and
 * stderr. Every entry takes (in: float32[n], out: float32[n]). */
#include <stddef.h>
#include <stdio.h>

#include "deploy/runtime/c_abi.h"

static int check_args(const KilnArg* args, int32_t num_args, const char** error) {
  if (num_args != 2) {
    *error = "expected 2 arguments (in, out)";
    return 1;
  }
  const KilnTensor* in = args[0].tensor;
  const KilnTensor* out = args[1].tensor;
  if (in->ndim != 1 || out->ndim != 1 || in->dtype.code != kKilnFloat || in->dtype.bits != 32 ||
      out->dtype.code != kKilnFloat || out->dtype.bits != 32 || in->shape[0] != out->shape[0]) {
    *error = "arguments must be float32[n] tensors of the same n";
    return 2;
  }
  return 0;
}

static void add(const KilnArg* args, float c) {
  const float* a = (const float*)args[0].tensor->data;
  float* b = (float*)args[1].tensor->data;
  for (int64_t i = 0; i < args[0].tensor->shape[0]; ++i) b[i] = a[i] + c;
}

/* add_one: out = in + 1. */
const char __kiln_sig_add_one[] = "tt";
int32_t add_one(const KilnArg* args, int32_t num_args, const char** error) {
  int32_t rc = check_args(args, num_args, error);
  if (rc != 0) return rc;
  add(args, 1.0f);
  return 0;
}

/* slow_add_one: out = in + 1 after about 20 microseconds of busy work. */
const char __kiln_sig_slow_add_one[] = "tt";
int32_t slow_add_one(const KilnArg* args, int32_t num_args, const char** error) {
  int32_t rc = check_args(args, num_args, error);
  if (rc != 0) return rc;
  volatile double x = 0;
  for (int i = 0; i < 20000; ++i) x = x + 1e-9;
  add(args, 1.0f);
  return 0;
}

/* add_two: out = in + 2 (a wrong kernel for a reference of in + 1). */
const char __kiln_sig_add_two[] = "tt";
int32_t add_two(const KilnArg* args, int32_t num_args, const char** error) {
  int32_t rc = check_args(args, num_args, error);
  if (rc != 0) return rc;
  add(args, 2.0f);
  return 0;
}

/* crash: writes through a null pointer. */
const char __kiln_sig_crash[] = "tt";
int32_t crash(const KilnArg* args, int32_t num_args, const char** error) {
  (void)args, (void)num_args, (void)error;
  volatile float* volatile p = NULL;
  *p = 1.0f;
  return 0;
}

/* hang: never returns. */
const char __kiln_sig_hang[] = "tt";
int32_t hang(const KilnArg* args, int32_t num_args, const char** error) {
  (void)args, (void)num_args, (void)error;
  volatile int64_t spin = 0;
  for (;;) spin = spin + 1;
  return 0;
}

/* fail_with_message: returns 3 with a message. */
const char __kiln_sig_fail_with_message[] = "tt";
int32_t fail_with_message(const KilnArg* args, int32_t num_args, const char** error) {
  (void)args, (void)num_args;
  *error = "the kernel refused to run";
  return 3;
}

/* noisy_add_one: out = in + 1, after writing 256 KiB to stdout and to stderr on the first call
 * (more than a pipe buffer holds). */
static int noisy_done = 0;
const char __kiln_sig_noisy_add_one[] = "tt";
int32_t noisy_add_one(const KilnArg* args, int32_t num_args, const char** error) {
  int32_t rc = check_args(args, num_args, error);
  if (rc != 0) return rc;
  if (!noisy_done) {
    noisy_done = 1;
    for (int i = 0; i < 4096; ++i) {
      fprintf(stdout, "noise on stdout, line %4d: {\"error\": \"none\", \"costs_s\": [1]}\n", i);
      fprintf(stderr, "noise on stderr, line %4d ..........................................\n", i);
    }
    fflush(stdout);
  }
  add(args, 1.0f);
  return 0;
}
