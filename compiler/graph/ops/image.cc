// Resize (nearest, linear, cubic, from constant scales or sizes), the opset-9 Upsample, read as
// the Resize it became, and GridSample (an optical-flow network's warping and correlation lookup).
#include "compiler/graph/ops/import_ctx.h"
#include "compiler/graph/ops/lowering.h"
#include "compiler/graph/ops/node_check.h"
#include "compiler/graph/ops/registry.h"
#include "compiler/topi/transform.h"

namespace kiln::graph::ops {
namespace {

using namespace onnx_detail;  // NOLINT(google-build-using-namespace)

using te::Tensor;

LowerResult lower_resize(const LowerCtx& c) {
  const Node& n = c.node;
  topi::ResizeMethod method;
  method.mode = n.s("mode");
  method.coord = n.s("coordinate_transformation_mode");
  method.nearest_mode = n.s("nearest_mode");
  method.cubic_a = static_cast<float>(n.f("cubic_coeff_a"));
  method.exclude_outside = n.i("exclude_outside") != 0;
  Tensor y = topi::resize(c.input(0), c.out_value().shape, n.floats("scales"), method, "resize");
  return {{y}, [=](te::Schedule& s, const Tensor& output) {
            topi::schedule_resize_x86(s, y);
            if (y != output) s[y].compute_inline();
            injective(s, output);
          }};
}

/// GridSample (opset 16) of x [N, C, H, W] at grid [N, HO, WO, 2] (x then y, in [-1, 1]):
///   ix = (gx + 1) / 2 * (W - 1)          align_corners = 1 (the corners' centres at -1 and 1)
///   ix = ((gx + 1) * W - 1) / 2          align_corners = 0 (the corners' edges at -1 and 1)
/// then bilinear over the four neighbours, or the nearest (halves to even); a neighbour outside
/// the image reads 0 (padding_mode zeros), or the coordinate is first clamped into it (border).
LowerResult lower_grid_sample(const LowerCtx& c) {
  const Node& n = c.node;
  const Tensor x = c.input(0), grid = c.input(1);
  const std::vector<int64_t> xs = c.in_shape(0);
  const int64_t h = xs[2], w = xs[3];
  const bool align = n.i("align_corners") != 0, nearest = n.s("mode") == "nearest";
  const bool border = n.s("padding_mode") == "border";
  const ir::DataType t = x->dtype();
  auto k = [t](double v) { return ir::make_const(t, v); };
  std::vector<ir::Expr> shape;
  for (int64_t d : c.out_value().shape) shape.push_back(ir::Expr(d));
  Tensor y = te::compute(
      shape,
      [&](const std::vector<ir::Var>& i) {
        auto coord = [&](int axis, int64_t size) {
          ir::Expr g = grid({i[0], i[2], i[3], ir::Expr(axis)});
          ir::Expr v = align ? (g + k(1.0)) * k(0.5 * double(size - 1))
                             : ((g + k(1.0)) * k(double(size)) - k(1.0)) * k(0.5);
          return border ? ir::min(ir::max(v, k(0.0)), k(double(size - 1))) : v;
        };
        const ir::Expr ix = coord(0, w), iy = coord(1, h);
        auto tap = [&](ir::Expr yi, ir::Expr xi) {
          const ir::Expr inside = yi >= 0 && yi < ir::Expr(h) && xi >= 0 && xi < ir::Expr(w);
          const ir::Expr yc = ir::min(ir::max(yi, 0), ir::Expr(h - 1));
          const ir::Expr xc = ir::min(ir::max(xi, 0), ir::Expr(w - 1));
          return ir::select(inside, x({i[0], i[1], yc, xc}), ir::make_zero(t));
        };
        auto to_int = [](ir::Expr v) { return ir::cast(ir::kInt32, v); };
        if (nearest) {
          auto round = [t](ir::Expr v) {
            return ir::call(t, "roundeven", {v}, ir::CallKind::kPureIntrinsic);
          };
          return tap(to_int(round(iy)), to_int(round(ix)));
        }
        const ir::Expr x0 = ir::floor(ix), y0 = ir::floor(iy);
        const ir::Expr wx = ix - x0, wy = iy - y0;
        const ir::Expr xi = to_int(x0), yi = to_int(y0);
        return (tap(yi, xi) * (k(1.0) - wx) + tap(yi, xi + 1) * wx) * (k(1.0) - wy) +
               (tap(yi + 1, xi) * (k(1.0) - wx) + tap(yi + 1, xi + 1) * wx) * wy;
      },
      "grid_sample");
  return injective_result(y);
}

void check_grid_sample(const NodeCheck& nc) {
  const std::vector<int64_t>& x = nc.shape(0);
  const std::vector<int64_t>& g = nc.shape(1);
  if (x.size() != 4) {
    nc.fail(nc.input_shaped(0) + " has rank " + str(nc.rank(0)) +
            "; Kiln's GridSample takes N x C x H x W");
  }
  if (g.size() != 4 || g[3] != 2 || g[0] != x[0]) {
    nc.fail(nc.input_shaped(1) + " must be N x H_out x W_out x 2 with N = " + str(x[0]) +
            " (that of " + nc.input(0) + ")");
  }
}

Attrs import_grid_sample(ImportCtx& c) {
  Attrs a;
  const std::string mode = c.attr_s("mode", "bilinear");
  const std::string padding = c.attr_s("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest") {
    c.fail("attribute 'mode' is '" + mode + "', which Kiln does not support (bilinear, nearest)");
  }
  if (padding != "zeros" && padding != "border") {
    c.fail("attribute 'padding_mode' is '" + padding +
           "', which Kiln does not support (zeros, border)");
  }
  a["mode"] = mode;
  a["padding_mode"] = padding;
  a["align_corners"] = c.attr_i("align_corners", 0);
  return a;
}

/// Linear mode reads 2 neighbours along each resized axis, cubic 4; nearest one place.
int64_t resize_reads(const Graph& g, const Node& n) {
  const std::string mode = n.s("mode");
  if (mode == "nearest") return 1;
  const std::vector<int64_t>& in = g.value(n.inputs.at(0)).shape;
  const std::vector<int64_t>& out = g.value(n.outputs.at(0)).shape;
  const std::vector<float>& scales = n.floats("scales");
  int64_t reads = 1;
  for (size_t d = 0; d < in.size() && d < out.size() && d < scales.size(); ++d) {
    if (in[d] != out[d] || scales[d] != 1.0f) reads *= mode == "cubic" ? 4 : 2;
  }
  return reads;
}

// --- validation (beyond the schema checks every node gets) ---------------------------------

/// Resize: the modes Kiln does (nearest, linear, cubic; not tf_crop_and_resize, not
/// antialias), exactly one of scales and sizes, a constant, one value per resized axis,
/// positive.
void check_resize(const NodeCheck& nc) {
  const std::string mode = nc.attr_s("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic") {
    nc.fail("attribute 'mode' is '" + mode + "'; it must be nearest, linear or cubic");
  }
  const std::string coord = nc.attr_s("coordinate_transformation_mode", "half_pixel");
  if (coord == "tf_crop_and_resize") {
    nc.fail(
        "attribute 'coordinate_transformation_mode' is 'tf_crop_and_resize', which Kiln does "
        "not support (half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
        "tf_half_pixel_for_nearest)");
  }
  if (coord != "half_pixel" && coord != "pytorch_half_pixel" && coord != "align_corners" &&
      coord != "asymmetric" && coord != "tf_half_pixel_for_nearest") {
    nc.fail("attribute 'coordinate_transformation_mode' is '" + coord +
            "'; it must be half_pixel, pytorch_half_pixel, align_corners, asymmetric, "
            "tf_half_pixel_for_nearest or tf_crop_and_resize");
  }
  const std::string nearest = nc.attr_s("nearest_mode", "round_prefer_floor");
  if (nearest != "round_prefer_floor" && nearest != "round_prefer_ceil" && nearest != "floor" &&
      nearest != "ceil") {
    nc.fail("attribute 'nearest_mode' is '" + nearest +
            "'; it must be round_prefer_floor, round_prefer_ceil, floor or ceil");
  }
  if (nc.attr_i("antialias", 0) != 0) {
    nc.fail("attribute 'antialias' is " + str(nc.attr_i("antialias", 0)) +
            ", which Kiln does not support (only 0)");
  }
  const std::string policy = nc.attr_s("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
    nc.fail("attribute 'keep_aspect_ratio_policy' is '" + policy +
            "'; it must be stretch, not_larger or not_smaller");
  }
  nc.flag("exclude_outside", 0);
  if (mode != "nearest" && nc.value(0).dtype.code != kKilnFloat) {
    nc.fail(nc.input(0) + " is " + onnx_type_string(nc.value(0).dtype) + "; Kiln does " + mode +
            " Resize on floating-point tensors only");
  }
  const int64_t r = nc.rank(0);
  std::vector<int64_t> axes;
  if (nc.attr("axes") != nullptr) {
    axes = nc.axes_in(nc.attr_ints("axes", {}), r, "attribute 'axes'", nc.input(0));
  } else {
    for (int64_t d = 0; d < r; ++d) axes.push_back(d);
  }
  const bool scales = nc.has(2) && nc.value(2).num_elements() > 0;
  const bool sizes = nc.has(3) && nc.value(3).num_elements() > 0;
  if (scales == sizes) {
    nc.fail(scales
                ? "gives both input 2 (scales) and input 3 (sizes); Resize takes one of them"
                : "gives neither input 2 (scales) nor input 3 (sizes); Resize needs one of them");
  }
  const size_t i = scales ? 2 : 3;
  if (!nc.value(i).is_constant()) {
    nc.fail(nc.input(i) + " is not a constant, which Kiln does not support: it needs the " +
            (scales ? "scales" : "sizes") + " at compile time (static shapes)");
  }
  if (nc.rank(i) != 1 || nc.shape(i)[0] != static_cast<int64_t>(axes.size())) {
    nc.fail(nc.input_shaped(i) + " must hold one value per resized axis (" +
            str(static_cast<int64_t>(axes.size())) + ") of " + nc.input_shaped(0));
  }
  for (int64_t k = 0; k < nc.value(i).num_elements(); ++k) {
    const double v = element_as_double(*nc.value(i).data, k);
    if (!(v > 0)) {
      std::ostringstream os;
      os << v;
      nc.fail(nc.input(i) + " holds " + os.str() + "; each " + (scales ? "scale" : "size") +
              " must be positive");
    }
  }
}

// --- import (attributes with their defaults) ------------------------------------------------

Attrs import_resize(ImportCtx& c) {
  Attrs a;
  std::vector<const Value*> values;
  for (ValueId v : c.inputs) values.push_back(v == kNoValue ? nullptr : &c.graph().value(v));
  std::vector<int64_t> out;
  std::vector<float> scales;
  if (!resize_form(c.proto(), values, &out, &scales)) {
    c.fail("input 'scales' or 'sizes' must be a constant: Kiln needs static shapes");
  }
  a["scales"] = scales;
  a["mode"] = c.attr_s("mode", "nearest");
  a["coordinate_transformation_mode"] = c.attr_s("coordinate_transformation_mode", "half_pixel");
  a["nearest_mode"] = c.attr_s("nearest_mode", "round_prefer_floor");
  a["cubic_coeff_a"] = c.attr_f("cubic_coeff_a", -0.75f);
  a["exclude_outside"] = c.attr_i("exclude_outside", 0);
  c.inputs.resize(1);
  return a;
}

// --- libonnx shape inference ------------------------------------------------------------------

bool resize_inference(const InferenceForm& f, std::vector<onnx::TypeProto>* types) {
  // Opset 18's Resize (axes, keep_aspect_ratio_policy) is newer than libonnx 1.12, and its
  // inference reads only integer constants: the shape from the constant scales or sizes.
  std::vector<int64_t> dims;
  std::vector<float> scales;
  if (resize_form(f.node, f.inputs, &dims, &scales)) {
    onnx::TypeProto t;
    auto* tt = t.mutable_tensor_type();
    tt->set_elem_type(onnx_elem_type(f.inputs.at(0)->dtype));
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    std::vector<onnx::TypeProto> out{t};
    *types = out;
    return true;
  }
  return false;
}

// --- read as another operator --------------------------------------------------------------------

/// Upsample (opset 9, deprecated since 10) is the Resize it became: asymmetric coordinates,
/// nearest rounding down, an empty roi.
onnx::NodeProto upsample_as_resize(const onnx::NodeProto& original, const std::string& origin,
                                   ImportSink& sink) {
  onnx::NodeProto as_resize;
  as_resize.set_name(original.name());
  as_resize.set_op_type("Resize");
  as_resize.add_input(original.input_size() > 0 ? original.input(0) : "");
  const std::string roi = original.name() + "/kiln_empty_roi";
  sink.define_constant(roi, runtime::NDArray::from_vector(std::vector<float>{}, {0}));
  as_resize.add_input(roi);
  as_resize.add_input(original.input_size() > 1 ? original.input(1) : "");
  for (const std::string& o : original.output()) as_resize.add_output(o);
  std::string mode = "nearest";
  for (const onnx::AttributeProto& a : original.attribute()) {
    if (a.name() == "mode") mode = a.s();
    if (a.name() == "scales") {
      KILN_USER_ERROR() << "'" << origin << "': node '" << original.name()
                        << "' (Upsample): attribute 'scales' (Upsample before opset 9) is "
                           "not supported; re-export with opset 9 or later";
    }
  }
  auto set = [&](const std::string& name, const std::string& v) {
    onnx::AttributeProto* a = as_resize.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  };
  set("mode", mode);
  set("coordinate_transformation_mode", "asymmetric");
  set("nearest_mode", "floor");
  return as_resize;
}

}  // namespace

void register_image(Registry& r) {
  r.add({.name = "Resize",
         .family = "image",
         .pattern = OpPattern::kInjective,
         .input_reads = resize_reads,
         .check = check_resize,
         .opset18 = Opset18Form{.extra_attributes = {{"antialias", onnx::AttributeProto::INT},
                                                     {"axes", onnx::AttributeProto::INTS},
                                                     {"keep_aspect_ratio_policy",
                                                      onnx::AttributeProto::STRING}}},
         .import = import_resize,
         .inference_form = resize_inference,
         .lower = lower_resize,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "GridSample",
         .family = "image",
         .pattern = OpPattern::kInjective,
         .input_reads = [](const Graph&, const Node& n) -> int64_t {
           return n.s("mode") == "nearest" ? 1 : 4;
         },
         .check = check_grid_sample,
         .import = import_grid_sample,
         .lower = lower_grid_sample,
         .gpu = GpuStrategy::kInjective});
  r.add({.name = "Upsample",
         .family = "image",
         .origin = Origin::kImportOnly,
         .import_note = "read as the Resize it became",
         .read_as = upsample_as_resize,
         .schema_checks_suffice = true});  // validated as that Resize
}

}  // namespace kiln::graph::ops
