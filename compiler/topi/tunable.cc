// The registry of tunable templates: one entry per template, wrapping its three functions.
#include "compiler/topi/tunable.h"

#include "base/error.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/pooling.h"

namespace kiln::topi {

namespace {

using space::Config;
using space::ConfigSpace;

/// The default of a template whose default point does not depend on the target.
template <typename Default>
auto any_target(Default dflt) {
  return [dflt](const te::Tensor&, const ConfigSpace& space, const target::Target&) {
    return dflt(space);
  };
}

/// The default of a template whose default point depends on the target's vector width.
template <typename Default>
auto vector_width(Default dflt) {
  return [dflt](const te::Tensor& out, const ConfigSpace& space, const target::Target& target) {
    return dflt(out, space, target.vector_bits);
  };
}

/// An entry for a template whose schedule takes an epilogue stage.
template <typename Space, typename Default, typename Schedule>
TunableTemplate entry(const char* name, Space space, Default dflt, Schedule schedule) {
  return {name, space, dflt,
          [schedule](te::Schedule& s, const te::Tensor& out, const Config& cfg,
                     const te::Tensor& output) { schedule(s, out, cfg, output); }};
}

}  // namespace

const std::vector<TunableTemplate>& tunable_templates() {
  static const std::vector<TunableTemplate> templates = {
      entry("conv2d_nchw_x86", conv2d_nchw_x86_space, any_target(conv2d_nchw_x86_default),
            schedule_conv2d_nchw_x86),
      entry("depthwise_conv2d_nchw_x86", depthwise_conv2d_nchw_x86_space,
            any_target(depthwise_conv2d_nchw_x86_default), schedule_depthwise_conv2d_nchw_x86),
      entry("conv2d_nchwc_x86", conv2d_nchwc_x86_space, vector_width(conv2d_nchwc_x86_default),
            schedule_conv2d_nchwc_x86),
      entry("depthwise_conv2d_nchwc_x86", depthwise_conv2d_nchwc_x86_space,
            vector_width(depthwise_conv2d_nchwc_x86_default), schedule_depthwise_conv2d_nchwc_x86),
      entry("conv2d_transpose_nchw_x86", conv2d_transpose_nchw_x86_space,
            any_target(conv2d_transpose_nchw_x86_default), schedule_conv2d_transpose_nchw_x86),
      entry("dense_x86", dense_x86_space, any_target(dense_x86_default), schedule_dense_x86),
      entry("batch_matmul_x86", batch_matmul_x86_space, any_target(batch_matmul_x86_default),
            schedule_batch_matmul_x86),
      {"pool2d_x86", pool2d_x86_space, any_target(pool2d_x86_default),
       [](te::Schedule& s, const te::Tensor& out, const Config& cfg, const te::Tensor& output) {
         KILN_ICHECK(!output.defined() || output == out)
             << "pool2d_x86 takes no epilogue ('" << output->name() << "')";
         schedule_pool2d_x86(s, out, cfg);
       }},
  };
  return templates;
}

const TunableTemplate& tunable_template(const std::string& name) {
  std::string known;
  for (const TunableTemplate& t : tunable_templates()) {
    if (t.name == name) return t;
    known += (known.empty() ? "" : ", ") + t.name;
  }
  KILN_USER_ERROR() << "no tunable template named '" << name << "' (known: " << known << ")";
  KILN_UNREACHABLE();
}

}  // namespace kiln::topi
