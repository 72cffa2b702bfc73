// Explorers: random, grid, genetic and model-guided simulated annealing.
#include "compiler/autotune/explorer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "base/error.h"

namespace kiln::autotune {

// ---------------------------------------------------------------------------------------------
// Explorer

Explorer::Explorer(space::ConfigSpace space, uint64_t seed)
    : space_(std::move(space)), size_(space_.size()), rng_(seed) {}

void Explorer::mark_visited(uint64_t index) {
  KILN_USER_CHECK(index < size_) << "explorer: config index " << index
                                 << " is outside the space of " << size_ << " points";
  visit(index);
}

void Explorer::update(const std::vector<uint64_t>& configs, const std::vector<double>& throughput) {
  KILN_USER_CHECK(configs.size() == throughput.size())
      << "explorer: " << configs.size() << " configs but " << throughput.size() << " throughputs";
  for (size_t i = 0; i < configs.size(); ++i) {
    mark_visited(configs[i]);
    double t = std::isfinite(throughput[i]) ? std::max(throughput[i], 0.0) : 0.0;
    auto [it, fresh] = measured_.emplace(configs[i], t);
    if (!fresh) it->second = std::max(it->second, t);
  }
}

uint64_t Explorer::below(uint64_t n) {
  // Lemire's multiply-shift with rejection: unbiased and the same on every platform.
  unsigned __int128 m = static_cast<unsigned __int128>(rng_()) * n;
  auto low = static_cast<uint64_t>(m);
  if (low < n) {
    uint64_t threshold = -n % n;
    while (low < threshold) {
      m = static_cast<unsigned __int128>(rng_()) * n;
      low = static_cast<uint64_t>(m);
    }
  }
  return static_cast<uint64_t>(m >> 64);
}

double Explorer::unit() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

std::vector<uint64_t> Explorer::take_random(size_t n) {
  std::vector<uint64_t> out;
  while (out.size() < n && !exhausted()) {
    uint64_t left = size_ - visited_.size();
    if (left <= size_ / 2) {
      // At least half of the space is visited, so it is small enough to list what is left.
      std::vector<uint64_t> rest;
      rest.reserve(left);
      for (uint64_t i = 0; i < size_; ++i) {
        if (!visited(i)) rest.push_back(i);
      }
      size_t need = std::min<size_t>(n - out.size(), rest.size());
      for (size_t i = 0; i < need; ++i) {
        std::swap(rest[i], rest[i + below(rest.size() - i)]);
        visit(rest[i]);
        out.push_back(rest[i]);
      }
      break;
    }
    uint64_t idx = below(size_);  // fewer than 2 tries per new config on average
    if (visit(idx)) out.push_back(idx);
  }
  return out;
}

std::vector<std::pair<uint64_t, double>> Explorer::best_measured(size_t k) const {
  std::vector<std::pair<uint64_t, double>> all(measured_.begin(), measured_.end());
  auto better = [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  };
  k = std::min(k, all.size());
  std::partial_sort(all.begin(), all.begin() + static_cast<ptrdiff_t>(k), all.end(), better);
  all.resize(k);
  return all;
}

// ---------------------------------------------------------------------------------------------
// GridExplorer

std::vector<uint64_t> GridExplorer::next_batch(size_t n) {
  std::vector<uint64_t> out;
  for (; out.size() < n && cursor_ < size_; ++cursor_) {
    if (visit(cursor_)) out.push_back(cursor_);
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// GeneticExplorer

GeneticExplorer::GeneticExplorer(space::ConfigSpace space, uint64_t seed, size_t population,
                                 size_t elite, double mutation_prob)
    : Explorer(std::move(space), seed),
      population_(std::max<size_t>(population, 2)),
      elite_(elite),
      mutation_prob_(mutation_prob) {}

std::vector<int> GeneticExplorer::mutate(std::vector<int> pos, double prob) {
  const auto& knobs = space_.knobs();
  for (size_t k = 0; k < pos.size(); ++k) {
    if (unit() < prob) pos[k] = static_cast<int>(below(knobs[k].candidates.size()));
  }
  return pos;
}

std::vector<uint64_t> GeneticExplorer::next_batch(size_t n) {
  if (num_measured() < population_) return take_random(n);
  auto pool = best_measured(population_);
  std::vector<std::vector<int>> genes;
  std::vector<double> cumulative;
  double total = 0;
  for (auto& [idx, t] : pool) {
    genes.push_back(space_.get(idx).positions());
    total += t;
    cumulative.push_back(total);
  }
  auto pick = [&]() -> const std::vector<int>& {
    if (total <= 0) return genes[below(genes.size())];
    double r = unit() * total;
    size_t i = std::upper_bound(cumulative.begin(), cumulative.end(), r) - cumulative.begin();
    return genes[std::min(i, genes.size() - 1)];
  };
  size_t n_knobs = space_.knobs().size();
  double elite_prob = n_knobs > 0 ? std::max(mutation_prob_, 1.0 / double(n_knobs)) : 0;

  std::vector<uint64_t> out;
  // Exploitation: small mutations of the best configs.
  for (size_t e = 0; e < elite_ && out.size() < n; ++e) {
    const auto& parent = genes[e % genes.size()];
    for (int tries = 0; tries < 20; ++tries) {
      uint64_t idx = space_.from_positions(mutate(parent, elite_prob)).index();
      if (visit(idx)) {
        out.push_back(idx);
        break;
      }
    }
  }
  // Crossover and mutation.
  for (size_t tries = 0; out.size() < n && tries < 20 * n + 100; ++tries) {
    const auto& a = pick();
    const auto& b = pick();
    std::vector<int> child(n_knobs);
    for (size_t k = 0; k < n_knobs; ++k) child[k] = unit() < 0.5 ? a[k] : b[k];
    uint64_t idx = space_.from_positions(mutate(std::move(child), mutation_prob_)).index();
    if (visit(idx)) out.push_back(idx);
  }
  auto rest = take_random(n - out.size());
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

// ---------------------------------------------------------------------------------------------
// ModelExplorer

ModelExplorer::ModelExplorer(space::ConfigSpace space, uint64_t seed, ScoreFn score_fn,
                             ModelExplorerOptions options)
    : Explorer(std::move(space), seed), score_fn_(std::move(score_fn)), options_(options) {
  KILN_USER_CHECK(options_.parallel_size > 0) << "ModelExplorer: parallel_size must be positive";
  KILN_USER_CHECK(options_.n_iter >= 0) << "ModelExplorer: n_iter must not be negative";
  KILN_USER_CHECK(options_.eps_greedy >= 0 && options_.eps_greedy <= 1)
      << "ModelExplorer: eps_greedy must be in [0, 1], got " << options_.eps_greedy;
  const auto& knobs = space_.knobs();
  for (size_t k = 0; k < knobs.size(); ++k) {
    if (knobs[k].candidates.size() > 1) movable_.push_back(k);
  }
}

void ModelExplorer::update(const std::vector<uint64_t>& configs,
                           const std::vector<double>& throughput) {
  Explorer::update(configs, throughput);
  cache_.clear();
}

void ModelExplorer::set_score_fn(ScoreFn score_fn) {
  score_fn_ = std::move(score_fn);
  cache_.clear();
}

std::vector<float> ModelExplorer::score(const std::vector<uint64_t>& indices) {
  std::vector<uint64_t> todo;
  std::unordered_set<uint64_t> queued;
  for (uint64_t i : indices) {
    if (!cache_.count(i) && queued.insert(i).second) todo.push_back(i);
  }
  if (!todo.empty()) {
    std::vector<float> s = score_fn_(todo);
    KILN_USER_CHECK(s.size() == todo.size())
        << "ModelExplorer: the score function returned " << s.size() << " scores for "
        << todo.size() << " configs";
    for (size_t i = 0; i < todo.size(); ++i) {
      cache_[todo[i]] = std::isfinite(s[i]) ? s[i] : std::numeric_limits<float>::lowest();
    }
  }
  std::vector<float> out;
  out.reserve(indices.size());
  for (uint64_t i : indices) out.push_back(cache_.at(i));
  return out;
}

std::vector<int> ModelExplorer::step(const std::vector<int>& pos) {
  std::vector<int> p = pos;
  if (movable_.empty()) return p;
  size_t k = movable_[below(movable_.size())];
  int c = static_cast<int>(space_.knobs()[k].candidates.size());
  if (c == 2 || unit() < options_.random_step) {
    int r = static_cast<int>(below(c - 1));  // any other position
    p[k] = r >= p[k] ? r + 1 : r;
  } else if (p[k] == 0) {
    p[k] = 1;
  } else if (p[k] == c - 1) {
    p[k] = c - 2;
  } else {
    p[k] += unit() < 0.5 ? -1 : 1;
  }
  return p;
}

std::vector<std::pair<float, uint64_t>> ModelExplorer::anneal(size_t k) {
  const size_t n_chains = static_cast<size_t>(options_.parallel_size);
  // Starting points: the best measured configs (half the chains at most), the chains of the
  // previous batch, then random points.
  std::vector<uint64_t> starts;
  std::unordered_set<uint64_t> started;
  for (auto& [idx, t] : best_measured(n_chains / 2)) {
    if (started.insert(idx).second) starts.push_back(idx);
  }
  if (options_.persistent) {
    for (auto& c : chains_) {
      if (starts.size() < n_chains && started.insert(c.index).second) starts.push_back(c.index);
    }
  }
  for (size_t tries = 0; starts.size() < n_chains && tries < 4 * n_chains; ++tries) {
    uint64_t idx = below(size_);
    if (started.insert(idx).second) starts.push_back(idx);
  }
  std::vector<float> s0 = score(starts);
  std::vector<Chain> chains(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    chains[i] = Chain{space_.get(starts[i]).positions(), starts[i], s0[i]};
  }

  // The best distinct unvisited configs seen, ordered by (score, index).
  std::set<std::pair<float, uint64_t>> top;
  std::unordered_set<uint64_t> in_top;
  auto offer = [&](uint64_t idx, float s) {
    if (visited(idx) || in_top.count(idx)) return false;
    if (top.size() >= k) {
      if (!(std::make_pair(s, idx) > *top.begin())) return false;
      in_top.erase(top.begin()->second);
      top.erase(top.begin());
    }
    top.emplace(s, idx);
    in_top.insert(idx);
    return true;
  };
  for (auto& c : chains) offer(c.index, c.score);

  // Normalize the score differences by the spread of the starting scores.
  float lo = std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::lowest();
  for (float s : s0) {
    if (s == std::numeric_limits<float>::lowest()) continue;
    lo = std::min(lo, s);
    hi = std::max(hi, s);
  }
  double scale = hi > lo ? double(hi) - double(lo) : 1.0;

  int last_change = 0;
  std::vector<std::vector<int>> next(chains.size());
  std::vector<uint64_t> next_idx(chains.size());
  for (int it = 0; it < options_.n_iter; ++it) {
    double frac = options_.n_iter > 1 ? double(it) / double(options_.n_iter - 1) : 1.0;
    double temp = options_.temp_start + (options_.temp_end - options_.temp_start) * frac;
    for (size_t c = 0; c < chains.size(); ++c) {
      next[c] = step(chains[c].pos);
      next_idx[c] = space_.from_positions(next[c]).index();
    }
    std::vector<float> s = score(next_idx);
    bool changed = false;
    for (size_t c = 0; c < chains.size(); ++c) {
      changed |= offer(next_idx[c], s[c]);
      double delta = (double(s[c]) - double(chains[c].score)) / scale;
      bool accept = delta >= 0 || (temp > 0 && unit() < std::exp(delta / temp));
      if (accept) chains[c] = Chain{std::move(next[c]), next_idx[c], s[c]};
    }
    if (changed) {
      last_change = it;
    } else if (options_.early_stop > 0 && it - last_change >= options_.early_stop) {
      break;
    }
  }
  chains_ = std::move(chains);
  return {top.rbegin(), top.rend()};
}

std::vector<uint64_t> ModelExplorer::next_batch(size_t n) {
  if (n == 0) return {};
  if (!score_fn_) return take_random(n);  // a model, even before any measurement: a pre-trained one
  size_t n_random = static_cast<size_t>(std::floor(double(n) * options_.eps_greedy));
  size_t n_model = n - n_random;
  std::vector<uint64_t> out;
  if (n_model > 0) {
    size_t k = std::max<size_t>(
        n_model + 1, static_cast<size_t>(std::ceil(options_.candidate_ratio * double(n_model))));
    auto cand = anneal(k);
    // Diversity: repeatedly take the candidate that is close (fewer than min_distance knobs
    // apart) to the fewest of those taken, the best-scoring among equals: first every candidate
    // far from all taken ones, best first, then the least crowded of the rest.
    std::vector<std::vector<int>> pos(cand.size());
    for (size_t i = 0; i < cand.size(); ++i) pos[i] = space_.get(cand[i].second).positions();
    std::vector<int> conflicts(cand.size(), 0);
    std::vector<bool> taken(cand.size(), false);
    while (out.size() < n_model && out.size() < cand.size()) {
      size_t best = cand.size();
      for (size_t i = 0; i < cand.size(); ++i) {
        if (!taken[i] && (best == cand.size() || conflicts[i] < conflicts[best])) best = i;
        if (best < cand.size() && conflicts[best] == 0) break;
      }
      taken[best] = true;
      out.push_back(cand[best].second);
      if (options_.min_distance <= 1) continue;
      for (size_t i = 0; i < cand.size(); ++i) {
        if (taken[i]) continue;
        int d = 0;
        for (size_t j = 0; j < pos[i].size(); ++j) d += pos[i][j] != pos[best][j];
        conflicts[i] += d < options_.min_distance;
      }
    }
    for (uint64_t idx : out) visit(idx);
  }
  auto rest = take_random(n - out.size());
  out.insert(out.end(), rest.begin(), rest.end());
  return out;
}

}  // namespace kiln::autotune
