// The tuning loop: explorer, candidates (lower -> dedupe -> the measurer), records, model refit.
#include "compiler/autotune/tuner.h"

#include <chrono>
#include <limits>
#include <memory>
#include <unordered_map>

#include "base/error.h"
#include "compiler/autotune/cost_model.h"
#include "compiler/autotune/explorer.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/log_model.h"
#include "compiler/ir/equal.h"

namespace kiln::autotune {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::unique_ptr<Explorer> make_explorer(const TuneOptions& o, const space::ConfigSpace& space) {
  if (o.explorer == "random") return std::make_unique<RandomExplorer>(space, o.seed);
  if (o.explorer == "grid") return std::make_unique<GridExplorer>(space);
  if (o.explorer == "ga") return std::make_unique<GeneticExplorer>(space, o.seed);
  KILN_USER_CHECK(o.explorer == "xgb")
      << "tune: unknown explorer '" << o.explorer << "' (known: xgb, random, grid, ga)";
  // Fewer, shorter chains than TVM's defaults: every scored state is lowered (up to
  // vectorization, Task::lower_for_features) for its features.
  ModelExplorerOptions mo;
  mo.parallel_size = 32;
  mo.n_iter = 80;
  mo.early_stop = 20;
  return std::make_unique<ModelExplorer>(space, o.seed, ScoreFn{}, mo);
}

/// Features of configs of one task, kept in `cache` (the Tuner's, so that later tasks reading
/// this one's records for transfer do not lower its configs again). Loop features read
/// Task::lower_for_features' program, never the full lowering a measurement needs: the search
/// scores hundreds of configs per batch it measures.
class FeatureCache {
 public:
  FeatureCache(const Task& task, bool loop, std::unordered_map<uint64_t, std::vector<float>>& cache)
      : task_(task), loop_(loop), cache_(cache) {}

  const std::vector<float>& get(uint64_t index) {
    auto it = cache_.find(index);
    if (it != cache_.end()) return it->second;
    std::vector<float> f;
    const space::Config cfg = task_.space.get(index);
    if (loop_) {
      try {
        f = loop_features(task_.lower_for_features(cfg));
      } catch (const std::exception&) {
        f.assign(kLoopFeatureLength, 0.0f);  // a config that does not lower scores as nothing
      }
    } else {
      f = knob_features(task_.space, cfg);
    }
    return cache_.emplace(index, std::move(f)).first->second;
  }

 private:
  const Task& task_;
  bool loop_;
  std::unordered_map<uint64_t, std::vector<float>>& cache_;
};

}  // namespace

Tuner::Tuner(records::RecordStore& log, TuneOptions options, Measurer* measurer)
    : log_(log), options_(std::move(options)), measurer_(measurer) {
  KILN_USER_CHECK(options_.trials > 0 && options_.batch > 0)
      << "tune: trials and batch must be positive (got " << options_.trials << " and "
      << options_.batch << ")";
  KILN_USER_CHECK(options_.features == "loop" || options_.features == "knob")
      << "tune: unknown features '" << options_.features << "' (known: loop, knob)";
  make_cost_model(options_.cost_model);  // refuses an unknown kind now, not at the first task
  KILN_USER_CHECK(!options_.prior || (options_.prior->trained() &&
                                      options_.prior->num_features() == kLoopFeatureLength))
      << "tune: the pre-trained cost model is untrained or not of the loop features ("
      << (options_.prior ? options_.prior->num_features() : 0) << " features, expected "
      << kLoopFeatureLength << ")";
  if (!measurer_) {
    owned_measurer_ = std::make_unique<LocalMeasurer>(log_, options_.local);
    measurer_ = owned_measurer_.get();
  }
}

