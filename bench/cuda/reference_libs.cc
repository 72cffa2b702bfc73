// cuBLAS and cuDNN through dlopen: the headers give the types, dlsym the functions.
#include "bench/cuda/reference_libs.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <cstdlib>
#include <vector>

#include "base/error.h"

namespace kiln::bench {
namespace {

/// Opens the first library that loads: the environment's override, the loader's search path,
/// then the folders where the CUDA toolkit and NVIDIA's Python wheels put them.
void* open_first(const char* env, const std::vector<std::string>& candidates, std::string* path) {
  std::vector<std::string> tried;
  if (const char* v = std::getenv(env)) tried.push_back(v);
  tried.insert(tried.end(), candidates.begin(), candidates.end());
  std::string reasons;
  for (auto& p : tried) {
    if (void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_GLOBAL)) {
      *path = p;
      return h;
    }
    reasons += "\n  " + p + ": " + dlerror();
  }
  KILN_USER_CHECK(false) << "cannot load " << candidates.front() << " (set " << env
                         << "); tried:" << reasons;
  return nullptr;
}

template <typename F>
F* symbol(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  KILN_USER_CHECK(p != nullptr) << "symbol " << name << " not found: " << dlerror();
  return reinterpret_cast<F*>(p);
}

std::vector<std::string> library_paths(const std::string& so, const std::string& wheel) {
  std::vector<std::string> out = {so, "/usr/local/cuda/lib64/" + so};
  for (const char* py :
       {"/opt/torch/.venv/lib/python3.12/site-packages", "/usr/local/lib/python3.12/dist-packages",
        "/usr/lib/python3/dist-packages"}) {
    out.push_back(std::string(py) + "/nvidia/" + wheel + "/lib/" + so);
    out.push_back(std::string(py) + "/nvidia/cu13/lib/" + so);
  }
  return out;
}

#define KILN_CUBLAS(call)                                       \
  do {                                                          \
    cublasStatus_t s_ = (call);                                 \
    KILN_USER_CHECK(s_ == CUBLAS_STATUS_SUCCESS)                \
        << #call << " failed: status " << static_cast<int>(s_); \
  } while (0)

}  // namespace

struct Cublas::Api {
  decltype(&cublasCreate_v2) create;
  decltype(&cublasDestroy_v2) destroy;
  decltype(&cublasSetMathMode) set_math_mode;
  decltype(&cublasSgemm_v2) sgemm;
};

Cublas::Cublas() : api_(std::make_unique<Api>()) {
  void* lib = open_first("KILN_CUBLAS_LIB", library_paths("libcublas.so.13", "cublas"), &path_);
  api_->create = symbol<decltype(cublasCreate_v2)>(lib, "cublasCreate_v2");
  api_->destroy = symbol<decltype(cublasDestroy_v2)>(lib, "cublasDestroy_v2");
  api_->set_math_mode = symbol<decltype(cublasSetMathMode)>(lib, "cublasSetMathMode");
  api_->sgemm = symbol<decltype(cublasSgemm_v2)>(lib, "cublasSgemm_v2");
  cublasHandle_t h = nullptr;
  KILN_CUBLAS(api_->create(&h));
  handle_ = h;
  // Plain fp32 FMA arithmetic, as Kiln's kernels: no TF32 tensor cores.
  KILN_CUBLAS(api_->set_math_mode(h, CUBLAS_PEDANTIC_MATH));
}

Cublas::~Cublas() {
  if (handle_) api_->destroy(static_cast<cublasHandle_t>(handle_));
}

void Cublas::sgemm(int m, int n, int k, DevicePtr a, DevicePtr b, DevicePtr c) {
  // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
  const float one = 1.0f, zero = 0.0f;
  KILN_CUBLAS(api_->sgemm(static_cast<cublasHandle_t>(handle_), CUBLAS_OP_N, CUBLAS_OP_N, n, m, k,
                          &one, reinterpret_cast<const float*>(b), n,
                          reinterpret_cast<const float*>(a), k, &zero, reinterpret_cast<float*>(c),
                          n));
}

struct Cudnn::Api {
  decltype(&cudnnCreate) create;
  decltype(&cudnnDestroy) destroy;
  decltype(&cudnnGetErrorString) error_string;
  decltype(&cudnnCreateTensorDescriptor) create_tensor;
  decltype(&cudnnSetTensor4dDescriptor) set_tensor;
  decltype(&cudnnDestroyTensorDescriptor) destroy_tensor;
  decltype(&cudnnCreateFilterDescriptor) create_filter;
  decltype(&cudnnSetFilter4dDescriptor) set_filter;
  decltype(&cudnnDestroyFilterDescriptor) destroy_filter;
  decltype(&cudnnCreateConvolutionDescriptor) create_conv;
  decltype(&cudnnSetConvolution2dDescriptor) set_conv;
  decltype(&cudnnSetConvolutionMathType) set_math;
  decltype(&cudnnDestroyConvolutionDescriptor) destroy_conv;
  decltype(&cudnnFindConvolutionForwardAlgorithm) find_forward;
  decltype(&cudnnGetConvolutionForwardWorkspaceSize) workspace_size;
  decltype(&cudnnConvolutionForward) forward;
};

#define KILN_CUDNN(call)                                                                           \
  do {                                                                                             \
    cudnnStatus_t s_ = (call);                                                                     \
    KILN_USER_CHECK(s_ == CUDNN_STATUS_SUCCESS) << #call << " failed: " << api_->error_string(s_); \
  } while (0)

