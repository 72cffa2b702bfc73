// quantize_onnx: the ModelProto is edited in place (batch norms folded), calibrated through Kiln's
// own build of it, then rewritten node by node with the QDQ pairs and quantized weights.
#include "compiler/graph/onnx_quantize.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "base/error.h"
#include "compiler/graph/graph_build.h"
#include "compiler/graph/onnx_detail.h"
#include "compiler/graph/onnx_frontend.h"
#include "deploy/runtime/dtype.h"
#include "deploy/runtime/graph_executor.h"
#include "deploy/runtime/npy.h"

namespace kiln::graph {
namespace {

using onnx::ModelProto;
using onnx::NodeProto;
using onnx::TensorProto;
using runtime::NDArray;

/// The initializers of a graph by name.
std::map<std::string, TensorProto*> initializers(onnx::GraphProto* g) {
  std::map<std::string, TensorProto*> out;
  for (TensorProto& t : *g->mutable_initializer()) out[t.name()] = &t;
  return out;
}

std::vector<float> floats_of(const TensorProto& t, const std::string& origin) {
  const NDArray a =
      onnx_detail::tensor_to_ndarray(t, "'" + origin + "': initializer '" + t.name() + "'");
  KILN_USER_CHECK(runtime::dtype_equal(a.dtype(), runtime::kFloat32))
      << "'" << origin << "': initializer '" << t.name() << "' is "
      << runtime::dtype_to_string(a.dtype()) << "; only float32 models are quantized";
  return a.to_vector<float>();
}

void set_floats(TensorProto* t, const std::vector<float>& v, const std::vector<int64_t>& shape) {
  *t = onnx_detail::to_tensor_proto(t->name(), NDArray::from_vector(v, shape));
}

std::vector<int64_t> dims(const TensorProto& t) { return {t.dims().begin(), t.dims().end()}; }

float attr_f(const NodeProto& n, const std::string& name, float dflt) {
  for (const auto& a : n.attribute()) {
    if (a.name() == name) return a.f();
  }
  return dflt;
}

/// Readers of each tensor: node indices (a node reading a tensor twice counts once).
std::map<std::string, std::vector<int>> readers(const onnx::GraphProto& g) {
  std::map<std::string, std::vector<int>> out;
  for (int i = 0; i < g.node_size(); ++i) {
    std::set<std::string> seen;
    for (const std::string& in : g.node(i).input()) {
      if (!in.empty() && seen.insert(in).second) out[in].push_back(i);
    }
  }
  return out;
}

bool is_graph_output(const onnx::GraphProto& g, const std::string& name) {
  for (const auto& o : g.output()) {
    if (o.name() == name) return true;
  }
  return false;
}

/// Folds each BatchNormalization whose input is a Conv's output read by it alone, all parameters
/// initializers, into the conv's weight and bias. Returns how many.
size_t fold_batch_norms(ModelProto* model, const std::string& origin) {
  onnx::GraphProto* g = model->mutable_graph();
  auto inits = initializers(g);
  const auto rd = readers(*g);
  std::map<std::string, int> producer;
  for (int i = 0; i < g->node_size(); ++i) {
    for (const std::string& o : g->node(i).output()) producer[o] = i;
  }
  std::set<int> removed;
  for (int i = 0; i < g->node_size(); ++i) {
    const NodeProto& bn = g->node(i);
    if (bn.op_type() != "BatchNormalization" || bn.input_size() != 5 || bn.output_size() < 1) {
      continue;
    }
    auto p = producer.find(bn.input(0));
    if (p == producer.end()) continue;
    NodeProto* conv = g->mutable_node(p->second);
    if (conv->op_type() != "Conv" || conv->input_size() < 2 || rd.at(bn.input(0)).size() != 1 ||
        is_graph_output(*g, bn.input(0))) {
      continue;
    }
    bool constant = inits.count(conv->input(1)) && rd.at(conv->input(1)).size() == 1;
    for (int k = 1; k < 5; ++k) constant = constant && inits.count(bn.input(k));
    const bool has_bias = conv->input_size() > 2 && !conv->input(2).empty();
    if (has_bias)
      constant = constant && inits.count(conv->input(2)) && rd.at(conv->input(2)).size() == 1;
    if (!constant) continue;
    TensorProto* w = inits.at(conv->input(1));
    const std::vector<int64_t> wshape = dims(*w);
    std::vector<float> wv = floats_of(*w, origin);
    const std::vector<float> gamma = floats_of(*inits.at(bn.input(1)), origin),
                             beta = floats_of(*inits.at(bn.input(2)), origin),
                             mean = floats_of(*inits.at(bn.input(3)), origin),
                             var = floats_of(*inits.at(bn.input(4)), origin);
    const size_t oc = static_cast<size_t>(wshape.at(0));
    if (gamma.size() != oc) continue;
    std::vector<float> b =
        has_bias ? floats_of(*inits.at(conv->input(2)), origin) : std::vector<float>(oc, 0.0f);
    const double eps = attr_f(bn, "epsilon", 1e-5f);
    const size_t per = wv.size() / oc;
    for (size_t o = 0; o < oc; ++o) {
      const double k = gamma[o] / std::sqrt(double(var[o]) + eps);
      for (size_t j = 0; j < per; ++j) wv[o * per + j] = static_cast<float>(wv[o * per + j] * k);
      b[o] = static_cast<float>((b[o] - mean[o]) * k + beta[o]);
    }
    set_floats(w, wv, wshape);
    if (has_bias) {
      set_floats(inits.at(conv->input(2)), b, {static_cast<int64_t>(oc)});
    } else {
      TensorProto* bt = g->add_initializer();
      bt->set_name(conv->output(0) + "_folded_bias");
      set_floats(bt, b, {static_cast<int64_t>(oc)});
      inits = initializers(g);  // add_initializer may move the others
      while (conv->input_size() < 3) conv->add_input("");
      conv->set_input(2, bt->name());
    }
    conv->set_output(0, bn.output(0));
    removed.insert(i);
  }
  if (removed.empty()) return 0;
  google::protobuf::RepeatedPtrField<NodeProto> kept;
  for (int i = 0; i < g->node_size(); ++i) {
    if (!removed.count(i)) *kept.Add() = g->node(i);
  }
  g->mutable_node()->Swap(&kept);
  return removed.size();
}

/// The largest e such that maxabs * 2^e <= 127 (scale 2^-e); 0 for an all-zero tensor.
int scale_exponent(double maxabs) {
  if (!(maxabs > 0.0)) return 0;
  int e = static_cast<int>(std::floor(std::log2(127.0 / maxabs)));
  while (maxabs * std::ldexp(1.0, e) > 127.0) --e;  // log2's rounding, at the boundary
  while (maxabs * std::ldexp(1.0, e + 1) <= 127.0) ++e;
  return e;
}

/// One convolution to quantize: its tensors and whether a Relu follows.
struct QConvSite {
  int node = 0;
  std::string x, y;  ///< the input, and the quantized output (the Relu's when it follows)
  bool relu = false;
};

/// The calibration samples: each file checked against its input.
std::vector<std::map<std::string, NDArray>> load_samples(const QuantizeOptions& o, const Graph& g) {
  std::vector<ValueId> inputs;
  for (ValueId v : g.inputs()) {
    if (!g.input_default(v)) inputs.push_back(v);
  }
  KILN_USER_CHECK(!o.calibration.empty())
      << "quantizing '" << o.model << "' needs calibration data: give --calibrate X.npy (one "
      << "array per input of the model, " << inputs.size() << " here) at least once";
  KILN_USER_CHECK(!inputs.empty()) << "'" << o.model << "' has no input to calibrate";
  KILN_USER_CHECK(o.calibration.size() % inputs.size() == 0)
      << "'" << o.model << "' has " << inputs.size() << " inputs, so calibration files come in "
      << "groups of " << inputs.size() << " (one per input, in order); got "
      << o.calibration.size();
  std::vector<std::map<std::string, NDArray>> samples;
  for (size_t f = 0; f < o.calibration.size(); ++f) {
    const Value& in = g.value(inputs[f % inputs.size()]);
    const std::string& file = o.calibration[f];
    NDArray a = runtime::load_npy(file);
    KILN_USER_CHECK(runtime::dtype_equal(a.dtype(), in.dtype) && a.shape() == in.shape)
        << "calibration file '" << file << "' holds "
        << Value{"", a.dtype(), a.shape(), true, nullptr}.type_string() << ", but input '"
        << in.name << "' of '" << o.model << "' is " << in.type_string();
    if (f % inputs.size() == 0) samples.emplace_back();
    samples.back().emplace(in.name, std::move(a));
  }
  return samples;
}

/// The range a tensor took over the calibration samples.
struct Range {
  double lo = 0.0, hi = 0.0;  ///< always holding 0, as an asymmetric zero point needs
  void add(const NDArray& a) {
    const float* p = a.data<float>();
    for (int64_t i = 0; i < a.num_elements(); ++i) {
      lo = std::min(lo, double(p[i]));
      hi = std::max(hi, double(p[i]));
    }
  }
  double max_abs() const { return std::max(-lo, hi); }
};

/// An activation's float scale and uint8 zero point from its range, as ONNX Runtime's
/// quantize_static computes them (MinMax, asymmetric): s = (hi - lo) / 255, z = round(-lo / s).
std::pair<float, uint8_t> asymmetric_uint8(const Range& r) {
  if (!(r.hi > r.lo)) return {1.0f, 0};
  const auto s = static_cast<float>((r.hi - r.lo) / 255.0);
  const double z = std::nearbyint(-r.lo / double(s));
  return {s, static_cast<uint8_t>(std::clamp(z, 0.0, 255.0))};
}

}  // namespace

std::string quantize_onnx(const QuantizeOptions& o, QuantizeReport* report) {
  QuantizeReport local;
  QuantizeReport& rep = report != nullptr ? *report : local;
  rep = QuantizeReport{};
  auto say = [&](const std::string& s) {
    if (o.progress) o.progress(s);
  };
  ModelProto model;
  {
    std::ifstream in(o.model, std::ios::binary);
    KILN_USER_CHECK(in.good()) << "cannot open ONNX model '" << o.model << "'";
    std::ostringstream ss;
    ss << in.rdbuf();
    KILN_USER_CHECK(model.ParseFromString(ss.str()))
        << "cannot parse ONNX model '" << o.model << "': not a valid ModelProto";
  }
  int64_t opset = 0;
  for (const auto& os : model.opset_import()) {
    if (os.domain().empty() || os.domain() == "ai.onnx") opset = os.version();
  }
  KILN_USER_CHECK(opset >= 13) << "'" << o.model << "' is at opset " << opset
                               << "; quantizing needs opset 13 or later (per-axis scales)";

  say("folding batch norms");
  rep.batch_norms_folded = fold_batch_norms(&model, o.model);
  onnx::GraphProto* g = model.mutable_graph();

  // The convolutions to quantize and the tensors that get a QDQ pair.
  auto inits = initializers(g);
  const auto rd = readers(*g);
  std::vector<QConvSite> sites;
  std::vector<std::string> tensors;  // in order of first use
  auto want = [&](const std::string& t) {
    if (std::find(tensors.begin(), tensors.end(), t) == tensors.end()) tensors.push_back(t);
  };
  for (int i = 0; i < g->node_size(); ++i) {
    const NodeProto& n = g->node(i);
    if (n.op_type() != "Conv") continue;
    const std::string where = "node '" + n.name() + "' (Conv)";
    auto w = inits.find(n.input(1));
    if (w == inits.end() || dims(*w->second).size() != 4) {
      rep.notes.push_back(where + " stays float: its weight is not a 4-D initializer");
      continue;
    }
    const bool bias = n.input_size() > 2 && !n.input(2).empty();
    if (bias && !inits.count(n.input(2))) {
      rep.notes.push_back(where + " stays float: its bias is not an initializer");
      continue;
    }
    if (inits.count(n.input(0))) {
      rep.notes.push_back(where + " stays float: its input is an initializer");
      continue;
    }
    QConvSite s{i, n.input(0), n.output(0), false};
    auto r = rd.find(s.y);
    if (r != rd.end() && r->second.size() == 1 && !is_graph_output(*g, s.y) &&
        g->node(r->second[0]).op_type() == "Relu") {
      s.relu = true;
      s.y = g->node(r->second[0]).output(0);
    }
    want(s.x);
    want(s.y);
    sites.push_back(s);
  }

  // Calibration: Kiln's build of the (folded) model with every such tensor an output.
  std::string folded;
  KILN_ICHECK(model.SerializeToString(&folded)) << "cannot serialize the folded model";
  OnnxImportOptions import;
  import.input_shapes = o.input_shapes;
  Graph fg = import_onnx_bytes(folded, o.model, import);
  const std::vector<std::map<std::string, NDArray>> samples = load_samples(o, fg);
  std::map<std::string, Range> range;
  std::vector<std::string> computed;  // the tensors calibration reads from outputs
  for (const std::string& t : tensors) {
    const ValueId v = fg.find_value(t);
    bool is_input = false;
    for (ValueId in : fg.inputs()) is_input = is_input || in == v;
    range[t] = Range{};
    if (is_input) continue;
    KILN_USER_CHECK(v != kNoValue && fg.producer(v) >= 0)
        << "'" << o.model << "': tensor '" << t << "' is not computed by a node Kiln keeps; "
        << "cannot calibrate it";
    if (!fg.is_output(v)) fg.add_output(v);
    computed.push_back(t);
  }
  say("compiling the model for calibration (" + std::to_string(computed.size()) +
      " tensors observed)");
  runtime::GraphExecutor ex =
      runtime::GraphExecutor::from_bundle(build_graph(fg, o.target), o.model + " (calibration)");
  for (size_t k = 0; k < samples.size(); ++k) {
    say("calibrating on sample " + std::to_string(k + 1) + "/" + std::to_string(samples.size()));
    for (const auto& [name, a] : samples[k]) {
      ex.set_input(name, a);
      if (range.count(name)) range[name].add(a);
    }
    ex.run();
    for (size_t i = 0; i < ex.num_outputs(); ++i) {
      auto it = range.find(ex.output_name(i));
      if (it != range.end()) it->second.add(ex.output(i));
    }
  }
  rep.samples = samples.size();

  // Scales: activations from calibration, weights per channel; with power-of-two scales, output
  // scales raised to bound every shift (in node order, so a tensor's scale is final before a
  // later conv reads it).
  const bool pow2 = o.scales == QuantizeScales::kPowerOfTwo;
  std::map<std::string, int> e;  // tensor -> e, its scale 2^-e
  for (const std::string& t : tensors) e[t] = scale_exponent(range.at(t).max_abs());
  std::map<int, std::vector<int>> f;  // conv node -> per-channel weight exponents
  for (const QConvSite& s : sites) {
    if (!pow2) break;
    const NodeProto& n = g->node(s.node);
    const TensorProto& w = *inits.at(n.input(1));
    const std::vector<float> wv = floats_of(w, o.model);
    const size_t oc = static_cast<size_t>(w.dims(0)), per = wv.size() / oc;
    std::vector<int> fs(oc);
    for (size_t c = 0; c < oc; ++c) {
      double m = 0.0;
      for (size_t j = 0; j < per; ++j) m = std::max(m, std::fabs(double(wv[c * per + j])));
      fs[c] = scale_exponent(m);
    }
    const int lowest = *std::min_element(fs.begin(), fs.end());
    if (e[s.y] > e[s.x] + lowest) {  // a negative shift: the output scale is raised
      rep.notes.push_back("node '" + n.name() + "' (Conv): output scale raised from 2^-" +
                          std::to_string(e[s.y]) + " to 2^-" + std::to_string(e[s.x] + lowest) +
                          " (shift >= 0)");
      e[s.y] = e[s.x] + lowest;
    }
    for (int& fc : fs) fc = std::min(fc, e[s.y] + 31 - e[s.x]);  // shift <= 31
    f[s.node] = fs;
  }

  // The rewritten graph: quantized weights and biases, and a QDQ pair after each tensor's producer.
  say("writing the QDQ model");
  std::vector<TensorProto> new_inits;
  auto add_init = [&](const std::string& name, const NDArray& a) {
    new_inits.push_back(onnx_detail::to_tensor_proto(name, a));
    return name;
  };
  auto node = [](const std::string& op, std::vector<std::string> in, const std::string& out,
                 const std::string& name) {
    NodeProto n;
    n.set_op_type(op);
    n.set_name(name);
    for (const std::string& s : in) n.add_input(s);
    n.add_output(out);
    return n;
  };
  std::map<std::string, std::string> dq_of;  // tensor -> its DequantizeLinear's output
  std::map<std::string, float> scale_of;     // tensor -> its activation scale
  auto qdq = [&](const std::string& t) {
    std::vector<NodeProto> out;
    std::string z;
    float scale = 0.0f;
    if (pow2) {
      scale = static_cast<float>(std::ldexp(1.0, -e.at(t)));
      z = add_init(t + "_zero_point", NDArray::from_vector(std::vector<int8_t>{0}, {}));
    } else {
      uint8_t zp = 0;
      std::tie(scale, zp) = asymmetric_uint8(range.at(t));
      z = add_init(t + "_zero_point", NDArray::from_vector(std::vector<uint8_t>{zp}, {}));
    }
    scale_of[t] = scale;
    const std::string s =
        add_init(t + "_scale", NDArray::from_vector(std::vector<float>{scale}, {}));
    out.push_back(node("QuantizeLinear", {t, s, z}, t + "_quantized", t + "_QuantizeLinear"));
    out.push_back(node("DequantizeLinear", {t + "_quantized", s, z}, t + "_dequantized",
                       t + "_DequantizeLinear"));
    dq_of[t] = t + "_dequantized";
    return out;
  };
  std::set<std::string> quantized(tensors.begin(), tensors.end());
  google::protobuf::RepeatedPtrField<NodeProto> nodes;
  for (const auto& in : g->input()) {
    if (quantized.count(in.name())) {
      for (NodeProto& n : qdq(in.name())) *nodes.Add() = std::move(n);
    }
  }
  std::map<int, const QConvSite*> site_of;
  for (const QConvSite& s : sites) site_of[s.node] = &s;
  for (int i = 0; i < g->node_size(); ++i) {
    NodeProto n = g->node(i);
    for (int k = 0; k < n.input_size(); ++k) {
      auto it = dq_of.find(n.input(k));
      if (it != dq_of.end()) n.set_input(k, it->second);
    }
    if (auto it = site_of.find(i); it != site_of.end()) {
      const QConvSite& s = *it->second;
      const TensorProto& w = *inits.at(g->node(i).input(1));
      const std::vector<float> wv = floats_of(w, o.model);
      const size_t oc = static_cast<size_t>(w.dims(0)), per = wv.size() / oc;
      std::vector<int8_t> wq(wv.size());
      std::vector<float> ws(oc), bs(oc);
      for (size_t c = 0; c < oc; ++c) {
        if (pow2) {
          ws[c] = static_cast<float>(std::ldexp(1.0, -f.at(i)[c]));
          bs[c] = static_cast<float>(std::ldexp(1.0, -(f.at(i)[c] + e.at(s.x))));
        } else {  // symmetric: max |w| of the channel maps to 127
          double m = 0.0;
          for (size_t j = 0; j < per; ++j) m = std::max(m, std::fabs(double(wv[c * per + j])));
          ws[c] = m > 0.0 ? static_cast<float>(m / 127.0) : 1.0f;
          bs[c] = scale_of.at(s.x) * ws[c];
        }
        for (size_t j = 0; j < per; ++j) {
          const double q = std::nearbyint(double(wv[c * per + j]) / double(ws[c]));
          wq[c * per + j] = static_cast<int8_t>(std::clamp(q, -127.0, 127.0));
        }
      }
      const std::string wn = g->node(i).input(1);
      const std::string wqn = add_init(wn + "_quantized", NDArray::from_vector(wq, dims(w)));
      const std::string wsn =
          add_init(wn + "_scale", NDArray::from_vector(ws, {static_cast<int64_t>(oc)}));
      const std::string wzn =
          add_init(wn + "_zero_point",
                   NDArray::from_vector(std::vector<int8_t>(oc, 0), {static_cast<int64_t>(oc)}));
      NodeProto dw =
          node("DequantizeLinear", {wqn, wsn, wzn}, wn + "_dequantized", wn + "_DequantizeLinear");
      auto* axis = dw.add_attribute();
      axis->set_name("axis");
      axis->set_type(onnx::AttributeProto::INT);
      axis->set_i(0);
      *nodes.Add() = dw;
      n.set_input(1, dw.output(0));
      if (n.input_size() > 2 && !n.input(2).empty()) {
        const std::string bn = n.input(2);
        const std::vector<float> bv = floats_of(*inits.at(bn), o.model);
        std::vector<int32_t> bq(oc);
        for (size_t c = 0; c < oc; ++c) {
          const double q = std::nearbyint(double(bv[c]) / double(bs[c]));
          bq[c] = static_cast<int32_t>(std::clamp(q, -2147483648.0, 2147483647.0));
        }
        const std::string bqn =
            add_init(bn + "_quantized", NDArray::from_vector(bq, {static_cast<int64_t>(oc)}));
        const std::string bsn =
            add_init(bn + "_scale", NDArray::from_vector(bs, {static_cast<int64_t>(oc)}));
        NodeProto db =
            node("DequantizeLinear", {bqn, bsn}, bn + "_dequantized", bn + "_DequantizeLinear");
        auto* bax = db.add_attribute();
        bax->set_name("axis");
        bax->set_type(onnx::AttributeProto::INT);
        bax->set_i(0);
        *nodes.Add() = db;
        n.set_input(2, db.output(0));
      }
      ++rep.convolutions_quantized;
    }
    *nodes.Add() = n;
    for (const std::string& out : n.output()) {
      if (quantized.count(out)) {
        for (NodeProto& q : qdq(out)) *nodes.Add() = std::move(q);
      }
    }
  }
  g->mutable_node()->Swap(&nodes);
  // Initializers no node reads any more (float weights and biases, folded batch norms' parameters)
  // go, unless they are graph inputs; the new ones come in.
  const auto still_read = readers(*g);
  std::set<std::string> graph_inputs;
  for (const auto& in : g->input()) graph_inputs.insert(in.name());
  google::protobuf::RepeatedPtrField<TensorProto> kept;
  for (TensorProto& t : *g->mutable_initializer()) {
    if (still_read.count(t.name()) || graph_inputs.count(t.name())) *kept.Add() = std::move(t);
  }
  for (TensorProto& t : new_inits) *kept.Add() = std::move(t);
  g->mutable_initializer()->Swap(&kept);
  rep.tensors_quantized = tensors.size();
  std::string bytes;
  KILN_ICHECK(model.SerializeToString(&bytes)) << "cannot serialize the quantized model";
  return bytes;
}

}  // namespace kiln::graph
