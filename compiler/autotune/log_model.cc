// The cost model of a whole record log (log_model.h): training, the shelf, zero-shot configs.
#include "compiler/autotune/log_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/json.h"
#include "compiler/autotune/explorer.h"
#include "compiler/autotune/features.h"

namespace kiln::autotune {
namespace {

using Clock = std::chrono::steady_clock;

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// The records of one task a model learns from: all of them up to `cap`, else the fastest
/// quarter of the cap and an even spread over the rest (append order).
std::vector<const records::MeasureRecord*> pick_rows(
    const std::vector<records::MeasureRecord>& recs, size_t cap) {
  std::vector<const records::MeasureRecord*> out;
  if (recs.size() <= cap) {
    for (const auto& r : recs) out.push_back(&r);
    return out;
  }
  std::vector<size_t> order(recs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  const size_t fastest = cap / 4;
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(fastest),
                    order.end(), [&](size_t a, size_t b) {
                      return recs[a].gflops > recs[b].gflops ||
                             (recs[a].gflops == recs[b].gflops && a < b);
                    });
  std::vector<bool> taken(recs.size(), false);
  for (size_t i = 0; i < fastest; ++i) taken[order[i]] = true;
  const size_t rest = cap - fastest;
  for (size_t k = 0; k < rest; ++k) taken[k * recs.size() / rest] = true;
  for (size_t i = 0; i < recs.size(); ++i)
    if (taken[i]) out.push_back(&recs[i]);
  return out;
}

/// The shelf entry: a JSON header line, then the model's bytes.
std::string shelf_entry(const LogModelInfo& info, const std::string& model) {
  Json::Object o;
  o["kind"] = Json(info.kind);
  o["target"] = Json(info.target);
  o["records"] = Json(static_cast<int64_t>(info.records));
  o["rows"] = Json(static_cast<int64_t>(info.rows));
  o["tasks"] = Json(static_cast<int64_t>(info.tasks));
  o["trained_at_ms"] = Json(info.trained_at_ms);
  Json::Object gains;
  for (const auto& [name, gain] : info.template_gains) gains[name] = Json(gain);
  o["template_gains"] = Json(std::move(gains));
  o["features"] = Json(static_cast<int64_t>(kLoopFeatureLength));
  return Json(std::move(o)).dump() + "\n" + model;
}

}  // namespace

std::unique_ptr<CostModel> kept_model(const records::RecordStore& store, const std::string& target,
                                      const std::string& kind, LogModelInfo* info) {
  const std::string name = records::cost_model_shelf(target, kind);
  std::optional<std::string> entry = store.shelf(name);
  if (!entry) return nullptr;
  const std::string what = "the kept cost model '" + name + "'";
  const size_t nl = entry->find('\n');
  KILN_USER_CHECK(nl != std::string::npos) << what << " has no header line";
  const Json h = Json::parse(entry->substr(0, nl), what);
  LogModelInfo got;
  got.kind = h.at("kind", what).as_string(what + ": kind");
  got.target = h.at("target", what).as_string(what + ": target");
  got.records = static_cast<size_t>(h.at("records", what).as_int(what + ": records"));
  got.rows = static_cast<size_t>(h.at("rows", what).as_int(what + ": rows"));
  got.tasks = static_cast<size_t>(h.at("tasks", what).as_int(what + ": tasks"));
  got.trained_at_ms = h.at("trained_at_ms", what).as_int(what + ": trained_at_ms");
  if (h.has("template_gains")) {
    for (const auto& [name, gain] :
         h.at("template_gains", what).as_object(what + ": template_gains")) {
      got.template_gains[name] = gain.as_double(what + ": template_gains." + name);
    }
  }
  const int64_t features = h.at("features", what).as_int(what + ": features");
  KILN_USER_CHECK(got.kind == kind && got.target == target)
      << what << " is a " << got.kind << " model of '" << got.target << "'";
  // A model of another feature layout (an older Kiln's) is not used: it is retrained.
  if (features != kLoopFeatureLength) return nullptr;
  std::unique_ptr<CostModel> m = load_cost_model(kind, entry->substr(nl + 1));
  KILN_USER_CHECK(m->num_features() == static_cast<size_t>(kLoopFeatureLength))
      << what << " reads " << m->num_features() << " features, not " << kLoopFeatureLength;
  if (info) *info = got;
  return m;
}

std::unique_ptr<CostModel> train_log_model(const std::vector<records::TaskHistory>& history,
                                           const std::string& target,
                                           const LogModelOptions& options, LogModelReport* report) {
  const auto t0 = Clock::now();
  LogModelReport local;
  LogModelReport& r = report ? *report : local;
  r.info = {};
  r.skipped_tasks = 0;
  size_t total = 0, done = 0;
  for (const auto& h : history) total += std::min(h.records.size(), options.max_rows_per_task);

  std::vector<std::vector<float>> x;
  std::vector<double> y;
  std::vector<int> group;
  size_t tasks = 0, records = 0;
  std::map<std::string, std::vector<double>> gains;  // template -> default time / best time
  for (const records::TaskHistory& h : history) {
    records += h.records.size();
    std::optional<Task> task;
    try {
      task = Task::from_workload(h.source.template_name, h.source.workload, target);
    } catch (const std::exception&) {
    }
    if (!task || task->key != h.task_key) {  // another Kiln's template or space
      ++r.skipped_tasks;
      done += std::min(h.records.size(), options.max_rows_per_task);
      continue;
    }
    double default_cost = 0, best_cost = std::numeric_limits<double>::infinity();
    for (const records::MeasureRecord& rec : h.records) {
      if (rec.error != ErrorKind::kNone || rec.costs_s.empty()) continue;
      best_cost = std::min(best_cost, rec.cost());
      if (rec.config_index == task->default_config.index()) default_cost = rec.cost();
    }
    if (default_cost > 0 && std::isfinite(best_cost) && best_cost > 0)
      gains[task->template_name].push_back(default_cost / best_cost);
    size_t rows = 0;
    for (const records::MeasureRecord* rec : pick_rows(h.records, options.max_rows_per_task)) {
      ++done;
      if (options.on_features && (done % 64 == 0 || done == total))
        options.on_features(done, total);
      if (rec->config_index >= task->space.size()) continue;
      std::vector<float> f;
      try {
        f = loop_features(task->lower_for_features(task->space.get(rec->config_index)));
      } catch (const std::exception&) {
        continue;  // a config that no longer lowers teaches nothing
      }
      x.push_back(std::move(f));
      y.push_back(rec->gflops);
      group.push_back(static_cast<int>(tasks));
      ++rows;
    }
    if (rows > 0) ++tasks;
  }
  if (x.size() < 2) return nullptr;
  std::unique_ptr<CostModel> m = make_cost_model(options.kind);
  m->fit(x, y, group);
  r.info = {options.kind, target, records, x.size(), tasks, now_ms(), {}};
  for (auto& [name, g] : gains) {
    std::sort(g.begin(), g.end());
    r.info.template_gains[name] =
        g.size() % 2 ? g[g.size() / 2] : (g[g.size() / 2 - 1] + g[g.size() / 2]) / 2;
  }
  r.trained_now = true;
  r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return m;
}

std::unique_ptr<CostModel> pretrained_model(records::RecordStore& store, const std::string& target,
                                            const LogModelOptions& options,
                                            LogModelReport* report) {
  LogModelReport local;
  LogModelReport& r = report ? *report : local;
  r = {};
  const size_t now = store.count_target(target);
  LogModelInfo info;
  std::unique_ptr<CostModel> kept = kept_model(store, target, options.kind, &info);
  if (kept) {
    const size_t grown = now > info.records ? now - info.records : 0;
    if (grown < options.min_new_records ||
        static_cast<double>(grown) < options.retrain_growth * static_cast<double>(info.records)) {
      r.info = info;
      r.why = "kept model, learned from " + std::to_string(info.rows) + " records of " +
              std::to_string(info.tasks) + " tasks";
      return kept;
    }
  }
  std::unique_ptr<CostModel> m = train_log_model(store.history(target), target, options, &r);
  if (!m) {
    r.why =
        kept ? "kept model (too few readable records to train again)" : "no records to learn from";
    if (kept) r.info = info;
    return kept;
  }
  store.put_shelf(records::cost_model_shelf(target, options.kind), shelf_entry(r.info, m->save()));
  r.why = (kept ? "trained again on " : "trained on ") + std::to_string(r.info.rows) +
          " records of " + std::to_string(r.info.tasks) + " tasks";
  return m;
}

std::optional<space::Config> predict_best_config(const Task& task, const CostModel& model) {
  // A short annealing on the model's scores (each scored config is lowered for its features).
  std::unordered_map<uint64_t, float> scores;
  auto features = [&](uint64_t index) {
    try {
      return loop_features(task.lower_for_features(task.space.get(index)));
    } catch (const std::exception&) {
      return std::vector<float>();  // does not lower: never chosen
    }
  };
  ScoreFn score = [&](const std::vector<uint64_t>& idx) {
    std::vector<std::vector<float>> rows;
    std::vector<size_t> at;
    std::vector<float> out(idx.size(), std::numeric_limits<float>::lowest());
    for (size_t i = 0; i < idx.size(); ++i) {
      if (auto it = scores.find(idx[i]); it != scores.end()) {
        out[i] = it->second;
        continue;
      }
      std::vector<float> f = features(idx[i]);
      if (f.empty()) {
        scores[idx[i]] = out[i];
        continue;
      }
      rows.push_back(std::move(f));
      at.push_back(i);
    }
    if (!rows.empty()) {
      const std::vector<float> s = model.predict(rows);
      for (size_t k = 0; k < at.size(); ++k) out[at[k]] = s[k];
    }
    for (size_t i = 0; i < idx.size(); ++i) scores[idx[i]] = out[i];
    return out;
  };
  ModelExplorerOptions mo;
  mo.parallel_size = 16;
  mo.n_iter = 40;
  mo.early_stop = 10;
  mo.eps_greedy = 0;
  mo.min_distance = 1;  // simply the best
  ModelExplorer explorer(task.space, fnv1a64(task.key.data(), task.key.size()), score, mo);
  std::vector<uint64_t> candidates = explorer.next_batch(8);
  candidates.push_back(task.default_config.index());
  const std::vector<float> s = score(candidates);
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return s[a] > s[b]; });
  // The guard: the best few in order, the first that lowers for the device (a GPU's limits too).
  for (size_t k = 0; k < order.size() && k < 4; ++k) {
    if (s[order[k]] == std::numeric_limits<float>::lowest()) break;
    const space::Config cfg = task.space.get(candidates[order[k]]);
    try {
      task.lower(cfg);
      return cfg;
    } catch (const std::exception&) {
    }
  }
  return std::nullopt;
}

}  // namespace kiln::autotune
