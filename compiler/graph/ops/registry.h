// The operator registry: one entry per operator holding what the compiler knows about it, so that
// an operator is written in one place (its family's file under ops/) and the shared machinery
// (the ONNX importer, the fuser, the lowering driver, the GPU scheduler, constant folding) asks
// the registry instead of comparing operator names.
//
//   void register_pool(Registry& r) {                              // ops/nn/pool.cc
//     r.add({.name = "MaxPool", .family = "nn/pool", .pattern = OpPattern::kCommReduce,
//            .lower = lower_pool, .gpu = GpuStrategy::kTemplate, .gpu_template = pool_gpu});
//   }
//
// Each family file has one registration function; registry() calls them all once, in the list in
// registry.cc (an explicit list rather than static initializers, which a static link may drop).
// check_complete() says which required parts an entry lacks; a unit test runs it on every entry.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_pattern.h"

namespace onnx {
class GraphProto;
class NodeProto;
class TypeProto;
}  // namespace onnx

namespace kiln::graph::ops {

/// Where an operator's nodes come from.
enum class Origin {
  kOnnx,        ///< an ONNX operator imported as a graph node of its own name
  kImportOnly,  ///< an ONNX operator the importer computes, aliases or rewrites (`import_note`)
  kInternal,    ///< made by a graph pass (`internal_note`), never read from a file
};

/// How a fused group whose master is the operator is scheduled for a GPU target (CUDA, OpenCL).
enum class GpuStrategy {
  kUnset,      ///< (an incomplete entry: check_complete reports it)
  kTemplate,   ///< the GPU template `gpu_template` names, tiling the lowering's anchor
  kReduce,     ///< reduce_gpu: each reduction a kernel
  kInjective,  ///< the group as one injective kernel (schedule_injective)
  kOwn,        ///< the schedule the lowering gives for GPUs (its LowerResult::gpu)
  kRefused,    ///< no GPU schedule: `gpu_note` says why, and building for a GPU is an error
};

class NodeCheck;
/// Opset 18's form of an operator whose newest schema in libonnx 1.12 (which predates opset 18)
/// is older: what the schema checks take beyond that schema, at opset 18.
struct Opset18Form {
  /// Inputs after the schema's ("axes": Pad's, the reductions').
  std::vector<std::string> extra_inputs = {};
  /// Attributes the schema lacks, with their type (an onnx::AttributeProto::AttributeType).
  std::vector<std::pair<std::string, int>> extra_attributes = {};
  /// Attributes the schema has that opset 18 removed, with the reason the error gives.
  std::vector<std::pair<std::string, std::string>> removed_attributes = {};
};

/// An operator's own validation rules, after the schema checks every node gets (node_check.h).
using CheckFn = void (*)(const NodeCheck& node);

class ImportCtx;
/// The node's attributes with every default filled in (import_ctx.h); it may drop inputs it made
/// attributes.
using ImportFn = Attrs (*)(ImportCtx& c);
/// Checks that the inputs the compiler needs as constants are constants (before inference).
using ConstantInputsFn = void (*)(const ImportCtx& c);
/// The static shape of the node's first output, where ONNX shape inference does not give it.
using OutputShapeFn = std::vector<int64_t> (*)(const ImportCtx& c);

class ImportSink;
/// Computes or aliases the node at import (defining its outputs through `sink`); true when it
/// did, and no graph node is made.
using EvaluateFn = bool (*)(ImportCtx& c, ImportSink& sink);

/// The node evaluated at import, its inputs all constants, into `result` of `out`'s (inferred)
/// dtype and shape; false where it declines (the node stays).
using FoldFn = bool (*)(const ImportCtx& c, const Value& out, runtime::NDArray* result);

/// A node as libonnx's shape inference will read it (ShapeInference, onnx_model_check.cc).
struct InferenceForm {
  const onnx::NodeProto& node;  ///< the node as the model has it
  const std::vector<const Value*>& inputs;
  int64_t opset;
  onnx::NodeProto* n;   ///< the copy inference reads, to rewrite
  onnx::GraphProto* g;  ///< its one-node graph, for the initializers a rewrite adds
};
/// Rewrites the node into a form libonnx 1.12's inference knows (opset 18's forms are newer than
/// its schemas; an attribute inference needs), or gives the output types itself (true).
using InferenceFormFn = bool (*)(const InferenceForm& f, std::vector<onnx::TypeProto>* types);

/// Makes the node, its outputs `outs` typed, into other graph nodes through `sink`; true when it
/// did (no node of the operator is made).
using RewriteFn = bool (*)(const ImportCtx& c, const std::vector<ValueId>& outs, ImportSink& sink);

/// The node read as a node of another operator (its inputs' constants defined through `sink`).
using ReadAsFn = onnx::NodeProto (*)(const onnx::NodeProto& node, const std::string& origin,
                                     ImportSink& sink);

struct LowerCtx;
struct LowerResult;
/// A node's topi compute and its default CPU schedule (ops/lowering.h).
using LowerFn = LowerResult (*)(const LowerCtx& c);

/// How many places of its first input one element of the node's output reads, where more than one
/// (a linear Resize: 2 along each resized axis).
using InputReadsFn = int64_t (*)(const Graph& g, const Node& node);

/// The GPU template for a node, given the rank of the lowering's anchor; "" for none.
using GpuTemplateFn = std::string (*)(const Node& node, size_t anchor_rank);

struct OpDef {
  /// "Conv": the ONNX operator type, or the pass's name for an internal one.
  std::string name = "";
  std::string family = "";  ///< "nn/conv": its file under compiler/graph/ops/
  Origin origin = Origin::kOnnx;
  /// kImportOnly: what the importer does with it ("computed into a constant", "becomes Cast").
  std::string import_note = "";
  /// The importer reads the node as one of another operator, before anything else.
  ReadAsFn read_as = nullptr;
  /// kInternal: the pass that makes it.
  std::string internal_note = "";

