// oneDNN's direct convolution of one ResNet layer, the reference bench_conv (float32) and
// bench_int8_layers (u8 x s8 -> s32) time Kiln's kernels against: the primitive for a number of
// threads, its operands reordered once into the layouts it chose, and its first output in NCHW.
#pragma once

#include <omp.h>

#include <cstdint>
#include <dnnl.hpp>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "bench/resnet_layers.h"

namespace kiln::bench {

/// oneDNN's name of the element type T.
template <typename T>
constexpr dnnl::memory::data_type onednn_type() {
  using dt = dnnl::memory::data_type;
  if constexpr (std::is_same_v<T, float>) return dt::f32;
  if constexpr (std::is_same_v<T, uint8_t>) return dt::u8;
  if constexpr (std::is_same_v<T, int8_t>) return dt::s8;
  if constexpr (std::is_same_v<T, int32_t>) return dt::s32;
}

/// `Src`, `Wei`, `Dst`: the element types (float, float, float or uint8_t, int8_t, int32_t).
template <typename Src, typename Wei, typename Dst>
struct OnednnConv {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream s{eng};
  dnnl::convolution_forward conv;
  std::unordered_map<int, dnnl::memory> args;
  std::string impl;         ///< the implementation oneDNN picked (e.g. brg:avx512_core)
  std::vector<Dst> output;  ///< of the first run, NCHW

  /// `x` NCHW [1, ic, hw, hw], `w` OIHW.
  OnednnConv(const ConvLayer& l, const std::vector<Src>& x, const std::vector<Wei>& w,
             int threads) {
    using namespace dnnl;
    omp_set_num_threads(threads);  // before the primitive: it sizes its work split for it
    const int oh = l.out_hw();
    memory::dims src_dims = {1, l.ic, l.hw, l.hw}, wei_dims = {l.oc, l.ic, l.k, l.k},
                 dst_dims = {1, l.oc, oh, oh}, strides = {l.stride, l.stride},
                 pads = {l.pad(), l.pad()};
    using tag = memory::format_tag;
    const auto src_t = onednn_type<Src>(), wei_t = onednn_type<Wei>(), dst_t = onednn_type<Dst>();
    memory::desc src_any(src_dims, src_t, tag::any), wei_any(wei_dims, wei_t, tag::any),
        dst_any(dst_dims, dst_t, tag::any);
    convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                   src_any, wei_any, dst_any, strides, pads, pads);
    convolution_forward::primitive_desc pd(desc, eng);
    impl = pd.impl_info_str();
    memory user_src({src_dims, src_t, tag::nchw}, eng, const_cast<Src*>(x.data()));
    memory user_wei({wei_dims, wei_t, tag::oihw}, eng, const_cast<Wei*>(w.data()));
    output.resize(size_t(l.oc) * oh * oh);
    memory user_dst({dst_dims, dst_t, tag::nchw}, eng, output.data());
    memory src(pd.src_desc(), eng), wei(pd.weights_desc(), eng), dst(pd.dst_desc(), eng);
    // The reorders into oneDNN's layouts happen once, here, outside the timing.
    reorder(user_src, src).execute(s, user_src, src);
    reorder(user_wei, wei).execute(s, user_wei, wei);
    s.wait();
    conv = convolution_forward(pd);
    args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    run();
    reorder(dst, user_dst).execute(s, dst, user_dst);
    s.wait();
  }

  void run() {
    conv.execute(s, args);
    s.wait();
  }
};

}  // namespace kiln::bench