TaskResult Tuner::tune(const Task& task, const std::vector<const Task*>& history, int trials) {
  KILN_USER_CHECK(trials >= 0) << "tune: trials must be >= 0 (0: the options'), got " << trials;
  if (trials == 0) trials = options_.trials;
  const auto t0 = Clock::now();
  TaskResult result;
  result.task_key = task.key;
  const std::string& target = task.target;
  std::vector<records::MeasureRecord> earlier = log_.records(task.key, target);
  auto finish = [&] {
    result.trials = static_cast<int>(log_.count(task.key, target));
    if (auto best = log_.best(task.key, target)) {
      result.has_best = true;
      result.best_gflops = best->gflops;
      result.best_config = best->config_index;
    }
    return result;
  };
  if (static_cast<int>(earlier.size()) >= trials) return finish();
  // So that a model trained on the whole log (log_model.h) can read this task's records later.
  log_.note_task(task.key, {task.template_name, task.workload});

  std::unique_ptr<Explorer> explorer = make_explorer(options_, task.space);
  const bool use_model = options_.explorer == "xgb";
  const bool loop = options_.features == "loop";
  FeatureCache features(task, loop, features_[task.key]);
  std::unique_ptr<CostModel> model = make_cost_model(options_.cost_model);
  const CostModel* prior = use_model && loop ? options_.prior : nullptr;

  // What the model learns from: this task's measurements, and the earlier tasks' (transfer).
  std::vector<std::vector<float>> x;
  std::vector<double> y;
  std::vector<int> group;
  double best = 0;
  for (const records::MeasureRecord& r : earlier) {
    if (r.config_index >= task.space.size()) continue;
    explorer->update({r.config_index}, {r.gflops});
    best = std::max(best, r.gflops);
    if (use_model) {
      x.push_back(features.get(r.config_index));
      y.push_back(r.gflops);
      group.push_back(0);
    }
  }
  if (use_model) {
    int gid = 1;
    for (const Task* h : history) {
      if (h->key == task.key) continue;
      FeatureCache hf(*h, loop, features_[h->key]);
      const std::vector<records::MeasureRecord> recs = log_.records(h->key, target);
      for (size_t i = 0; i < recs.size() && i < 200; ++i) {
        if (recs[i].config_index >= h->space.size()) continue;
        const std::vector<float>& f = hf.get(recs[i].config_index);
        if (!x.empty() && f.size() != x.front().size()) continue;
        x.push_back(f);
        y.push_back(recs[i].gflops);
        group.push_back(gid);
      }
      ++gid;
    }
  }
  auto* model_explorer = dynamic_cast<ModelExplorer*>(explorer.get());
  auto refit = [&] {
    if (!use_model) return;
    if (prior) {  // the pre-trained model, adapted to what is measured of this model's tasks
      model = prior->clone();
      if (x.size() >= 2) model->adapt(x, y, group);
    } else {
      if (x.size() < 2) return;
      model->fit(x, y, group);
    }
    model_explorer->set_score_fn([&](const std::vector<uint64_t>& idx) {
      std::vector<std::vector<float>> rows;
      rows.reserve(idx.size());
      for (uint64_t i : idx) rows.push_back(features.get(i));
      result.scored += static_cast<int>(idx.size());
      return model->predict(rows);
    });
  };
  refit();
  result.search_s += seconds_since(t0);

  // The device of the records the Tuner makes itself (configs that do not lower): the measurer's,
  // as its latest record names it.
  std::string device;
  if (auto* local = dynamic_cast<LocalMeasurer*>(measurer_)) {
    device = local->options().device;
  } else if (!earlier.empty()) {
    device = earlier.back().device;
  }
  std::unordered_map<uint64_t, records::MeasureRecord>
      by_program;      // structural hash -> measurement
  bool begun = false;  // whether measurer_->begin_task(task) was called
  int done = static_cast<int>(earlier.size());

  while (done < trials && !explorer->exhausted()) {
    const auto search_start = Clock::now();
    // The template's default is measured first, so that the log's best is never a config worse
    // than what an untuned build would use (up to measurement noise).
    std::vector<uint64_t> batch;
    const uint64_t dflt = task.default_config.index();
    if (options_.default_first && !explorer->visited(dflt)) {
      explorer->mark_visited(dflt);
      batch.push_back(dflt);
    }
    for (uint64_t i : explorer->next_batch(static_cast<size_t>(
             std::min(options_.batch, trials - done) - static_cast<int>(batch.size())))) {
      batch.push_back(i);
    }
    result.search_s += seconds_since(search_start);
    if (batch.empty()) break;
    ++result.rounds;
    const auto measure_start = Clock::now();
    // 1. Lower every config; a program equal to one measured before (or earlier in the batch) is
    //    measured once.
    struct Slot {
      records::MeasureRecord rec;
      uint64_t hash = 0;
      int same_as = -1;       ///< an earlier slot of the batch with the same program
      bool reused = false;    ///< gets another config's measurement
      bool measured = false;  ///< its record came from the measurer (already in the log)
    };
    std::vector<Slot> slots(batch.size());
    std::unordered_map<uint64_t, int> first_in_batch;
    std::vector<Candidate> distinct;
    std::vector<size_t> distinct_slot;
    for (size_t k = 0; k < batch.size(); ++k) {
      Slot& s = slots[k];
      const space::Config cfg = task.space.get(batch[k]);
      s.rec.target = target;
      s.rec.device = device;
      s.rec.task_key = task.key;
      s.rec.config_index = batch[k];
      s.rec.config = cfg.str();
      s.rec.search_seed = options_.seed;
      ir::PrimFunc func;
      try {
        func = task.lower(cfg);
        s.hash = ir::structural_hash(func);
      } catch (const std::exception& e) {
        s.rec.error = ErrorKind::kCompileError;
        s.rec.error_msg = e.what();
        continue;
      }
      if (auto it = by_program.find(s.hash); it != by_program.end()) {
        s.rec.device = it->second.device;
        s.rec.costs_s = it->second.costs_s;
        s.rec.error = it->second.error;
        s.rec.error_msg = it->second.error_msg;
        s.reused = true;
      } else if (auto b = first_in_batch.find(s.hash); b != first_in_batch.end()) {
        s.same_as = b->second;
        s.reused = true;
      } else {
        first_in_batch.emplace(s.hash, static_cast<int>(k));
        distinct.push_back({batch[k], s.rec.config, std::move(func)});
        distinct_slot.push_back(k);
      }
    }
    // 2. The measurer builds and measures the distinct programs and appends their records.
    if (!distinct.empty()) {
      if (!begun) {
        measurer_->begin_task(task);
        begun = true;
      }
      std::vector<records::MeasureRecord> measured =
          measurer_->measure(task, distinct, options_.seed);
      KILN_ICHECK(measured.size() == distinct.size())
          << "the measurer returned " << measured.size() << " records for " << distinct.size()
          << " candidates";
      for (size_t b = 0; b < measured.size(); ++b) {
        KILN_ICHECK(measured[b].config_index == distinct[b].config_index)
            << "the measurer's record " << b << " is of config " << measured[b].config_index
            << ", not " << distinct[b].config_index;
        Slot& s = slots[distinct_slot[b]];
        s.rec = std::move(measured[b]);
        s.measured = true;
        by_program.emplace(s.hash, s.rec);
        device = s.rec.device;
      }
    }
    result.measure_s += seconds_since(measure_start);
    const auto learn_start = Clock::now();
    // 3. The records the measurer did not make: configs that do not lower, reused measurements.
    std::vector<double> throughput;
    std::vector<double> round_costs;
    for (size_t k = 0; k < slots.size(); ++k) {
      Slot& s = slots[k];
      records::MeasureRecord& rec = s.rec;
      if (!s.measured) {
        if (s.same_as >= 0) {
          const records::MeasureRecord& m = slots[static_cast<size_t>(s.same_as)].rec;
          rec.device = m.device;
          rec.costs_s = m.costs_s;
          rec.error = m.error;
          rec.error_msg = m.error_msg;
          rec.contended = m.contended;
        } else if (!s.reused) {
          rec.device = device;  // did not lower: the measurer's device, as known after this batch
        }
        finish_record(rec, task);
        log_.append(rec);
      }
      if (rec.error != ErrorKind::kNone || rec.costs_s.empty()) {
        ++result.errors[error_kind_name(rec.error)];
      }
      if (rec.contended) ++result.contended;
      ++done;
      ++result.measured_now;
      if (s.reused) ++result.reused;
      best = std::max(best, rec.gflops);
      result.curve.push_back(best);
      round_costs.push_back(rec.error == ErrorKind::kNone && !rec.costs_s.empty()
                                ? rec.cost()
                                : std::numeric_limits<double>::infinity());
      throughput.push_back(rec.gflops);
      if (use_model) {
        x.push_back(features.get(batch[k]));
        y.push_back(rec.gflops);
        group.push_back(0);
      }
    }
    explorer->update(batch, throughput);
    if (done < trials) refit();  // a model for the next round (a later call fits its own)
    result.search_s += seconds_since(learn_start);
    if (options_.progress) {
      TuneProgress p;
      p.task_key = task.key;
      p.trials_done = done;
      p.trials_total = trials;
      p.best_gflops = best;
      p.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
      const int now = result.measured_now;
      p.eta_s = now > 0 ? p.elapsed_s / now * (trials - done) : 0;
      p.costs_s = std::move(round_costs);
      options_.progress(p);
    }
  }
  return finish();
}

LogConfigSource LogConfigSource::with_kept_model(const records::RecordStore& log,
                                                 const std::string& target) {
  LogModelInfo info;
  std::shared_ptr<const CostModel> model = kept_model(log, target, "xgb", &info);
  LogConfigSource source(log, model.get(), info.template_gains);
  source.owned_ = std::move(model);
  return source;
}

space::Config LogConfigSource::choose(const Task& task) {
  if (auto best = log_.best(task.key, task.target);
      best && best->config_index < task.space.size()) {
    ++tuned_;
    return task.space.get(best->config_index);
  }
  auto gain = gains_.find(task.template_name);
  if (model_ && gain != gains_.end() && gain->second >= kZeroShotMinGain) {
    if (std::optional<space::Config> cfg = predict_best_config(task, *model_)) {
      ++predicted_;
      return *cfg;
    }
  }
  ++defaults_;
  return task.default_config;
}

}  // namespace kiln::autotune
