/* The calling convention between code Kiln generates and the runtime that calls it.
 * Plain C so that a compiled module (a shared object, a JIT-ed function) needs nothing from the
 * runtime's C++ side, and so that a board's runtime can be built without the compiler.
 *
 * Every generated entry function has the type KilnFunc:
 *   int32_t name(const KilnArg* args, int32_t num_args, const char** error);
 * It returns 0 on success; otherwise it stores a pointer to a constant message (owned by the
 * module) in *error and returns a non-zero code. It checks the number of arguments, each tensor's
 * rank, dtype and shape against what the function was compiled for, and binds symbolic dimensions.
 *
 * Beside each entry `name` a module exports the C string `__kiln_sig_<name>`: one letter per
 * argument, 't' for a tensor (args[i].tensor), 'i' for a 64-bit integer (args[i].i), 'f' for a
 * double (args[i].f). The runtime uses it to check a call before making it.
 *
 * A module that runs parallel loops holds a global function pointer `__kiln_parallel_launch`
 * (type KilnParallelLaunch) that the loader sets to the runtime's thread pool before the first
 * call.
 */
#ifndef KILN_DEPLOY_RUNTIME_C_ABI_H_
#define KILN_DEPLOY_RUNTIME_C_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Element type: code (0 int, 1 uint, 2 float), bits, lanes (1 for scalars). */
typedef enum { kKilnInt = 0, kKilnUInt = 1, kKilnFloat = 2 } KilnTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} KilnDType;

/* A view of an n-dimensional array. `strides` (in elements) may be NULL, meaning row-major compact.
 * `data` is at least 64-byte aligned when allocated by the runtime. */
typedef struct {
  void* data;
  const int64_t* shape;
  const int64_t* strides;
  int32_t ndim;
  KilnDType dtype;
} KilnTensor;

typedef union {
  KilnTensor* tensor;
  int64_t i;
  double f;
} KilnArg;

typedef int32_t (*KilnFunc)(const KilnArg* args, int32_t num_args, const char** error);

/* One task of a parallel loop: the loop's iterations are split in num_tasks contiguous chunks and
 * this call runs chunk task_id. Returns 0 or an error code. */
typedef int32_t (*KilnParallelBody)(int32_t task_id, int32_t num_tasks, void* closure);

/* Runs body(i, n, closure) for i in [0, n) on the thread pool, where n is the pool's size, and
 * waits for all; returns the first non-zero code. Task 0 runs on the calling thread, the others on
 * whichever thread of the pool (the caller included) takes them first. Called from inside a
 * parallel body, it runs the tasks inline on the calling thread. */
typedef int32_t (*KilnParallelLaunch)(KilnParallelBody body, void* closure);

/* The runtime's implementation, for loaders that fill in `__kiln_parallel_launch`. */
int32_t kiln_parallel_launch(KilnParallelBody body, void* closure);

#ifdef __cplusplus
}
#endif

#endif /* KILN_DEPLOY_RUNTIME_C_ABI_H_ */
