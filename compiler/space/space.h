// Config spaces: the knobs of a schedule template and the points of their product, the vocabulary
// the operator templates (topi) declare and the tuner (autotune) searches; it depends on neither.
//
// A template declares its knobs once per workload (its space), and then builds a schedule from
// one point of that space (a Config):
//
//   ConfigSpace space;
//   space.define_split("tile_y", 1024, 2);         // every way to write 1024 = a * b
//   space.define_knob("unroll_k", {1, 2, 4, 8});
//   Config cfg = space.get(17);                     // the 17th point (mixed radix over the knobs)
//   auto [yo, yi] = cfg.split("tile_y");            // {a, b}
//
// A config is identified by its index, so the tuner's log and explorers deal in integers; the
// knob values are derived from it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln::space {

enum class KnobKind : uint8_t {
  kSplit,  ///< a factorization of an extent into `parts` factors (outermost first)
  kOther,  ///< a choice among integers (unroll depth, vector width, a loop order's index, ...)
};

struct Knob {
  std::string name;
  KnobKind kind = KnobKind::kOther;
  /// Each candidate's values: the factors of a split, or a single integer.
  std::vector<std::vector<int64_t>> candidates;
};

/// How define_split picks factors.
enum class SplitPolicy : uint8_t {
  kFactors,  ///< every factor of the extent (splits that divide)
  kPower2,   ///< powers of two up to the extent (the last part takes the rest, guarded)
  /// Both: the factors, and the powers of two that do not divide (a partial last tile, which
  /// pass::partition_loops peels off so that the tile loops keep constant extents). Two parts only.
  kFactorsAndPower2,
};

class Config;

class ConfigSpace {
 public:
  /// Every way to split `extent` into `parts` factors under `policy`; the innermost factor is
  /// limited to `max_inner` when it is positive.
  void define_split(const std::string& name, int64_t extent, int parts,
                    SplitPolicy policy = SplitPolicy::kFactors, int64_t max_inner = 0);
  /// A choice among `choices`.
  void define_knob(const std::string& name, std::vector<int64_t> choices);

  /// The number of points (the product of the knobs' candidate counts).
  uint64_t size() const;
  /// The point at `index` (0 <= index < size()); kiln::Error otherwise.
  Config get(uint64_t index) const;
  /// The point whose knobs take the given candidate positions.
  Config from_positions(const std::vector<int>& positions) const;
  const std::vector<Knob>& knobs() const { return *knobs_; }
  const Knob& knob(const std::string& name) const;

 private:
  /// Shared with the configs made from this space, which stay valid when the space goes away;
  /// defining a knob after that copies the list first.
  std::vector<Knob>& mutable_knobs();
  std::shared_ptr<std::vector<Knob>> knobs_ = std::make_shared<std::vector<Knob>>();
};

/// One point of a space: the value of every knob.
class Config {
 public:
  Config() = default;
  Config(std::shared_ptr<const std::vector<Knob>> knobs, uint64_t index,
         std::vector<int> positions);

  uint64_t index() const { return index_; }
  /// The candidate position chosen for each knob, in the space's order.
  const std::vector<int>& positions() const { return positions_; }
  /// The factors of split knob `name`, outermost first.
  const std::vector<int64_t>& split(const std::string& name) const;
  /// The value of knob `name`.
  int64_t knob(const std::string& name) const;
  /// "tile_y=[32, 32] unroll_k=4"
  std::string str() const;

 private:
  /// The position of knob `name` in the space.
  size_t find(const std::string& name) const;

  std::shared_ptr<const std::vector<Knob>> knobs_;
  uint64_t index_ = 0;
  std::vector<int> positions_;
};

}  // namespace kiln::space
