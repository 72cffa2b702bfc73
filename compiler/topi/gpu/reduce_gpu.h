// The GPU template of reductions and of the operators built on them (softmax, log-softmax, the ONNX
// reductions, ArgMax / ArgMin): one thread per row. Each reduction stage is a kernel of its own,
// one thread per output element reducing its row serially (a softmax row's max, then its sum of
// exponentials); the pure stages between them are inlined into their readers, and the output is
// one thread per element. A row read by one thread is slow for long rows but needs no barriers;
// a block per row with a cross-thread reduction in shared memory is the faster form still to come.
//
//   te::Tensor y = softmax(x, -1);
//   space::ConfigSpace space = reduce_gpu_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_reduce_gpu(s, y, reduce_gpu_default(space, target));
//
// Knobs: threads (a block's threads, every kernel's: 32 ... 1024).
#pragma once

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace reduce_gpu_space(const te::Tensor& out);
space::Config reduce_gpu_default(const space::ConfigSpace& space, const target::Target& target);
/// Schedules `out` and every compute stage it reads, up to the placeholders.
void schedule_reduce_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg);

}  // namespace kiln::topi::gpu
