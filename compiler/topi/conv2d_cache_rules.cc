// The blocked convolution's defaults that read the target's caches (conv2d_cache_rules.h).
#include "compiler/topi/conv2d_cache_rules.h"

#include <algorithm>
#include <optional>

#include "compiler/topi/template_util.h"

namespace kiln::topi {

using space::ConfigSpace;

/// The extent split knob `name` splits.
int64_t split_extent(const ConfigSpace& space, const std::string& name) {
  int64_t e = 1;
  for (int64_t f : space.knob(name).candidates[0]) e *= f;
  return e;
}

/// The input of the blocked convolution `out` of rank `ndim` (5: its data, 6: its kernel), or an
/// undefined tensor.
te::Tensor input_of_rank(const te::Tensor& out, size_t ndim) {
  for (const te::Tensor& t : out->inputs()) {
    if (t.ndim() == ndim) return t;
  }
  return te::Tensor();
}

/// The inner factor (or value) that positions `pos` give `knob` of `space`.
int64_t chosen(const ConfigSpace& space, const std::vector<int>& pos, const char* knob) {
  return space.knob(knob).candidates[pos[knob_index(space, knob)]].back();
}

namespace {

/// What one input channel block of a blocked convolution's reduction brings, in bytes, for the
/// register tile `pos` holds: the task's weights (tile_ob output blocks by every tap) and the
/// input one register tile reads. Null without a 6-D kernel (a bf16 one's pairs).
struct ReductionBlock {
  int64_t weights = 0, input = 0;
};
std::optional<ReductionBlock> reduction_block(const te::Tensor& out, const ConfigSpace& space,
                                              const std::vector<int>& pos) {
  const te::Tensor kernel = input_of_rank(out, 6);
  if (!kernel.defined()) return std::nullopt;
  const char* op = "conv2d_nchwc";
  const int64_t kh = const_dim(kernel, 2, op), kw = const_dim(kernel, 3, op),
                ic = const_dim(kernel, 4, op), bytes = kernel->dtype().bytes();
  return ReductionBlock{
      chosen(space, pos, "tile_ob") * kh * kw * ic * const_dim(kernel, 5, op) * bytes,
      (chosen(space, pos, "tile_ow") + kw - 1) * (chosen(space, pos, "tile_oh") + kh - 1) * ic *
          bytes};
}

}  // namespace

/// The default chunking of the reduction over input channel blocks (tile_ic; `pos` holds the
/// register tile already). Unchunked, every register tile reads all its task's weights (tile_ob
/// output blocks by every input channel and tap) once, so a task whose rows take several column
/// tiles reads them again for each. Where they are more than a sixteenth of L2, the input
/// streaming past evicts them between tiles (DeepLabV3-ResNet50's 1x1 convolutions over 1024 and
/// 2048 channels at a 32x32 map ran at 11-20% of peak, its input channel blocks 64 KiB apart):
/// the reduction then goes in chunks whose weights and input columns fit in a quarter of L1, each
/// chunk over all of the task's column tiles, its partial sums kept in local memory in between.
/// Only where the rows take four column tiles or more (at two, ResNet-50's 1x1s over 1024
/// channels at 14x14 measured 3-4% slower chunked) and such a chunk holds two blocks or more: a 3x3
/// kernel's block alone fills that quarter, and chunks of one block (ResNet-18's 3x3s, DeepLabV3's
/// atrous 3x3s) measured 1-15% slower than the whole reduction, the sums reloaded too often for
/// what stays in L1.
int default_ic_chunk(const te::Tensor& out, const ConfigSpace& space, const std::vector<int>& pos,
                     const target::Target& target) {
  const int64_t blocks = split_extent(space, "tile_ic");
  const int whole = split_position(space, "tile_ic", blocks);
  const std::optional<ReductionBlock> block = reduction_block(out, space, pos);
  if (!block || target.l1d_bytes <= 0 || target.l2_bytes <= 0) return whole;
  const int64_t width = const_dim(out, 3, "conv2d_nchwc");
  if (width <= 3 * chosen(space, pos, "tile_ow") || blocks * block->weights * 16 <= target.l2_bytes)
    return whole;
  const int chunk =
      split_position(space, "tile_ic", target.l1d_bytes / 4 / (block->weights + block->input));
  return space.knob("tile_ic").candidates[chunk].back() >= 2 ? chunk : whole;
}

/// The default column chunk (col_chunk; `pos` holds the register tile): whole rows for a kernel of
/// one row, or while one task's input (every input channel block of its rows, the kernel's rows
/// included) fits in half of L2; else the largest chunk that divides the column tiles and whose
/// input fits in a quarter of it.
/// A (KD, 1) convolution over a video's frames as rows of H*W pixels (rewrite_conv3d) has rows of
/// 100 KiB and more per channel block: s3d's (7, 1) one over 64 channels of 112x112 pixels read
/// 22 MiB a task and ran at 18% of peak, each row fetched again from memory by every task.
int default_column_chunk(const te::Tensor& out, const ConfigSpace& space,
                         const std::vector<int>& pos, const target::Target& target) {
  const int whole = knob_position(space, "col_chunk", 0);
  const te::Tensor data = input_of_rank(out, 5), kernel = input_of_rank(out, 6);
  if (!data.defined() || !kernel.defined() || target.l2_bytes <= 0) return whole;
  const char* op = "conv2d_nchwc";
  const int64_t tile_oh = chosen(space, pos, "tile_oh"), tile_ow = chosen(space, pos, "tile_ow"),
                kh = const_dim(kernel, 2, op);
  // A kernel of one row shares no input rows between the tasks of neighbouring rows: lifted 1-D
  // convolutions (wav2vec's feature encoder over 3200 samples) ran 2x slower chunked.
  if (kh == 1) return whole;
  const int64_t width = const_dim(out, 3, op), in_width = const_dim(data, 3, op);
  const int64_t rows = tile_oh * kh;
  // Per output column: the input columns it advances by, every block of every row it reads.
  const int64_t per_column = const_dim(data, 1, op) * rows * const_dim(data, 4, op) *
                             data->dtype().bytes() * std::max<int64_t>(1, in_width / width);
  if (per_column * width * 2 <= target.l2_bytes) return whole;
  const int64_t tiles = (width + tile_ow - 1) / tile_ow;
  const auto& cands = space.knob("col_chunk").candidates;
  int best = whole;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int64_t c = cands[i].back();
    if (c > 0 && tiles % c == 0 && tiles > c && per_column * c * tile_ow * 4 <= target.l2_bytes &&
        (best == whole || c > cands[best].back())) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

/// Sets the default rows per task (task_rows) and reduction chunks (tile_ic) where a task's weights
/// (tile_ob output blocks by every input channel and tap) are more than L2, as a 3x3 convolution's
/// over 1024 channels and more are: the task's register tiles would each stream them
/// from L3 or memory, a few multiply-adds per weight loaded (FCN's 3x3 head over 2048 channels of
/// 32x32 ran at 77% of peak, its weights 2.3 MiB a task). Instead the task takes many rows, and its
/// reduction goes in chunks of input channel blocks whose weights fit in a quarter of L1, each
/// chunk over all the task's rows and column tiles, the partial sums in local memory: each weight
/// then comes from beyond L2 once a task. The rows: as many as keep the partial sums within a
/// quarter of L2 while there are 16 tasks or more. Elsewhere `pos` stays as it is.
/// An ungrouped kernel with a window (3x3) does so already where its weights are more than a
/// quarter of L2: streamed from L2 once a register tile, a few multiply-adds per vector loaded,
/// they held ResNet-18's 3x3s over 256 and 512 channels and DeepLabV3's atrous regions (590 KiB a
/// task) at 72-83% of peak; in chunks over all rows, ResNet-18, -34, -50, VGG-16, Wide-ResNet-50
/// and DeepLabV3 ran 2.5-4% faster at 2 threads. Not 1x1s (ResNet-50's at 7x7 ran 22% slower),
/// nor grouped ones (RegNet-X-3.2GF 3.6% slower).
void default_task_rows(const te::Tensor& out, const ConfigSpace& space,
                       const target::Target& target, bool grouped, std::vector<int>* pos) {
  const std::optional<ReductionBlock> block = reduction_block(out, space, *pos);
  if (!block || target.l1d_bytes <= 0 || target.l2_bytes <= 0) return;
  const char* op = "conv2d_nchwc";
  const te::Tensor kernel = input_of_rank(out, 6);
  const bool window = const_dim(kernel, 2, op) * const_dim(kernel, 3, op) > 1;
  const int64_t limit = window && !grouped ? target.l2_bytes / 4 : target.l2_bytes;
  if (block->weights * split_extent(space, "tile_ic") <= limit) return;
  const int64_t tile_ob = chosen(space, *pos, "tile_ob"), tile_oh = chosen(space, *pos, "tile_oh"),
                tile_ow = chosen(space, *pos, "tile_ow");
  const int64_t width = const_dim(out, 3, op);
  const int64_t row_tiles = (const_dim(out, 2, op) + tile_oh - 1) / tile_oh;
  const int64_t tasks_per_row = const_dim(out, 0, op) * (const_dim(out, 1, op) / tile_ob);
  // Partial sums of one register tile of rows, every column.
  const int64_t row_sums = tile_oh * ((width + tile_ow - 1) / tile_ow) * tile_ow * tile_ob *
                           const_dim(out, 4, op) * out->dtype().bytes();
  const auto& cands = space.knob("task_rows").candidates;
  int rows = -1;
  int64_t best = 1;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int64_t c = cands[i].back();
    const int64_t r = c == 0 ? row_tiles : c;
    if (r > row_tiles || (c != 0 && row_tiles % c != 0) || r <= best) continue;
    if (r * row_sums * 4 > target.l2_bytes || tasks_per_row * (row_tiles / r) < 16) continue;
    rows = static_cast<int>(i);
    best = r;
  }
  if (rows < 0) return;
  (*pos)[knob_index(space, "task_rows")] = rows;
  (*pos)[knob_index(space, "tile_ic")] =
      split_position(space, "tile_ic",
                     std::max<int64_t>(1, target.l1d_bytes / 4 / (block->weights + block->input)));
}

/// Whether the weights of the next reduction step are prefetched (prefetch; `pos` holds the tile
/// and the chunks): where a task's weights are more than a quarter of L2 and there is a next step.
/// Such weights come from memory or L3 each run, other layers' weights in between: ResNet-18's
/// 3x3s over 512 channels at 7x7 ran 1.28 -> 1.09 ms and its layers 3 and 4 0.7 ms faster in all
/// (16.4 -> 15.7 ms); over 64 channels (74 KiB a task, in L2) they ran 2-3% slower, and an image
/// stem has no next step. Not for grouped convolutions (`grouped`): RegNet-Y-16GF ran 13% slower.
int default_prefetch(const te::Tensor& out, const ConfigSpace& space, const std::vector<int>& pos,
                     const target::Target& target, bool grouped) {
  const int off = knob_position(space, "prefetch", 0);
  const std::optional<ReductionBlock> block = reduction_block(out, space, pos);
  if (grouped || !block || target.l2_bytes <= 0) return off;
  const auto& chunks = space.knob("tile_ic").candidates[pos[knob_index(space, "tile_ic")]];
  if (chunks[0] * chunks[1] < 2) return off;
  return block->weights * split_extent(space, "tile_ic") * 4 > target.l2_bytes
             ? knob_position(space, "prefetch", 1)
             : off;
}

/// Whether the input of the next column tile is prefetched (prefetch_input): where the data is more
/// than twice L2, too large to stay in it between the layer that writes it and this one, or over
/// the passes of the tasks of each output channel block. It then comes from L3 or memory in as
/// many streams as the reduction has input channel blocks, each the width of a register tile, and
/// the hardware prefetchers left the tiles waiting: at batch 8, ResNet-50's 1x1s over 256 and 512
/// channels at 56x56 (25 MiB of input) ran at 52-63% of peak and at 95% prefetched, its stride-2
/// 3x3 over 128 channels at 52% and 63%; Faster R-CNN's FPN 1x1s over 3.3 and 6.5 MiB (the
/// backbone's early outputs, long evicted) at 48-57%, the network 4.7% faster. Over 1-2 MiB
/// (MobileNet-V2, EfficientNet-B0, RegNet-Y, DenseNet, Inception-v3) it made no difference.
int default_prefetch_input(const te::Tensor& out, const ConfigSpace& space,
                           const target::Target& target) {
  const te::Tensor data = input_of_rank(out, 5);
  if (!data.defined() || target.l2_bytes <= 0) return knob_position(space, "prefetch_input", 0);
  int64_t bytes = data->dtype().bytes();
  for (size_t i = 0; i < data.ndim(); ++i) bytes *= const_dim(data, i, "conv2d_nchwc");
  return knob_position(space, "prefetch_input", bytes > 2 * target.l2_bytes ? 1 : 0);
}

}  // namespace kiln::topi
