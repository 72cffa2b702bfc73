/* A hand-written module that follows c_abi.h, standing in for generated code in the runtime's
 * module tests: a checked element-wise entry, a parallel entry that goes through
 * `__kiln_parallel_launch`, and entries with odd signatures for the argument checks. */
#include <stddef.h>

#include "deploy/runtime/c_abi.h"

KilnParallelLaunch __kiln_parallel_launch = NULL;

static int is_f32_vector(const KilnTensor* t) {
  return t->ndim == 1 && t->dtype.code == kKilnFloat && t->dtype.bits == 32 && t->dtype.lanes == 1;
}

/* add_one(in: float32[n], out: float32[n]): out[i] = in[i] + 1. */
const char __kiln_sig_add_one[] = "tt";
int32_t add_one(const KilnArg* args, int32_t num_args, const char** error) {
  if (num_args != 2) {
    *error = "add_one: expected 2 arguments";
    return 1;
  }
  const KilnTensor* in = args[0].tensor;
  const KilnTensor* out = args[1].tensor;
  if (!is_f32_vector(in) || !is_f32_vector(out)) {
    *error = "add_one: arguments must be 1-d float32 tensors";
    return 2;
  }
  if (in->shape[0] != out->shape[0]) {
    *error = "add_one: shape mismatch between in and out";
    return 3;
  }
  const float* a = (const float*)in->data;
  float* b = (float*)out->data;
  for (int64_t i = 0; i < in->shape[0]; ++i) b[i] = a[i] + 1.0f;
  return 0;
}

/* fill_parallel(out: float32[n], fail_task: int, num_tasks: int32[1]): out[i] = i * 2 in parallel
 * chunks; the task whose id is fail_task (if any) returns 7 instead; task 0 stores the number of
 * tasks in num_tasks[0]. */
typedef struct {
  float* out;
  int64_t n;
  int64_t fail_task;
  int32_t* num_tasks;
} FillClosure;

static int32_t fill_body(int32_t task_id, int32_t num_tasks, void* closure) {
  const FillClosure* c = (const FillClosure*)closure;
  int64_t chunk = (c->n + num_tasks - 1) / num_tasks;
  int64_t begin = chunk * task_id;
  int64_t end = begin + chunk < c->n ? begin + chunk : c->n;
  for (int64_t i = begin; i < end; ++i) c->out[i] = (float)(i * 2);
  if (task_id == 0) *c->num_tasks = num_tasks;
  return task_id == c->fail_task ? 7 : 0;
}

const char __kiln_sig_fill_parallel[] = "tit";
int32_t fill_parallel(const KilnArg* args, int32_t num_args, const char** error) {
  if (__kiln_parallel_launch == NULL) {
    *error = "fill_parallel: __kiln_parallel_launch was not set by the loader";
    return 1;
  }
  const KilnTensor* out = args[0].tensor;
  if (!is_f32_vector(out)) {
    *error = "fill_parallel: out must be a 1-d float32 tensor";
    return 2;
  }
  const KilnTensor* tasks = args[2].tensor;
  if (tasks->ndim != 1 || tasks->shape[0] != 1 || tasks->dtype.code != kKilnInt ||
      tasks->dtype.bits != 32) {
    *error = "fill_parallel: num_tasks must be an int32[1] tensor";
    return 2;
  }
  FillClosure c = {(float*)out->data, out->shape[0], args[1].i, (int32_t*)tasks->data};
  if (__kiln_parallel_launch(fill_body, &c) != 0) {
    *error = "fill_parallel: a parallel task failed";
    return 3;
  }
  return 0;
}

/* scale(x: float32[n], alpha: float, n_check: int): x *= alpha; fails if n_check != n. */
const char __kiln_sig_scale[] = "tfi";
int32_t scale(const KilnArg* args, int32_t num_args, const char** error) {
  const KilnTensor* x = args[0].tensor;
  if (!is_f32_vector(x) || x->shape[0] != args[2].i) {
    *error = "scale: x must be float32[n_check]";
    return 1;
  }
  float* d = (float*)x->data;
  for (int64_t i = 0; i < x->shape[0]; ++i) d[i] = (float)(d[i] * args[1].f);
  return 0;
}

/* fail_silently(): returns 5 without setting *error. */
const char __kiln_sig_fail_silently[] = "";
int32_t fail_silently(const KilnArg* args, int32_t num_args, const char** error) { return 5; }

/* no_signature(): an entry without `__kiln_sig_no_signature`. */
int32_t no_signature(const KilnArg* args, int32_t num_args, const char** error) { return 0; }

/* bad_signature(): a signature with a letter the runtime does not know. */
const char __kiln_sig_bad_signature[] = "tq";
int32_t bad_signature(const KilnArg* args, int32_t num_args, const char** error) { return 0; }
