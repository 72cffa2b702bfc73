// The XGBoost ranking cost model (xgb_model.h).
#include "compiler/autotune/xgb_model.h"

#include <xgboost/c_api.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "base/error.h"

namespace kiln::autotune {
namespace {

/// Raises kiln::Error with XGBoost's message when a C API call fails.
void check(int rc, const char* what) {
  if (rc != 0)
    throw Error(std::string("cost model: XGBoost ") + what + " failed: " + XGBGetLastError());
}

/// Owns a DMatrixHandle.
struct Matrix {
  DMatrixHandle h = nullptr;
  ~Matrix() {
    if (h) XGDMatrixFree(h);
  }
};

/// Row-major copy of `x` (rows in `order`), checking that every row has `cols` values.
std::vector<float> flatten(const std::vector<std::vector<float>>& x,
                           const std::vector<size_t>& order, size_t cols, const char* who) {
  std::vector<float> flat;
  flat.reserve(x.size() * cols);
  for (size_t i : order) {
    KILN_USER_CHECK(x[i].size() == cols) << "cost model " << who << ": row " << i << " has "
                                         << x[i].size() << " features, expected " << cols;
    flat.insert(flat.end(), x[i].begin(), x[i].end());
  }
  return flat;
}

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

}  // namespace

XgbModel::XgbModel(XgbModelOptions options) : options_(options) {}

XgbModel::~XgbModel() {
  if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
}

XgbModel::XgbModel(XgbModel&& o) noexcept
    : booster_(o.booster_), num_features_(o.num_features_), options_(o.options_) {
  o.booster_ = nullptr;
  o.num_features_ = 0;
}

XgbModel& XgbModel::operator=(XgbModel&& o) noexcept {
  if (this != &o) {
    if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
    booster_ = o.booster_;
    num_features_ = o.num_features_;
    options_ = o.options_;
    o.booster_ = nullptr;
    o.num_features_ = 0;
  }
  return *this;
}

void XgbModel::set_params(void* booster) const {
  auto h = static_cast<BoosterHandle>(booster);
  auto set = [&](const char* k, const std::string& v) {
    check(XGBoosterSetParam(h, k, v.c_str()), "SetParam");
  };
  set("objective", "rank:pairwise");
  set("tree_method", "hist");
  set("max_depth", std::to_string(options_.max_depth));
  set("eta", num(options_.eta));
  set("subsample", num(options_.subsample));
  set("min_child_weight", num(options_.min_child_weight));
  set("gamma", num(options_.gamma));
  set("lambda", num(options_.lambda));
  set("seed", std::to_string(options_.seed));
  set("nthread", std::to_string(options_.nthread));
  set("verbosity", "1");
}

void XgbModel::fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
                   const std::vector<int>& group) {
  boost(x, throughput, group, options_.rounds, /*from_scratch=*/true, "fit");
}

void XgbModel::adapt(const std::vector<std::vector<float>>& x,
                     const std::vector<double>& throughput, const std::vector<int>& group) {
  if (!booster_) return fit(x, throughput, group);
  KILN_USER_CHECK(!x.empty() && x[0].size() == num_features_)
      << "cost model adapt: rows have " << (x.empty() ? 0 : x[0].size()) << " features, the model "
      << num_features_;
  boost(x, throughput, group, options_.adapt_rounds, /*from_scratch=*/false, "adapt");
}

