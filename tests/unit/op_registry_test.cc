// The operator registry: every entry has each part its origin requires, a deliberately incomplete
// entry is reported naming the part it lacks, the front end's list and the README's table of
// operators come from it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "compiler/graph/onnx_frontend.h"
#include "compiler/graph/op_pattern.h"
#include "compiler/graph/ops/registry.h"

namespace kiln::graph::ops {
namespace {

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

TEST(OpRegistry, EveryOperatorIsComplete) {
  ASSERT_FALSE(registry().all().empty());
  for (const auto& [name, def] : registry().all()) {
    EXPECT_EQ(name, def.name);
    const std::vector<std::string> missing = check_complete(def);
    EXPECT_TRUE(missing.empty()) << "operator '" << name << "' (" << def.family
                                 << ") lacks: " << join(missing);
  }
}

TEST(OpRegistry, IncompleteEntriesAreNamed) {
  // Registered with nothing but a name and an origin: every required part is reported.
  OpDef bare{.name = "Bare"};
  const std::vector<std::string> missing = check_complete(bare);
  const std::string all = join(missing);
  EXPECT_NE(all.find("family"), std::string::npos) << all;
  EXPECT_NE(all.find("fusion pattern"), std::string::npos) << all;
  EXPECT_NE(all.find("GPU strategy"), std::string::npos) << all;

  // One part missing at a time, from an entry that is complete.
  OpDef conv = *find_op("Conv");
  ASSERT_TRUE(check_complete(conv).empty());
  OpDef no_pattern = conv;
  no_pattern.pattern.reset();
  EXPECT_EQ(check_complete(no_pattern), std::vector<std::string>{"fusion pattern"});
  OpDef no_template = conv;
  no_template.gpu_template = nullptr;
  EXPECT_EQ(check_complete(no_template), std::vector<std::string>{"GPU template function"});
  OpDef refused = conv;
  refused.gpu = GpuStrategy::kRefused;
  refused.gpu_note.clear();
  EXPECT_EQ(check_complete(refused), std::vector<std::string>{"GPU refusal reason"});
  OpDef unknown = *find_op("Relu");  // an operator libonnx does not know needs its own inference
  unknown.name = "NoSuchOnnxOp";
  EXPECT_EQ(check_complete(unknown),
            std::vector<std::string>{"shape inference (libonnx has no schema: an output_shape)"});
  OpDef internal = *find_op("QConv");
  internal.internal_note.clear();
  EXPECT_EQ(check_complete(internal),
            std::vector<std::string>{"internal note (the pass that makes it)"});
  OpDef import_only = *find_op("Shape");
  import_only.import_note.clear();
  EXPECT_EQ(check_complete(import_only),
            std::vector<std::string>{"import note (what the importer does)"});
}

TEST(OpRegistry, NamesAreUniqueAndFound) {
  Registry r;
  r.add({.name = "A", .family = "f"});
  EXPECT_NE(r.find("A"), nullptr);
  EXPECT_EQ(r.find("B"), nullptr);
  EXPECT_ANY_THROW(r.add({.name = "A", .family = "g"}));
  EXPECT_ANY_THROW(r.add({.family = "g"}));
  EXPECT_EQ(find_op("NoSuchOp"), nullptr);
}

TEST(OpRegistry, SupportedOnnxOpsComeFromIt) {
  const std::vector<std::string>& supported = supported_onnx_ops();
  EXPECT_EQ(supported, onnx_operator_names());
  for (const std::string& op : supported) {
    const OpDef* def = find_op(op);
    ASSERT_NE(def, nullptr) << op;
    EXPECT_NE(def->origin, Origin::kInternal) << op;
  }
  // The operators graph passes make are registered, but not accepted from a file.
  for (const char* op : {"LayoutTransform", "QConv", "VdlaQConv"}) {
    ASSERT_NE(find_op(op), nullptr) << op;
    EXPECT_FALSE(std::binary_search(supported.begin(), supported.end(), op)) << op;
  }
}

TEST(OpRegistry, PatternsComeFromIt) {
  Node n;
  for (const auto& [name, def] : registry().all()) {
    n.op = name;
    EXPECT_EQ(op_pattern(n), def.pattern.value_or(OpPattern::kOpaque)) << name;
  }
}

/// README.md's table of operators, between its markers.
std::string readme_table() {
  std::ifstream in(std::string(KILN_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string begin = "<!-- operators: begin -->\n", end = "<!-- operators: end -->";
  const size_t b = text.find(begin), e = text.find(end);
  if (b == std::string::npos || e == std::string::npos || e < b) return "(no table in README.md)";
  return text.substr(b + begin.size(), e - b - begin.size());
}

TEST(OpRegistry, ReadmeTableIsTheRegistrys) {
  EXPECT_EQ(readme_table(), operator_table_markdown())
      << "README.md's operator table differs from the registry: replace it with the output of "
         "`kiln ops`";
}

}  // namespace
}  // namespace kiln::graph::ops
