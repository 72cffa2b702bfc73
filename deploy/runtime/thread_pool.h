// The CPU thread pool that parallel loops in compiled code run on. Generated code calls the C
// function kiln_parallel_launch (c_abi.h) through the module's `__kiln_parallel_launch` pointer;
// this header is the C++ side: the pool size and a launch that takes a C++ callable.
//
// One global pool of num_threads() - 1 persistent workers; the launching thread runs task 0 itself,
// and the other tasks go to whichever thread claims them first, the launcher included once it is
// done with task 0 (a worker the OS has not scheduled delays nothing).
// A launch costs a few microseconds when workers are awake: after a task they spin on an atomic
// for a few tens of microseconds before sleeping on a condition variable. A launch from inside a
// parallel body (or while another thread holds the pool) runs inline on the calling thread as a
// single task (num_tasks = 1). Workers are joined at process exit.
#pragma once

#include <cstdint>
#include <functional>

#include "deploy/runtime/c_abi.h"

namespace kiln::runtime {

/// The number of tasks a launch splits into (workers + the caller). Starts at the environment
/// variable KILN_NUM_THREADS if set, else the number of CPUs this process may run on.
int num_threads();

/// Resizes the pool to `n` tasks (1 = run everything on the caller, at most 4096); 0 restores the
/// default.
/// Waits for a launch in progress on another thread. Throws kiln::Error if n < 0 or if called from
/// inside a parallel body.
void set_num_threads(int n);

/// What num_threads() starts at: KILN_NUM_THREADS, else the CPUs this process may run on.
int default_num_threads();

/// Runs fn(task_id, num_tasks) for every task like kiln_parallel_launch and returns the first
/// non-zero code by task id. If fn throws, the exception of the lowest such task is rethrown here
/// once all tasks have finished.
int32_t parallel_launch(const std::function<int32_t(int32_t task_id, int32_t num_tasks)>& fn);

}  // namespace kiln::runtime