  // --- fusion (fuse.h) ---------------------------------------------------------------------------
  std::optional<OpPattern> pattern = std::nullopt;
  /// Null: one place. fuse_ops counts an inlined producer's expression once per place read.
  InputReadsFn input_reads = nullptr;

  // --- validation (onnx_validate.cc runs the schema checks, then this) ---------------------------
  CheckFn check = nullptr;
  /// No rule beyond the schema's (input and output counts, attributes, element types).
  bool schema_checks_suffice = false;
  /// Where libonnx's schema predates opset 18's form (applies from opset 18).
  std::optional<Opset18Form> opset18 = std::nullopt;

  // --- import (onnx_frontend.cc) -----------------------------------------------------------------
  ImportFn import = nullptr;
  /// The graph node has no attributes (no `import` needed).
  bool no_attributes = false;
  /// An operator the importer computes or aliases (Constant, Shape, Identity, ...).
  EvaluateFn evaluate = nullptr;
  /// The graph node's operator where it is another (CastLike becomes Cast).
  std::string node_op = "";
  ConstantInputsFn constant_inputs = nullptr;
  /// Null: ONNX shape inference of the node alone types its outputs.
  OutputShapeFn output_shape = nullptr;
  InferenceFormFn inference_form = nullptr;
  RewriteFn rewrite = nullptr;
  /// How the importer evaluates the node when all its inputs are constants (a copy of the data,
  /// or a Cast), so that shape computations become constants; null: it does not.
  FoldFn import_fold = nullptr;

  // --- graph passes ------------------------------------------------------------------------------
  /// fold_constants may run a node of constants through its lowering at build time.
  bool fold_constants = true;

  // --- lowering (op_lowering.h) ------------------------------------------------------------------
  /// The compute and its CPU (x86 / AArch64 through LLVM) schedule; null for an operator built
  /// another way, which `lower_note` names.
  LowerFn lower = nullptr;
  std::string lower_note = "";

  // --- GPU targets -------------------------------------------------------------------------------
  GpuStrategy gpu = GpuStrategy::kUnset;
  GpuTemplateFn gpu_template = nullptr;  ///< kTemplate
  /// kTemplate: the form named when the template does not apply (" in 1-D"); kRefused: why.
  std::string gpu_note = "";
};

/// All entries, by name.
class Registry {
 public:
  /// Adds `def`; kiln::InternalError when its name is taken or empty.
  void add(OpDef def);
  /// The entry named `op`, or null.
  const OpDef* find(const std::string& op) const;
  const std::map<std::string, OpDef>& all() const { return ops_; }

 private:
  std::map<std::string, OpDef> ops_;
};

/// The registry of every operator Kiln knows, built once.
const Registry& registry();

/// The entry of `op`, or null when no family registers it.
const OpDef* find_op(const std::string& op);

/// The required parts `def` lacks ("pattern", "GPU strategy", ...); empty when complete.
std::vector<std::string> check_complete(const OpDef& def);

/// The ONNX operators the front end accepts (kOnnx and kImportOnly entries), sorted.
std::vector<std::string> onnx_operator_names();

/// The markdown table of the operators (README.md's section "Operators" holds it).
std::string operator_table_markdown();

// The family registration functions, one per family file, called once by registry().
void register_conv(Registry& r);
void register_pool(Registry& r);
void register_norm(Registry& r);
void register_elementwise(Registry& r);
void register_binary(Registry& r);
void register_matmul(Registry& r);
void register_shape(Registry& r);
void register_index(Registry& r);
void register_reduce(Registry& r);
void register_rnn(Registry& r);
void register_quant(Registry& r);
void register_image(Registry& r);

}  // namespace kiln::graph::ops