Cudnn::Cudnn() : api_(std::make_unique<Api>()) {
  void* lib = open_first("KILN_CUDNN_LIB", library_paths("libcudnn.so.9", "cudnn"), &path_);
#define KILN_LOAD(field, fn) api_->field = symbol<decltype(fn)>(lib, #fn)
  KILN_LOAD(create, cudnnCreate);
  KILN_LOAD(destroy, cudnnDestroy);
  KILN_LOAD(error_string, cudnnGetErrorString);
  KILN_LOAD(create_tensor, cudnnCreateTensorDescriptor);
  KILN_LOAD(set_tensor, cudnnSetTensor4dDescriptor);
  KILN_LOAD(destroy_tensor, cudnnDestroyTensorDescriptor);
  KILN_LOAD(create_filter, cudnnCreateFilterDescriptor);
  KILN_LOAD(set_filter, cudnnSetFilter4dDescriptor);
  KILN_LOAD(destroy_filter, cudnnDestroyFilterDescriptor);
  KILN_LOAD(create_conv, cudnnCreateConvolutionDescriptor);
  KILN_LOAD(set_conv, cudnnSetConvolution2dDescriptor);
  KILN_LOAD(set_math, cudnnSetConvolutionMathType);
  KILN_LOAD(destroy_conv, cudnnDestroyConvolutionDescriptor);
  KILN_LOAD(find_forward, cudnnFindConvolutionForwardAlgorithm);
  KILN_LOAD(workspace_size, cudnnGetConvolutionForwardWorkspaceSize);
  KILN_LOAD(forward, cudnnConvolutionForward);
#undef KILN_LOAD
  cudnnHandle_t h = nullptr;
  KILN_CUDNN(api_->create(&h));
  handle_ = h;
}

Cudnn::~Cudnn() {
  release_plan();
  if (handle_) api_->destroy(static_cast<cudnnHandle_t>(handle_));
}

void Cudnn::release_plan() {
  if (x_desc_) api_->destroy_tensor(static_cast<cudnnTensorDescriptor_t>(x_desc_));
  if (y_desc_) api_->destroy_tensor(static_cast<cudnnTensorDescriptor_t>(y_desc_));
  if (w_desc_) api_->destroy_filter(static_cast<cudnnFilterDescriptor_t>(w_desc_));
  if (conv_desc_) api_->destroy_conv(static_cast<cudnnConvolutionDescriptor_t>(conv_desc_));
  if (workspace_ && release_) release_(workspace_);
  x_desc_ = y_desc_ = w_desc_ = conv_desc_ = nullptr;
  workspace_ = 0;
  workspace_bytes_ = 0;
}

void Cudnn::plan(const ConvShape& s, DevicePtr x, DevicePtr w, DevicePtr y,
                 const std::function<DevicePtr(size_t)>& alloc,
                 const std::function<void(DevicePtr)>& release) {
  release_plan();
  release_ = release;
  x_ = x, w_ = w, y_ = y;
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  KILN_CUDNN(api_->create_tensor(&xd));
  x_desc_ = xd;
  KILN_CUDNN(api_->create_tensor(&yd));
  y_desc_ = yd;
  KILN_CUDNN(api_->create_filter(&wd));
  w_desc_ = wd;
  KILN_CUDNN(api_->create_conv(&cd));
  conv_desc_ = cd;
  KILN_CUDNN(api_->set_tensor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.c, s.h, s.w));
  KILN_CUDNN(
      api_->set_tensor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.n, s.k, s.out_h(), s.out_w()));
  KILN_CUDNN(api_->set_filter(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.k, s.c, s.r, s.s));
  KILN_CUDNN(api_->set_conv(cd, s.pad, s.pad, s.stride, s.stride, 1, 1, CUDNN_CROSS_CORRELATION,
                            CUDNN_DATA_FLOAT));
  // Plain fp32 FMA arithmetic, as Kiln's kernels: no TF32 tensor cores.
  KILN_CUDNN(api_->set_math(cd, CUDNN_FMA_MATH));
  cudnnConvolutionFwdAlgoPerf_t perf[16];
  int returned = 0;
  KILN_CUDNN(
      api_->find_forward(static_cast<cudnnHandle_t>(handle_), xd, wd, cd, yd, 16, &returned, perf));
  algo_ = -1;
  for (int i = 0; i < returned; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) {
      algo_ = perf[i].algo;
      break;
    }
  }
  KILN_USER_CHECK(algo_ >= 0) << "cuDNN found no forward algorithm for this convolution";
  KILN_CUDNN(api_->workspace_size(static_cast<cudnnHandle_t>(handle_), xd, wd, cd, yd,
                                  static_cast<cudnnConvolutionFwdAlgo_t>(algo_),
                                  &workspace_bytes_));
  if (workspace_bytes_ > 0) workspace_ = alloc(workspace_bytes_);
}

void Cudnn::run() {
  const float one = 1.0f, zero = 0.0f;
  KILN_CUDNN(api_->forward(
      static_cast<cudnnHandle_t>(handle_), &one, static_cast<cudnnTensorDescriptor_t>(x_desc_),
      reinterpret_cast<const void*>(x_), static_cast<cudnnFilterDescriptor_t>(w_desc_),
      reinterpret_cast<const void*>(w_), static_cast<cudnnConvolutionDescriptor_t>(conv_desc_),
      static_cast<cudnnConvolutionFwdAlgo_t>(algo_), reinterpret_cast<void*>(workspace_),
      workspace_bytes_, &zero, static_cast<cudnnTensorDescriptor_t>(y_desc_),
      reinterpret_cast<void*>(y_)));
}

}  // namespace kiln::bench
