// `kiln run --profile` as a user reads it: a convolutional model compiled by `kiln compile`, its
// report parsed line by line: the header stating the machine's measured peak, bandwidth and
// threads, the columns, every kernel's row, and each figure consistent with the kernel's work in
// the bundle (GFLOP/s = flops / time, % of peak, GB/s, the bound from its intensity against the
// balance point, the time lost at the roof); then the same bundle with the work taken out of its
// graph, which still runs and prints "-" for what it cannot know.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "deploy/runtime/bundle.h"
#include "deploy/runtime/npy.h"
#include "tests/common/kiln_test_util.h"
#include "tests/common/onnx_model_builder.h"
#include "tests/common/run_command.h"
#include "tests/common/temp_dir.h"

namespace kiln {
namespace {

/// Conv 3x3 (32 -> 32 channels, 28x28, a bias) + Relu, then a global average pool: one kernel
/// doing about 15 MFLOP and small ones doing little.
std::string conv_model() {
  testing::OnnxModelBuilder m;
  m.input("x", {1, 32, 28, 28});
  m.init_values("w", {32, 32, 3, 3}, std::vector<float>(32 * 32 * 9, 0.01f));
  m.init_values("b", {32}, std::vector<float>(32, 0.1f));
  auto* conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  testing::OnnxModelBuilder::attr(conv, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"y"});
  m.output("y");
  return m.bytes();
}

struct Row {
  double ms, share;
  std::string gflops, peak, gbps, bw, bound, lost, func;
};

struct Report {
  double peak_gflops = 0, core_gflops = 0, bandwidth = 0, balance = 0;
  int threads = 0;
  std::vector<Row> rows;
};

/// A number from a column, or NaN for "-"; a trailing '%' is dropped.
double number(std::string s) {
  if (s == "-") return std::nan("");
  if (!s.empty() && s.back() == '%') s.pop_back();
  return std::stod(s);
}

Report parse(const std::string& out) {
  Report r;
  std::istringstream in(out);
  std::string line;
  const std::regex header(
      R"(^machine: peak ([0-9.]+) GFLOP/s \((\d+) threads? x ([0-9.]+), fp32 FMA, [a-z0-9+]+\), )"
      R"(memory ([0-9.]+) GB/s, balance ([0-9.]+) FLOP/byte$)");
  std::smatch m;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, header)) {
      r.peak_gflops = std::stod(m[1]);
      r.threads = std::stoi(m[2]);
      r.core_gflops = std::stod(m[3]);
      r.bandwidth = std::stod(m[4]);
      r.balance = std::stod(m[5]);
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string s; words >> s;) w.push_back(s);
    if (w == std::vector<std::string>{"ms", "share", "GFLOP/s", "%peak", "GB/s", "%bw", "bound",
                                      "lost_ms", "function"}) {
      in_table = true;
      continue;
    }
    if (!in_table) continue;
    if (w.size() != 9) break;  // the table ends
    r.rows.push_back({std::stod(w[0]), number(w[1]), w[2], w[3], w[4], w[5], w[6], w[7], w[8]});
  }
  return r;
}

class ProfileReportTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  testing::CommandResult kiln(const std::string& args) const {
    return testing::run_command(KILN_BINARY, args, dir_);
  }
  testing::TempDir dir_{"kiln_profile_report_test"};
};

