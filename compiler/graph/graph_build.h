// The graph build: an imported graph in, a bundle out (the executor's graph JSON, one shared object
// with a compiled function per node, the parameters). For now without fusion and without memory
// reuse: every node is its own function and every intermediate its own storage pool; operator
// fusion and memory planning are separate passes that plug in before the build.
//
//   runtime::Bundle b = graph::build_graph(graph::import_onnx("net.onnx"), "llvm -mcpu=native");
//   runtime::write_bundle("net.kiln", b);
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "compiler/graph/graph.h"
#include "deploy/runtime/bundle.h"

namespace kiln::graph {

struct BuildOptions {
  /// Called before node `index` (of `total`) is lowered, with the name of its function; called
  /// once more with index == total and "generating code" before LLVM compiles and links them all.
  std::function<void(size_t index, size_t total, const std::string& what)> progress;
  /// Prints one line per node to stderr.
  bool verbose = false;
};

/// Compiles every node of `g` for `target` (an llvm CPU target string) into a bundle. kiln::Error
/// naming the node for an operator without a lowering or a graph the executor cannot express (a
/// graph output that no node computes).
runtime::Bundle build_graph(const Graph& g, const std::string& target,
                            const BuildOptions& options = {});

/// import_onnx, build_graph and write_bundle in one call.
void compile_onnx(const std::string& onnx_path, const std::string& target,
                  const std::string& out_path, const BuildOptions& options = {});

}  // namespace kiln::graph
