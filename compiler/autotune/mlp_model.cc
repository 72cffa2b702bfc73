// The neural ranking cost model (mlp_model.h).
#include "compiler/autotune/mlp_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>

#include "base/error.h"

namespace kiln::autotune {
namespace {

static_assert(std::endian::native == std::endian::little, "the saved model is little-endian");

constexpr int H1 = kMlpHidden1;
constexpr int H2 = kMlpHidden2;
constexpr char kMagic[8] = {'k', 'i', 'l', 'n', '-', 'm', 'l', 'p'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxInputs = 1u << 20;  // far above any feature vector; bounds a file's sizes

/// Where each weight array starts in params_ for n inputs.
struct Layout {
  size_t w1, b1, w2, b2, w3, b3, total;
  explicit Layout(size_t n)
      : w1(0),
        b1(n * H1),
        w2(b1 + H1),
        b2(w2 + size_t{H1} * H2),
        w3(b2 + H2),
        b3(w3 + H2),
        total(b3 + 1) {}
};

/// SplitMix64: the model's only source of randomness, the same on every machine.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-a, a).
  float uniform(float a) { return (static_cast<float>(next() >> 40) * 0x1p-24f * 2.0f - 1.0f) * a; }
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[next() % i]);
  }

 private:
  uint64_t state_;
};

/// The network's forward pass for one standardized row `xs` (the used features, in used order):
/// fills the hidden activations (after ReLU) and returns the score.
float forward(const float* p, const Layout& l, const std::vector<int>& used, const float* xs,
              float* a1, float* a2) {
  float z1[H1];
  std::memcpy(z1, p + l.b1, sizeof z1);
  for (size_t u = 0; u < used.size(); ++u) {
    const float xv = xs[u];
    const float* w = p + l.w1 + static_cast<size_t>(used[u]) * H1;
    for (int j = 0; j < H1; ++j) z1[j] += xv * w[j];
  }
  for (int j = 0; j < H1; ++j) a1[j] = std::max(z1[j], 0.0f);
  float z2[H2];
  std::memcpy(z2, p + l.b2, sizeof z2);
  for (int j = 0; j < H1; ++j) {
    const float av = a1[j];
    const float* w = p + l.w2 + static_cast<size_t>(j) * H2;
    for (int k = 0; k < H2; ++k) z2[k] += av * w[k];
  }
  float s = p[l.b3];
  for (int k = 0; k < H2; ++k) {
    a2[k] = std::max(z2[k], 0.0f);
    s += a2[k] * p[l.w3 + k];
  }
  return s;
}

/// Adds the gradient of ds * score(row) to `g`, from the row's forward activations.
void backward(const float* p, const Layout& l, const std::vector<int>& used, const float* xs,
              const float* a1, const float* a2, float ds, float* g) {
  g[l.b3] += ds;
  float d2[H2];
  for (int k = 0; k < H2; ++k) {
    g[l.w3 + k] += ds * a2[k];
    d2[k] = a2[k] > 0 ? ds * p[l.w3 + k] : 0.0f;
    g[l.b2 + k] += d2[k];
  }
  float d1[H1];
  for (int j = 0; j < H1; ++j) {
    const float* w = p + l.w2 + static_cast<size_t>(j) * H2;
    float* gw = g + l.w2 + static_cast<size_t>(j) * H2;
    float back = 0;
    for (int k = 0; k < H2; ++k) {
      gw[k] += a1[j] * d2[k];
      back += w[k] * d2[k];
    }
    d1[j] = a1[j] > 0 ? back : 0.0f;
    g[l.b1 + j] += d1[j];
  }
  for (size_t u = 0; u < used.size(); ++u) {
    const float xv = xs[u];
    float* gw = g + l.w1 + static_cast<size_t>(used[u]) * H1;
    for (int j = 0; j < H1; ++j) gw[j] += xv * d1[j];
  }
}

/// Reads the saved model's parts in order, naming the one that is missing.
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  void read(void* out, size_t n, const char* what) {
    KILN_USER_CHECK(bytes_.size() - pos_ >= n) << "cost model load: the mlp model ends inside its "
                                               << what << " (" << bytes_.size() << " bytes)";
    std::memcpy(out, bytes_.data() + pos_, n);
    pos_ += n;
  }
  uint32_t u32(const char* what) {
    uint32_t v = 0;
    read(&v, sizeof v, what);
    return v;
  }
  /// `n` floats, each finite.
  std::vector<float> floats(size_t n, const char* what) {
    std::vector<float> v(n);
    read(v.data(), n * sizeof(float), what);
    for (size_t i = 0; i < n; ++i)
      KILN_USER_CHECK(std::isfinite(v[i]))
          << "cost model load: the mlp model's " << what << "[" << i << "] is not finite";
    return v;
  }
  size_t left() const { return bytes_.size() - pos_; }

 private:
  const std::string& bytes_;
  size_t pos_ = 0;
};