TEST_F(ProfileReportTest, ColumnsParseAndAgreeWithTheKernelsWork) {
  std::ofstream(path("conv.onnx"), std::ios::binary) << conv_model();
  testing::CommandResult c =
      kiln("compile '" + path("conv.onnx") + "' -o '" + path("conv.kiln") + "'");
  ASSERT_EQ(c.code, 0) << c.err;
  runtime::save_npy(path("x.npy"), testing::random_array({1, 32, 28, 28}, 3));
  testing::CommandResult r = kiln("run '" + path("conv.kiln") + "' --input '" + path("x.npy") +
                                  "' --profile 10 --threads 1");
  ASSERT_EQ(r.code, 0) << r.err;
  const Report rep = parse(r.out);
  ASSERT_EQ(rep.threads, 1) << r.out;
  EXPECT_GT(rep.peak_gflops, 1) << r.out;
  EXPECT_NEAR(rep.peak_gflops, rep.core_gflops, 0.11) << r.out;  // one thread: one core
  EXPECT_GT(rep.bandwidth, 0.1) << r.out;
  EXPECT_NEAR(rep.balance, rep.peak_gflops / rep.bandwidth, 0.05 * rep.balance + 0.1) << r.out;
  ASSERT_FALSE(rep.rows.empty()) << r.out;

  // The work the bundle's graph gives each function.
  const runtime::Bundle bundle = runtime::read_bundle(path("conv.kiln"));
  std::map<std::string, Json> node_of;
  const Json graph = Json::parse(bundle.graph_json);
  for (const Json& n : graph.at("nodes", "graph").as_array("nodes"))
    node_of[n.at("func", "node").as_string("func")] = n;
  ASSERT_EQ(rep.rows.size(), node_of.size()) << r.out;

  double share = 0;
  bool conv_seen = false;
  int checked = 0;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const Row& row = rep.rows[i];
    SCOPED_TRACE(row.func + "\n" + r.out);
    if (i > 0) {
      EXPECT_LE(row.ms, rep.rows[i - 1].ms);  // slowest first
    }
    share += row.share;
    ASSERT_TRUE(node_of.count(row.func));
    const Json& node = node_of[row.func];
    const double flops = static_cast<double>(node.at("flops", "node").as_int("flops"));
    const double bytes = static_cast<double>(node.at("bytes", "node").as_int("bytes"));
    conv_seen |= node.at("ops", "node").as_string("ops") == "Conv+Relu";
    if (row.ms < 0.01) continue;  // too fast for its printed milliseconds to say much
    ++checked;
    // The printed ms is rounded to 0.0005: each rate lies between its values at ms -/+ 0.0005.
    auto check_rate = [&](const std::string& printed, double work) {
      const double hi = work / ((row.ms - 0.0005) * 1e6), lo = work / ((row.ms + 0.0005) * 1e6);
      EXPECT_GE(number(printed), lo - 0.05);
      EXPECT_LE(number(printed), hi + 0.05);
    };
    check_rate(row.gflops, flops);
    check_rate(row.gbps, bytes);
    // A percentage agrees with its printed rate up to that rate's rounding (0.05, scaled by the
    // reference), its own (0.05), and the reference's printed one decimal (under 1%).
    EXPECT_NEAR(number(row.peak), 100 * number(row.gflops) / rep.peak_gflops,
                0.05 + 5 / rep.peak_gflops + 0.01 * number(row.peak));
    EXPECT_NEAR(number(row.bw), 100 * number(row.gbps) / rep.bandwidth,
                0.05 + 5 / rep.bandwidth + 0.01 * number(row.bw));
    const double intensity = flops / bytes;
    if (std::abs(intensity - rep.balance) > 0.05 * rep.balance) {
      EXPECT_EQ(row.bound, intensity > rep.balance ? "compute" : "memory");
    }
    const double roof_ms = std::max(flops / (rep.peak_gflops * 1e6), bytes / (rep.bandwidth * 1e6));
    EXPECT_NEAR(number(row.lost), row.ms - roof_ms, 0.002 + 0.01 * roof_ms);
  }
  EXPECT_TRUE(conv_seen) << r.out;
  EXPECT_GE(checked, 1) << r.out;  // the convolution takes tens of microseconds at least
  EXPECT_NEAR(share, 100, 0.1 * static_cast<double>(rep.rows.size()));
}

TEST_F(ProfileReportTest, BundleWithoutWorkStillRunsAndSaysDash) {
  std::ofstream(path("conv.onnx"), std::ios::binary) << conv_model();
  ASSERT_EQ(kiln("compile '" + path("conv.onnx") + "' -o '" + path("conv.kiln") + "'").code, 0);
  // An older bundle: the same graph without the nodes' work.
  runtime::Bundle b = runtime::read_bundle(path("conv.kiln"));
  Json graph = Json::parse(b.graph_json);
  Json::Array nodes;
  for (const Json& n : graph.at("nodes", "graph").as_array("nodes")) {
    Json::Object o = n.as_object("node");
    o.erase("flops");
    o.erase("bytes");
    o.erase("ops");
    nodes.emplace_back(std::move(o));
  }
  Json::Object g = graph.as_object("graph");
  g["nodes"] = std::move(nodes);
  b.graph_json = Json(std::move(g)).dump();
  ASSERT_EQ(b.graph_json.find("flops"), std::string::npos);
  runtime::write_bundle(path("old.kiln"), b);

  runtime::save_npy(path("x.npy"), testing::random_array({1, 32, 28, 28}, 3));
  testing::CommandResult r =
      kiln("run '" + path("old.kiln") + "' --input '" + path("x.npy") + "' --profile 3");
  ASSERT_EQ(r.code, 0) << r.err;
  const Report rep = parse(r.out);
  ASSERT_FALSE(rep.rows.empty()) << r.out;
  for (const Row& row : rep.rows) {
    for (const std::string* s :
         {&row.gflops, &row.peak, &row.gbps, &row.bw, &row.bound, &row.lost}) {
      EXPECT_EQ(*s, "-") << r.out;
    }
  }
  EXPECT_NE(r.out.find("output 'y'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace kiln
