// The defaults of the blocked (NCHW[x]c) convolution template that read the target's caches
// (conv2d.cc's nchwc_default calls them once the register tile is chosen): reduction chunks
// (tile_ic), column chunks (col_chunk), rows per task (task_rows) and the prefetches of the next
// step's weights (prefetch) and of the next column tile's input (prefetch_input). Each takes the
// positions `pos` chosen so far and returns a knob's position, or sets it. Internal to topi.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/space/space.h"
#include "compiler/target/target.h"
#include "compiler/te/tensor.h"

namespace kiln::topi {

/// The extent split knob `name` splits.
int64_t split_extent(const space::ConfigSpace& space, const std::string& name);
/// The input of the blocked convolution `out` of rank `ndim` (5: its data, 6: its kernel), or an
/// undefined tensor.
te::Tensor input_of_rank(const te::Tensor& out, size_t ndim);
/// The inner factor (or value) that positions `pos` give `knob` of `space`.
int64_t chosen(const space::ConfigSpace& space, const std::vector<int>& pos, const char* knob);

int default_ic_chunk(const te::Tensor& out, const space::ConfigSpace& space,
                     const std::vector<int>& pos, const target::Target& target);
int default_column_chunk(const te::Tensor& out, const space::ConfigSpace& space,
                         const std::vector<int>& pos, const target::Target& target);
void default_task_rows(const te::Tensor& out, const space::ConfigSpace& space,
                       const target::Target& target, bool grouped, std::vector<int>* pos);
int default_prefetch(const te::Tensor& out, const space::ConfigSpace& space,
                     const std::vector<int>& pos, const target::Target& target, bool grouped);
int default_prefetch_input(const te::Tensor& out, const space::ConfigSpace& space,
                           const target::Target& target);

}  // namespace kiln::topi