void append(std::string& out, const void* p, size_t n) {
  out.append(static_cast<const char*>(p), n);
}

}  // namespace

MlpModel::MlpModel(MlpModelOptions options) : options_(options) {
  KILN_USER_CHECK(options_.epochs > 0 && options_.adapt_epochs > 0 && options_.min_steps >= 0 &&
                  options_.batch >= 2 && options_.learning_rate > 0)
      << "cost model mlp: epochs must be positive, min_steps >= 0, batch >= 2 and the learning "
         "rate positive";
}

void MlpModel::find_used() {
  used_.clear();
  for (size_t i = 0; i < scale_.size(); ++i)
    if (scale_[i] != 0) used_.push_back(static_cast<int>(i));
}

std::vector<float> MlpModel::standardize(const std::vector<std::vector<float>>& x,
                                         const char* who) const {
  std::vector<float> xs;
  xs.reserve(x.size() * used_.size());
  for (size_t i = 0; i < x.size(); ++i) {
    KILN_USER_CHECK(x[i].size() == inputs_) << "cost model " << who << ": row " << i << " has "
                                            << x[i].size() << " features, expected " << inputs_;
    for (size_t f = 0; f < inputs_; ++f)
      KILN_USER_CHECK(std::isfinite(x[i][f]))
          << "cost model " << who << ": feature " << f << " of row " << i << " is not finite";
    for (int f : used_) xs.push_back((std::clamp(x[i][f], lo_[f], hi_[f]) - mean_[f]) * scale_[f]);
  }
  return xs;
}

void MlpModel::fit(const std::vector<std::vector<float>>& x, const std::vector<double>& throughput,
                   const std::vector<int>& group) {
  check_training_rows(x, throughput, group, "fit");
  const size_t n = x[0].size();
  KILN_USER_CHECK(n <= kMaxInputs)
      << "cost model fit: rows have " << n << " features, at most " << kMaxInputs;
  for (size_t i = 0; i < x.size(); ++i)
    KILN_USER_CHECK(x[i].size() == n)
        << "cost model fit: row " << i << " has " << x[i].size() << " features, expected " << n;
  // The standardization: each feature's range, mean and 1 / standard deviation over these rows.
  std::vector<double> sum(n, 0.0), sq(n, 0.0);
  std::vector<float> lo = x[0], hi = x[0];
  for (const auto& r : x) {
    for (size_t f = 0; f < n; ++f) {
      sum[f] += r[f];
      lo[f] = std::min(lo[f], r[f]);
      hi[f] = std::max(hi[f], r[f]);
    }
  }
  const double rows = static_cast<double>(x.size());
  for (const auto& r : x)
    for (size_t f = 0; f < n; ++f) sq[f] += (r[f] - sum[f] / rows) * (r[f] - sum[f] / rows);
  std::vector<float> mean(n), scale(n);
  for (size_t f = 0; f < n; ++f) {
    mean[f] = static_cast<float>(sum[f] / rows);
    const double sd = std::sqrt(sq[f] / rows);
    scale[f] = std::isfinite(sd) && sd > 1e-6 ? static_cast<float>(1.0 / sd) : 0.0f;
  }
  // A new model, which replaces this one only once trained (an error leaves this one as it was).
  MlpModel next(options_);
  next.inputs_ = n;
  next.mean_ = std::move(mean);
  next.scale_ = std::move(scale);
  next.lo_ = std::move(lo);
  next.hi_ = std::move(hi);
  next.find_used();

  // He-uniform initial weights (fan-in: the used features), zero biases.
  const Layout l(n);
  std::vector<float>& p = next.params_;
  p.assign(l.total, 0.0f);
  Rng rng(options_.seed);
  const float a1 = std::sqrt(6.0f / static_cast<float>(std::max<size_t>(next.used_.size(), 1)));
  for (int f : next.used_)
    for (int j = 0; j < H1; ++j) p[l.w1 + static_cast<size_t>(f) * H1 + j] = rng.uniform(a1);
  const float a2 = std::sqrt(6.0f / H1), a3 = std::sqrt(3.0f / H2);
  for (size_t i = 0; i < size_t{H1} * H2; ++i) p[l.w2 + i] = rng.uniform(a2);
  for (int k = 0; k < H2; ++k) p[l.w3 + k] = rng.uniform(a3);
  next.train(x, throughput, group, options_.epochs, rng.next(), "fit");
  *this = std::move(next);
}

