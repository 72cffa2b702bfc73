// Building config spaces and decoding their points.
#include "compiler/space/space.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "base/error.h"

namespace kiln::space {
namespace {

/// The factors of n, ascending, in O(sqrt(n)) steps (extents reach 2^31 in workloads).
std::vector<int64_t> factors_of(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t i = 1; i <= n / i; ++i) {
    if (n % i != 0) continue;
    low.push_back(i);
    if (i != n / i) high.push_back(n / i);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

std::vector<int64_t> powers_of_two(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t i = 1; i <= n; i *= 2) f.push_back(i);
  return f;
}

/// The factors of n and the powers of two up to n, ascending, each once.
std::vector<int64_t> factors_and_powers_of_two(int64_t n) {
  std::vector<int64_t> f = factors_of(n);
  for (int64_t p : powers_of_two(n)) {
    if (n % p != 0) f.push_back(p);
  }
  std::sort(f.begin(), f.end());
  return f;
}

}  // namespace

void ConfigSpace::define_split(const std::string& name, int64_t extent, int parts,
                               SplitPolicy policy, int64_t max_inner) {
  KILN_USER_CHECK(extent > 0) << "define_split '" << name << "': extent must be positive, got "
                              << extent;
  KILN_USER_CHECK(parts >= 2) << "define_split '" << name << "': needs at least 2 parts, got "
                              << parts;
  KILN_USER_CHECK(policy != SplitPolicy::kFactorsAndPower2 || parts == 2)
      << "define_split '" << name << "': factors and powers of two split in 2 parts only, got "
      << parts;
  for (auto& k : *knobs_)
    KILN_USER_CHECK(k.name != name) << "config space: knob '" << name << "' defined twice";
  Knob knob{name, KnobKind::kSplit, {}};
  // Choose the inner parts (innermost last); the outermost part takes what is left.
  std::vector<int64_t> inner(parts - 1);
  std::function<void(int, int64_t)> rec = [&](int level, int64_t left) {
    if (level < 0) {
      // Outer part: what the inner ones leave (with powers of two: enough to cover the extent).
      int64_t prod = 1;
      for (auto v : inner) prod *= v;
      std::vector<int64_t> c{policy == SplitPolicy::kFactors ? left : (extent + prod - 1) / prod};
      c.insert(c.end(), inner.begin(), inner.end());
      knob.candidates.push_back(std::move(c));
      return;
    }
    auto options = policy == SplitPolicy::kFactors  ? factors_of(left)
                   : policy == SplitPolicy::kPower2 ? powers_of_two(left)
                                                    : factors_and_powers_of_two(left);
    for (int64_t f : options) {
      if (level == parts - 2 && max_inner > 0 && f > max_inner) continue;
      inner[level] = f;
      rec(level - 1, policy == SplitPolicy::kFactors ? left / f : left);
    }
  };
  rec(parts - 2, extent);
  mutable_knobs().push_back(std::move(knob));
}

void ConfigSpace::define_knob(const std::string& name, std::vector<int64_t> choices) {
  KILN_USER_CHECK(!choices.empty()) << "define_knob '" << name << "': no choices";
  for (auto& k : *knobs_)
    KILN_USER_CHECK(k.name != name) << "config space: knob '" << name << "' defined twice";
  Knob knob{name, KnobKind::kOther, {}};
  for (auto c : choices) knob.candidates.push_back({c});
  mutable_knobs().push_back(std::move(knob));
}

std::vector<Knob>& ConfigSpace::mutable_knobs() {
  if (knobs_.use_count() > 1) knobs_ = std::make_shared<std::vector<Knob>>(*knobs_);
  return *knobs_;
}

uint64_t ConfigSpace::size() const {
  uint64_t n = 1;
  for (auto& k : *knobs_) n *= k.candidates.size();
  return n;
}

Config ConfigSpace::get(uint64_t index) const {
  KILN_USER_CHECK(index < size()) << "config index " << index << " is outside the space of "
                                  << size() << " points";
  const auto& knobs = *knobs_;
  std::vector<int> pos(knobs.size());
  uint64_t rest = index;
  for (size_t i = 0; i < knobs.size(); ++i) {
    pos[i] = static_cast<int>(rest % knobs[i].candidates.size());
    rest /= knobs[i].candidates.size();
  }
  return Config(knobs_, index, std::move(pos));
}

Config ConfigSpace::from_positions(const std::vector<int>& positions) const {
  const auto& knobs = *knobs_;
  KILN_USER_CHECK(positions.size() == knobs.size())
      << "config: " << positions.size() << " positions for " << knobs.size() << " knobs";
  uint64_t index = 0, radix = 1;
  for (size_t i = 0; i < knobs.size(); ++i) {
    KILN_USER_CHECK(positions[i] >= 0 && size_t(positions[i]) < knobs[i].candidates.size())
        << "config: position " << positions[i] << " of knob '" << knobs[i].name
        << "' is out of range";
    index += radix * positions[i];
    radix *= knobs[i].candidates.size();
  }
  return Config(knobs_, index, positions);
}

const Knob& ConfigSpace::knob(const std::string& name) const {
  for (auto& k : *knobs_) {
    if (k.name == name) return k;
  }
  KILN_USER_ERROR() << "config space has no knob '" << name << "'";
}

Config::Config(std::shared_ptr<const std::vector<Knob>> knobs, uint64_t index,
               std::vector<int> positions)
    : knobs_(std::move(knobs)), index_(index), positions_(std::move(positions)) {}

size_t Config::find(const std::string& name) const {
  KILN_USER_CHECK(knobs_ != nullptr) << "config: an empty config has no knob '" << name << "'";
  for (size_t i = 0; i < knobs_->size(); ++i) {
    if ((*knobs_)[i].name == name) return i;
  }
  KILN_USER_ERROR() << "config has no knob '" << name << "'";
}

const std::vector<int64_t>& Config::split(const std::string& name) const {
  size_t i = find(name);
  const Knob& k = (*knobs_)[i];
  KILN_USER_CHECK(k.kind == KnobKind::kSplit) << "config: knob '" << name << "' is not a split";
  return k.candidates[positions_[i]];
}

int64_t Config::knob(const std::string& name) const {
  size_t i = find(name);
  const Knob& k = (*knobs_)[i];
  KILN_USER_CHECK(k.kind == KnobKind::kOther)
      << "config: knob '" << name << "' is a split; use split()";
  return k.candidates[positions_[i]][0];
}

std::string Config::str() const {
  if (!knobs_) return "<empty>";
  std::ostringstream os;
  for (size_t i = 0; i < knobs_->size(); ++i) {
    const Knob& k = (*knobs_)[i];
    const auto& v = k.candidates[positions_[i]];
    os << (i ? " " : "") << k.name << "=";
    if (k.kind == KnobKind::kSplit) {
      os << "[";
      for (size_t j = 0; j < v.size(); ++j) os << (j ? ", " : "") << v[j];
      os << "]";
    } else {
      os << v[0];
    }
  }
  return os.str();
}

}  // namespace kiln::space
