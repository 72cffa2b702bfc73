// The GPU template of reductions and of the operators built on them (softmax, log-softmax, the ONNX
// reductions, ArgMax / ArgMin). Each reduction stage is a kernel of its own; the pure stages
// between them are inlined into their readers, and the output is one thread per element. A
// reduction stage takes one of two forms:
// - a block a row (knob block_per_row = 1, for rows of at least 32 elements when there are fewer
//   than 8192 rows): the block's threads read the row's consecutive elements, each folds its share,
//   and they combine their partial results in shared memory (a cross-thread reduction, lowered by
//   schedule_ops when a reduction axis is bound to threadIdx);
// - a thread a row (otherwise, or block_per_row = 0): no barriers, slow for long rows.
//
//   te::Tensor y = softmax(x, -1);
//   space::ConfigSpace space = reduce_gpu_space(y);
//   te::Schedule s = te::create_schedule({y});
//   schedule_reduce_gpu(s, y, reduce_gpu_default(space, target));
//
// Knobs: threads (a block's threads, every kernel's: 32 ... 1024; a row's block takes no more
// than its row can use), block_per_row (0 or 1).
#pragma once

#include <vector>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/schedule.h"

namespace kiln::topi::gpu {

space::ConfigSpace reduce_gpu_space(const te::Tensor& out);
space::Config reduce_gpu_default(const space::ConfigSpace& space, const target::Target& target);
/// Schedules `out` and every compute stage it reads, up to the placeholders.
void schedule_reduce_gpu(te::Schedule& s, const te::Tensor& out, const space::Config& cfg);
/// The same with its knobs given: `output` one thread an element, its pure producers inlined, each
/// reduction it reads (or `output` itself) a kernel in one of the two forms.
void schedule_rows(te::Schedule& s, const te::Tensor& output, int64_t threads, bool block_per_row);
/// One reduction stage alone as a kernel of a block a row (up to `threads` threads).
void schedule_row_reduction(te::Stage st, int64_t threads);
/// Every stage of `s`: each reduction a kernel in one of the two forms (a block a row where that
/// pays), each of `outputs` that is pure one thread an element, the other pure stages inlined. For
/// operators with several outputs that read the same reductions (LayerNormalization's Y, Mean and
/// InvStdDev; InstanceNormalization).
void schedule_reductions_and_outputs(te::Schedule& s, const std::vector<te::Tensor>& outputs,
                                     int64_t threads);

}  // namespace kiln::topi::gpu