void MlpModel::adapt(const std::vector<std::vector<float>>& x,
                     const std::vector<double>& throughput, const std::vector<int>& group) {
  if (!trained()) return fit(x, throughput, group);
  check_training_rows(x, throughput, group, "adapt");
  KILN_USER_CHECK(x[0].size() == inputs_)
      << "cost model adapt: rows have " << x[0].size() << " features, the model " << inputs_;
  MlpModel next = *this;
  next.train(x, throughput, group, options_.adapt_epochs, options_.seed ^ 0x5eed0fada9700000ull,
             "adapt");
  *this = std::move(next);
}

void MlpModel::train(const std::vector<std::vector<float>>& x,
                     const std::vector<double>& throughput, const std::vector<int>& group,
                     int epochs, uint64_t seed, const char* who) {
  const std::vector<float> xs = standardize(x, who);
  const size_t u = used_.size();
  // Each group's rows, and each row's throughput as a fraction of its group's range.
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < x.size(); ++i) groups[group.empty() ? 0 : group[i]].push_back(i);
  std::vector<float> rel(x.size(), 0.0f);
  std::vector<std::vector<size_t>> ranked;  // groups with something to rank
  size_t batches_per_epoch = 0;
  for (auto& [id, rows] : groups) {
    double lo = throughput[rows[0]], hi = lo;
    for (size_t i : rows) lo = std::min(lo, throughput[i]), hi = std::max(hi, throughput[i]);
    if (rows.size() < 2 || !(hi > lo)) continue;
    for (size_t i : rows) rel[i] = static_cast<float>((throughput[i] - lo) / (hi - lo));
    batches_per_epoch += std::max<size_t>(rows.size() / static_cast<size_t>(options_.batch), 1);
    ranked.push_back(std::move(rows));
  }
  if (ranked.empty()) return;  // every group alike: nothing to learn from these rows
  const size_t min_epochs =
      (static_cast<size_t>(options_.min_steps) + batches_per_epoch - 1) / batches_per_epoch;
  const size_t total_epochs = std::max(static_cast<size_t>(epochs), min_epochs);

  const Layout l(inputs_);
  std::vector<float> grad(l.total), m(l.total, 0.0f), v(l.total, 0.0f);
  const float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  double beta1_t = 1, beta2_t = 1;
  const size_t b = static_cast<size_t>(options_.batch);
  std::vector<float> a1(b * 2 * H1), a2(b * 2 * H2), s(b * 2), ds(b * 2);
  Rng rng(seed);
  std::vector<std::vector<size_t>> batches;
  for (size_t epoch = 0; epoch < total_epochs; ++epoch) {
    // Minibatches of about `batch` rows of one group (a remainder joins the last one), in a
    // random order.
    batches.clear();
    for (std::vector<size_t>& rows : ranked) {
      rng.shuffle(rows);
      const size_t count = std::max<size_t>(rows.size() / b, 1);
      for (size_t k = 0; k < count; ++k) {
        const size_t end = k + 1 == count ? rows.size() : (k + 1) * b;
        batches.emplace_back(rows.begin() + static_cast<ptrdiff_t>(k * b),
                             rows.begin() + static_cast<ptrdiff_t>(end));
      }
    }
    rng.shuffle(batches);
    for (const std::vector<size_t>& batch : batches) {
      const size_t n = batch.size();  // < 2 * b
      for (size_t r = 0; r < n; ++r)
        s[r] =
            forward(params_.data(), l, used_, xs.data() + batch[r] * u, &a1[r * H1], &a2[r * H2]);
      // RankNet: for each pair, the better row's score should exceed the worse's; the pair's
      // weight is their throughput difference (a fraction of the group's range).
      std::fill(ds.begin(), ds.begin() + static_cast<ptrdiff_t>(n), 0.0f);
      float weight = 0;
      for (size_t i = 0; i < n; ++i) {
        for (size_t j = i + 1; j < n; ++j) {
          const float d = rel[batch[i]] - rel[batch[j]];
          if (d == 0) continue;
          const size_t hi = d > 0 ? i : j, lo = d > 0 ? j : i;
          const float w = std::abs(d);
          const float g = w / (1.0f + std::exp(s[hi] - s[lo]));  // w * sigmoid(s_lo - s_hi)
          ds[hi] -= g;
          ds[lo] += g;
          weight += w;
        }
      }
      if (weight == 0) continue;
      std::fill(grad.begin(), grad.end(), 0.0f);
      for (size_t r = 0; r < n; ++r)
        if (ds[r] != 0)
          backward(params_.data(), l, used_, xs.data() + batch[r] * u, &a1[r * H1], &a2[r * H2],
                   ds[r] / weight, grad.data());
      // Adam.
      beta1_t *= beta1;
      beta2_t *= beta2;
      const float step =
          static_cast<float>(options_.learning_rate * std::sqrt(1 - beta2_t) / (1 - beta1_t));
      for (size_t i = 0; i < l.total; ++i) {
        m[i] = beta1 * m[i] + (1 - beta1) * grad[i];
        v[i] = beta2 * v[i] + (1 - beta2) * grad[i] * grad[i];
        params_[i] -= step * m[i] / (std::sqrt(v[i]) + eps);
      }
    }
  }
}

