// The reference libraries of the CUDA benchmark, cuBLAS (SGEMM) and cuDNN (convolution forward),
// loaded with dlopen so the benchmark builds where no GPU driver is and reports cleanly where a
// library is missing. Both run in plain fp32 (no TF32 tensor cores: cuBLAS pedantic math, cuDNN
// FMA math), the arithmetic Kiln's kernels do, on the null stream that Kiln's launches use.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace kiln::bench {

/// A device pointer as the CUDA driver gives it (CUdeviceptr).
using DevicePtr = uint64_t;

class Cublas {
 public:
  /// Loads libcublas (from KILN_CUBLAS_LIB, the loader's path, /usr/local/cuda/lib64 or the
  /// Python wheels' folders); throws kiln::Error naming what was tried.
  Cublas();
  ~Cublas();
  /// C[m,n] = A[m,k] · B[k,n], all row-major fp32 on the device.
  void sgemm(int m, int n, int k, DevicePtr a, DevicePtr b, DevicePtr c);
  const std::string& path() const { return path_; }

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
  std::string path_;
};

struct ConvShape {
  int n, c, h, w;   ///< input NCHW
  int k, r, s;      ///< output channels, kernel height, width
  int pad, stride;  ///< same on both axes
  int out_h() const { return (h + 2 * pad - r) / stride + 1; }
  int out_w() const { return (w + 2 * pad - s) / stride + 1; }
};

class Cudnn {
 public:
  /// Loads libcudnn as Cublas does (KILN_CUDNN_LIB overrides).
  Cudnn();
  ~Cudnn();
  /// Chooses the fastest fp32 (FMA math) forward algorithm for `shape` (cuDNN's own search) and
  /// keeps it with its workspace; run() then runs it: y = conv(x, w), NCHW and KCRS.
  /// `alloc` gives device memory for the workspace (freed by `release`).
  void plan(const ConvShape& shape, DevicePtr x, DevicePtr w, DevicePtr y,
            const std::function<DevicePtr(size_t)>& alloc,
            const std::function<void(DevicePtr)>& release);
  void run();
  /// The algorithm plan() chose, as cuDNN numbers it.
  int algorithm() const { return algo_; }
  const std::string& path() const { return path_; }

 private:
  struct Api;
  std::unique_ptr<Api> api_;
  void* handle_ = nullptr;
  std::string path_;
  void* x_desc_ = nullptr;
  void* w_desc_ = nullptr;
  void* y_desc_ = nullptr;
  void* conv_desc_ = nullptr;
  DevicePtr x_ = 0, w_ = 0, y_ = 0, workspace_ = 0;
  size_t workspace_bytes_ = 0;
  int algo_ = -1;
  std::function<void(DevicePtr)> release_;
  void release_plan();
};

}  // namespace kiln::bench
