// Post-training int8 quantization of a float ONNX model into a QDQ ONNX model (`kiln quantize`,
// `kiln compile --quantize int8`), in one of two kinds of scales:
//
// - float (the default, the standard form, as ONNX Runtime's quantize_static writes it): weights
//   per output channel symmetric int8, s_w[oc] = max|w[oc]| / 127; activations asymmetric uint8
//   from the calibrated range [lo, hi] (widened to hold 0), s = (hi - lo) / 255,
//   z = round(-lo / s). realize_qlinear makes the convolutions ConvInteger with ORT's
//   requantization.
// - power of two (`--scales pow2`, the VDLA's: it only shifts): symmetric, zero points 0,
//   s_w[oc] = 2^-f with the largest f such that max|w[oc]| * 2^f <= 127 and activations
//   s = 2^-e with the largest e such that maxabs * 2^e <= 127; output scales raised (and a
//   channel's weight scale where needed) so every shift log2(s_y / (s_x * s_w)) lies in [0, 31].
//   realize_qconv makes the convolutions QConv nodes on target vdla.
//
// In both:
// 1. BatchNormalization after a Conv (its only reader, constant parameters) is folded into the
//    conv's weights and bias.
// 2. Weights are stored int8 behind a per-axis DequantizeLinear.
// 3. Activations: the model, compiled by Kiln in process with the tensors below as extra outputs,
//    runs on every calibration sample, which gives each tensor's range.
// 4. One QuantizeLinear -> DequantizeLinear pair per tensor, every reader reading the
//    DequantizeLinear: on each Conv's input and on its output, after its Relu when the Relu is the
//    conv's only reader. The bias is int32 with scale s_x * s_w[oc].
// Gemm/MatMul, pooling and the rest stay float. The model keeps its opset (13 or later needed for
// per-axis scales).
//
//   QuantizeOptions o{.model = "net.onnx", .calibration = {"a.npy", "b.npy"}};
//   std::string qdq = quantize_onnx(o);   // a serialized ModelProto
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln::graph {

/// The kind of scales quantize_onnx writes.
enum class QuantizeScales {
  kFloat,       ///< per-channel symmetric int8 weights, asymmetric uint8 activations
  kPowerOfTwo,  ///< symmetric power-of-two scales, shifts in [0, 31]: the VDLA's QConv
};

struct QuantizeOptions {
  std::string model;  ///< the float .onnx file
  /// .npy files, bound to the model's inputs in order: sample k is files k*I .. k*I+I-1 for a
  /// model of I inputs. Each must have its input's dtype and (bound) shape.
  std::vector<std::string> calibration;
  /// The shapes to compile the calibration run for (`--input-shape`).
  std::map<std::string, std::vector<int64_t>> input_shapes;
  QuantizeScales scales = QuantizeScales::kFloat;
  /// What the calibration run is compiled for.
  std::string target = "llvm";
  /// Called with a line at each step ("folding batch norms", "calibrating on a.npy", ...).
  std::function<void(const std::string&)> progress;
};

struct QuantizeReport {
  size_t batch_norms_folded = 0;
  size_t convolutions_quantized = 0;
  size_t tensors_quantized = 0;  ///< activations given a QuantizeLinear -> DequantizeLinear pair
  size_t samples = 0;            ///< calibration samples run
  /// One line per convolution left float, and per scale raised to bound a shift.
  std::vector<std::string> notes;
};

/// The QDQ model as a serialized ModelProto. kiln::Error naming the file and input for a missing
/// calibration file, a count of files that is not a multiple of the inputs, or a file of another
/// dtype or shape than its input; and for a model Kiln cannot import.
std::string quantize_onnx(const QuantizeOptions& options, QuantizeReport* report = nullptr);

}  // namespace kiln::graph