std::vector<float> MlpModel::predict(const std::vector<std::vector<float>>& x) const {
  KILN_USER_CHECK(trained()) << "cost model predict: the model is not trained (call fit or load "
                                "first)";
  const std::vector<float> xs = standardize(x, "predict");
  const Layout l(inputs_);
  std::vector<float> out(x.size());
  float a1[H1], a2[H2];
  for (size_t r = 0; r < x.size(); ++r)
    out[r] = forward(params_.data(), l, used_, xs.data() + r * used_.size(), a1, a2);
  return out;
}

std::string MlpModel::save() const {
  KILN_USER_CHECK(trained()) << "cost model save: the model is not trained";
  std::string out;
  append(out, kMagic, sizeof kMagic);
  const uint32_t header[4] = {kVersion, static_cast<uint32_t>(inputs_), H1, H2};
  append(out, header, sizeof header);
  append(out, mean_.data(), mean_.size() * sizeof(float));
  append(out, scale_.data(), scale_.size() * sizeof(float));
  append(out, lo_.data(), lo_.size() * sizeof(float));
  append(out, hi_.data(), hi_.size() * sizeof(float));
  append(out, params_.data(), params_.size() * sizeof(float));
  return out;
}

std::unique_ptr<CostModel> MlpModel::clone() const { return std::make_unique<MlpModel>(*this); }

MlpModel MlpModel::load(const std::string& bytes, MlpModelOptions options) {
  KILN_USER_CHECK(!bytes.empty()) << "cost model load: empty model";
  Reader in(bytes);
  char magic[sizeof kMagic];
  in.read(magic, sizeof magic, "magic");
  KILN_USER_CHECK(std::memcmp(magic, kMagic, sizeof kMagic) == 0)
      << "cost model load: not an mlp model (it does not start with 'kiln-mlp')";
  const uint32_t version = in.u32("version");
  KILN_USER_CHECK(version == kVersion) << "cost model load: mlp model format version " << version
                                       << ", this build reads version " << kVersion;
  const uint32_t n = in.u32("input count");
  KILN_USER_CHECK(n > 0 && n <= kMaxInputs)
      << "cost model load: the mlp model has " << n << " inputs (1 to " << kMaxInputs << ")";
  const uint32_t h1 = in.u32("hidden sizes"), h2 = in.u32("hidden sizes");
  KILN_USER_CHECK(h1 == H1 && h2 == H2) << "cost model load: the mlp model's hidden layers are "
                                        << h1 << "x" << h2 << ", this build's " << H1 << "x" << H2;
  const Layout l(n);
  const size_t expected = (4 * size_t{n} + l.total) * sizeof(float);
  KILN_USER_CHECK(in.left() == expected)
      << "cost model load: the mlp model of " << n << " inputs needs " << expected
      << " bytes of weights after its header, it has " << in.left();
  MlpModel m(options);
  m.mean_ = in.floats(n, "mean");
  m.scale_ = in.floats(n, "scale");
  for (size_t f = 0; f < n; ++f)
    KILN_USER_CHECK(m.scale_[f] >= 0)
        << "cost model load: the mlp model's scale[" << f << "] is negative";
  m.lo_ = in.floats(n, "lo");
  m.hi_ = in.floats(n, "hi");
  for (size_t f = 0; f < n; ++f)
    KILN_USER_CHECK(m.lo_[f] <= m.hi_[f]) << "cost model load: the mlp model's lo[" << f << "] ("
                                          << m.lo_[f] << ") is above its hi (" << m.hi_[f] << ")";
  m.params_ = in.floats(l.total, "weights");
  m.inputs_ = n;
  m.find_used();
  return m;
}

}  // namespace kiln::autotune
