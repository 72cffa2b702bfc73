// The registry of tunable templates: one entry per template, wrapping its three functions.
#include "compiler/topi/tunable.h"

#include <deque>
#include <mutex>

#include "base/error.h"
#include "compiler/topi/conv2d.h"
#include "compiler/topi/conv2d_int8.h"
#include "compiler/topi/conv2d_transpose.h"
#include "compiler/topi/conv2d_winograd.h"
#include "compiler/topi/dense.h"
#include "compiler/topi/dense_int8.h"
#include "compiler/topi/gpu/conv2d_gpu.h"
#include "compiler/topi/gpu/conv2d_transpose_gpu.h"
#include "compiler/topi/gpu/depthwise_conv2d_gpu.h"
#include "compiler/topi/gpu/matmul_gpu.h"
#include "compiler/topi/gpu/pool_gpu.h"
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

/// The default of a GPU template, read from the target's limits (threads a block).
template <typename Default>
auto gpu_target(Default dflt) {
  return [dflt](const te::Tensor&, const ConfigSpace& space, const target::Target& target) {
    return dflt(space, target);
  };
}

/// An entry for a template whose schedule takes an epilogue stage.
template <typename Space, typename Default, typename Schedule>
TunableTemplate entry(const char* name, std::vector<std::string> computes, Space space,
                      Default dflt, Schedule schedule) {
  return {name, std::move(computes), space, dflt,
          [schedule](te::Schedule& s, const te::Tensor& out, const Config& cfg,
                     const te::Tensor& output) { schedule(s, out, cfg, output); }};
}

/// topi's own templates.
std::deque<TunableTemplate> builtin_templates() {
  return {
      entry("conv2d_nchw_x86", {"conv2d_nchw"}, conv2d_nchw_x86_space,
            any_target(conv2d_nchw_x86_default), schedule_conv2d_nchw_x86),
      entry("depthwise_conv2d_nchw_x86", {"conv2d_nchw"}, depthwise_conv2d_nchw_x86_space,
            any_target(depthwise_conv2d_nchw_x86_default), schedule_depthwise_conv2d_nchw_x86),
      entry("conv2d_nchwc_x86", {"conv2d_nchwc", "conv2d_nchwc_bf16"}, conv2d_nchwc_x86_space,
            conv2d_nchwc_x86_default, schedule_conv2d_nchwc_x86),
      entry("conv2d_nchwc_winograd_x86", {"conv2d_nchwc_winograd"}, conv2d_nchwc_winograd_x86_space,
            conv2d_nchwc_winograd_x86_default, schedule_conv2d_nchwc_winograd_x86),
      entry("conv2d_nchwc_int8_x86", {"conv2d_nchwc_int8"}, conv2d_nchwc_int8_x86_space,
            conv2d_nchwc_int8_x86_default, schedule_conv2d_nchwc_int8_x86),
      entry("group_conv2d_nchwc_x86", {"group_conv2d_nchwc"}, group_conv2d_nchwc_x86_space,
            group_conv2d_nchwc_x86_default, schedule_group_conv2d_nchwc_x86),
      entry("depthwise_conv2d_nchwc_x86", {"depthwise_conv2d_nchwc", "depthwise_conv2d_nchwc_int8"},
            depthwise_conv2d_nchwc_x86_space, vector_width(depthwise_conv2d_nchwc_x86_default),
            schedule_depthwise_conv2d_nchwc_x86),
      entry("conv2d_transpose_nchw_x86", {"conv2d_transpose_nchw", "conv2d_transpose_nchw_packed"},
            conv2d_transpose_nchw_x86_space, any_target(conv2d_transpose_nchw_x86_default),
            schedule_conv2d_transpose_nchw_x86),
      entry("dense_x86", {"dense", "dense_packed", "dense_packed_bf16"}, dense_x86_space,
            any_target(dense_x86_default), schedule_dense_x86),
      entry("dense_int8_x86", {"dense_int8"}, dense_int8_x86_space, dense_int8_x86_default,
            schedule_dense_int8_x86),
      entry("batch_matmul_x86", {"batch_matmul"}, batch_matmul_x86_space,
            vector_width(batch_matmul_x86_default), schedule_batch_matmul_x86),
      {"pool2d_x86",
       {"max_pool2d", "avg_pool2d", "global_max_pool2d", "global_avg_pool2d"},
       pool2d_x86_space,
       any_target(pool2d_x86_default),
       [](te::Schedule& s, const te::Tensor& out, const Config& cfg, const te::Tensor& output) {
         KILN_ICHECK(!output.defined() || output == out)
             << "pool2d_x86 takes no epilogue ('" << output->name() << "')";
         schedule_pool2d_x86(s, out, cfg);
       }},
      entry("conv2d_nchw_gpu", {"conv2d_nchw"}, gpu::conv2d_nchw_gpu_space,
            gpu_target(gpu::conv2d_nchw_gpu_default), gpu::schedule_conv2d_nchw_gpu),
      entry("depthwise_conv2d_nchw_gpu", {"conv2d_nchw"}, gpu::depthwise_conv2d_nchw_gpu_space,
            gpu_target(gpu::depthwise_conv2d_nchw_gpu_default),
            gpu::schedule_depthwise_conv2d_nchw_gpu),
      entry("conv2d_transpose_nchw_gpu", {"conv2d_transpose_nchw"},
            gpu::conv2d_transpose_nchw_gpu_space,
            gpu_target(gpu::conv2d_transpose_nchw_gpu_default),
            gpu::schedule_conv2d_transpose_nchw_gpu),
      entry("matmul_gpu", {"dense", "dense_packed"}, gpu::matmul_gpu_space,
            gpu_target(gpu::matmul_gpu_default), gpu::schedule_matmul_gpu),
      entry("batch_matmul_gpu", {"batch_matmul"}, gpu::matmul_gpu_space,
            gpu_target(gpu::matmul_gpu_default), gpu::schedule_matmul_gpu),
      entry("pool2d_gpu", {"max_pool2d", "avg_pool2d", "global_max_pool2d", "global_avg_pool2d"},
            gpu::pool2d_gpu_space, gpu_target(gpu::pool2d_gpu_default), gpu::schedule_pool2d_gpu),
  };
}

/// Every template, topi's and the registered ones; a deque, so that adding one moves none.
struct Registry {
  std::mutex mu;
  std::deque<TunableTemplate> templates = builtin_templates();  // GUARDED_BY(mu)
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

std::vector<TunableTemplate> tunable_templates() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return {r.templates.begin(), r.templates.end()};
}

void register_tunable_template(TunableTemplate t) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const TunableTemplate& x : r.templates)
    KILN_ICHECK(x.name != t.name) << "tunable template '" << t.name << "' registered twice";
  r.templates.push_back(std::move(t));
}

const TunableTemplate& tunable_template(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::string known;
  for (const TunableTemplate& t : r.templates) {
    if (t.name == name) return t;
    known += (known.empty() ? "" : ", ") + t.name;
  }
  KILN_USER_ERROR() << "no tunable template named '" << name << "' (known: " << known << ")";
  KILN_UNREACHABLE();
}

void check_template_compute(const TunableTemplate& t, const std::string& compute) {
  std::string list;
  for (const std::string& c : t.computes) {
    if (c == compute) return;
    list += (list.empty() ? "" : ", ") + c;
  }
  KILN_USER_ERROR() << "template '" << t.name << "' schedules " << list << ", not '" << compute
                    << "'";
}

}  // namespace kiln::topi