void XgbModel::boost(const std::vector<std::vector<float>>& x,
                     const std::vector<double>& throughput, const std::vector<int>& group,
                     int rounds, bool from_scratch, const char* who) {
  check_training_rows(x, throughput, group, who);
  KILN_USER_CHECK(rounds > 0) << "cost model " << who << ": rounds must be positive";
  const size_t cols = x[0].size();

  // XGBoost wants each group's rows together: order the rows by group id (stably).
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  if (!group.empty())
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return group[a] < group[b]; });
  std::vector<float> flat = flatten(x, order, cols, who);
  std::vector<float> labels;
  std::vector<unsigned> sizes;
  labels.reserve(x.size());
  for (size_t k = 0; k < order.size(); ++k) {
    labels.push_back(static_cast<float>(throughput[order[k]]));
    if (k == 0 || (!group.empty() && group[order[k]] != group[order[k - 1]])) sizes.push_back(0);
    ++sizes.back();
  }

  Matrix d;
  check(XGDMatrixCreateFromMat(flat.data(), x.size(), cols, std::numeric_limits<float>::quiet_NaN(),
                               &d.h),
        "DMatrixCreateFromMat");
  check(XGDMatrixSetFloatInfo(d.h, "label", labels.data(), labels.size()),
        "DMatrixSetFloatInfo(label)");
  check(XGDMatrixSetUIntInfo(d.h, "group", sizes.data(), sizes.size()),
        "DMatrixSetUIntInfo(group)");

  // Continuation: a booster over the new rows that starts from the current model's trees. Either
  // way the new booster replaces the current one only once trained.
  const std::string start = booster_ && !from_scratch ? save() : std::string();
  BoosterHandle h = nullptr;
  check(XGBoosterCreate(&d.h, 1, &h), "BoosterCreate");
  int first_round = 0;
  try {
    if (!start.empty()) {
      check(XGBoosterLoadModelFromBuffer(h, start.data(), start.size()),
            "BoosterLoadModelFromBuffer");
      check(XGBoosterBoostedRounds(h, &first_round), "BoosterBoostedRounds");
    }
    set_params(h);
    for (int i = 0; i < rounds; ++i)
      check(XGBoosterUpdateOneIter(h, first_round + i, d.h), "BoosterUpdateOneIter");
  } catch (...) {
    XGBoosterFree(h);
    throw;
  }
  if (booster_) XGBoosterFree(static_cast<BoosterHandle>(booster_));
  booster_ = h;
  num_features_ = cols;
}

std::vector<float> XgbModel::predict(const std::vector<std::vector<float>>& x) const {
  KILN_USER_CHECK(booster_ != nullptr)
      << "cost model predict: the model is not trained (call fit or load first)";
  if (x.empty()) return {};
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<float> flat = flatten(x, order, num_features_, "predict");
  Matrix d;
  check(XGDMatrixCreateFromMat(flat.data(), x.size(), num_features_,
                               std::numeric_limits<float>::quiet_NaN(), &d.h),
        "DMatrixCreateFromMat");
  bst_ulong len = 0;
  const float* out = nullptr;
  check(XGBoosterPredict(static_cast<BoosterHandle>(booster_), d.h, 0, 0, 0, &len, &out),
        "BoosterPredict");
  KILN_USER_CHECK(len == x.size())
      << "cost model predict: XGBoost returned " << len << " scores for " << x.size() << " rows";
  return std::vector<float>(out, out + len);
}

std::string XgbModel::save() const {
  KILN_USER_CHECK(booster_ != nullptr) << "cost model save: the model is not trained";
  bst_ulong len = 0;
  const char* data = nullptr;
  check(XGBoosterSaveModelToBuffer(static_cast<BoosterHandle>(booster_), R"({"format": "ubj"})",
                                   &len, &data),
        "BoosterSaveModelToBuffer");
  return std::string(data, len);
}

std::unique_ptr<CostModel> XgbModel::clone() const {
  auto copy = std::make_unique<XgbModel>(options_);
  if (booster_) *copy = load(save(), options_);
  return copy;
}

XgbModel XgbModel::load(const std::string& bytes, XgbModelOptions options) {
  KILN_USER_CHECK(!bytes.empty()) << "cost model load: empty model";
  XgbModel m(options);
  BoosterHandle h = nullptr;
  check(XGBoosterCreate(nullptr, 0, &h), "BoosterCreate");
  m.booster_ = h;
  check(XGBoosterLoadModelFromBuffer(h, bytes.data(), bytes.size()), "BoosterLoadModelFromBuffer");
  check(XGBoosterSetParam(h, "nthread", std::to_string(options.nthread).c_str()), "SetParam");
  bst_ulong nf = 0;
  check(XGBoosterGetNumFeature(h, &nf), "BoosterGetNumFeature");
  KILN_USER_CHECK(nf > 0) << "cost model load: the model has no features";
  m.num_features_ = nf;
  return m;
}

}  // namespace kiln::autotune
