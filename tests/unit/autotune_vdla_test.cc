// The VDLA in the tuner: vdla_conv2d's workload (its output carries it; int8 / int32 inputs each
// checked), the tunable template (named knobs over vdla_conv2d_space's values, a default that
// fits, configs that do not fit refused with their reason), a task for target vdla rebuilt from
// its workload (key, space, default, flops of the convolution, the inputs' value ranges), loop
// features of lower_vdla's program that tell configs apart; kiln-runner's device "vdla" (a program
// checked bit-exact against the task's reference, the cost cycles / 200 MHz; a wrong answer, a
// malformed program and a deadlocked stream are results, not crashes); and `kiln tune`'s loop
// on one ResNet-18 layer with the XGBoost model and simulated annealing: never worse than the
// default, every measurement checked against the reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include "base/json.h"
#include "compiler/autotune/features.h"
#include "compiler/autotune/local_measurer.h"
#include "compiler/autotune/measurer.h"
#include "compiler/autotune/task.h"
#include "compiler/autotune/tuner.h"
#include "compiler/topi/tunable.h"
#include "compiler/topi/vdla_conv2d.h"
#include "compiler/topi/workload.h"
#include "compiler/vdla/conv2d_schedule.h"
#include "compiler/vdla/conv2d_template.h"
#include "compiler/vdla/program.h"
#include "deploy/runtime/measure_child.h"
#include "deploy/runtime/npy.h"
#include "deploy/runtime/vdla_run.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace kiln::autotune {
namespace {

using topi::VdlaConv2dShape;

/// ResNet-18's C8 (28x28, 128 -> 256 channels, 1x1, stride 2), the VDLA's blocked layouts.
VdlaConv2dShape c8() { return {28, 28, 128, 256, 1, 2, 0}; }
/// A small 3x3 convolution.
VdlaConv2dShape small() { return {8, 8, 32, 32, 3, 1, 1}; }

Task vdla_task(const VdlaConv2dShape& s, bool relu) {
  return Task::make("vdla_conv2d", topi::vdla_conv2d(s, relu).out, "vdla");
}

TEST(VdlaWorkload, TheOutputCarriesItAndItRebuilds) {
  const te::Tensor out = topi::vdla_conv2d(small(), true).out;
  const std::string text = topi::workload_of(out).value();
  EXPECT_EQ(text,
            "{\"attrs\":{\"pad\":1,\"relu\":true,\"stride\":1},\"compute\":\"vdla_conv2d\","
            "\"inputs\":[{\"dtype\":\"int8\",\"shape\":[2,8,8,1,16]},{\"dtype\":\"int8\",\"shape\":"
            "[2,2,3,3,16,16]},{\"dtype\":\"int32\",\"shape\":[2,1,16]},{\"dtype\":\"int32\","
            "\"shape\":[2,1,16]}]}");
  const te::Tensor again = topi::compute_from_workload(topi::Workload::parse(text));
  EXPECT_EQ(topi::workload_of(again), text);
  EXPECT_EQ(again->dtype(), ir::kInt8);
}

TEST(VdlaWorkload, EveryInputIsChecked) {
  topi::Workload w =
      topi::Workload::parse(*topi::workload_of(topi::vdla_conv2d(small(), false).out));
  topi::Workload bad = w;
  bad.inputs[2].dtype = ir::kFloat32;
  EXPECT_ERROR_CONTAINS(topi::check_workload(bad),
                        "inputs[2] (bias).dtype = float32 must be int32");
  bad = w;
  bad.inputs[1].shape[3] = 1;  // a 3x1 kernel
  EXPECT_ERROR_CONTAINS(topi::check_workload(bad), "a square kernel");
  bad = w;
  bad.inputs[3].shape[0] = 3;  // shift for another number of channel blocks
  EXPECT_ERROR_CONTAINS(topi::check_workload(bad), "inputs[3].shape[0] = 3 must equal");
  bad = w;
  bad.attrs.erase("relu");
  EXPECT_ERROR_CONTAINS(topi::check_workload(bad), "attrs.relu is missing");
  bad = w;
  bad.inputs[0].shape[1] = 1;  // 1x8 input, 3x3 kernel, pad 0
  bad.attrs["pad"] = int64_t{0};
  EXPECT_ERROR_CONTAINS(topi::check_workload(bad), "is larger than");
}

TEST(VdlaTemplate, NamedKnobsADefaultThatFitsAndRefusals) {
  const Task t = vdla_task(small(), false);
  std::vector<std::string> names;
  for (const space::Knob& k : t.space.knobs()) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string>{"tile_oc", "tile_ic", "tile_h", "tile_w", "vthreads",
                                             "vthread_axis", "wgt_resident"}));
  EXPECT_EQ(t.space.knob("vthreads").candidates, (std::vector<std::vector<int64_t>>{{1}, {2}}));
  // Every value of every knob is one some fitting config takes.
  const topi::VdlaConv2d op = vdla_compiler::vdla_conv2d_stages(t.out);
  std::set<int64_t> heights;
  for (auto vt : {1, 2})
    for (const auto& c : vdla_compiler::vdla_conv2d_space(op, vt, vdla::Config{}))
      heights.insert(c.tile_h);
  std::set<int64_t> knob_heights;
  for (const auto& c : t.space.knob("tile_h").candidates) knob_heights.insert(c[0]);
  EXPECT_EQ(knob_heights, heights);
  // The default: two threads, the largest tiles that fit (both oc blocks in a tile, so the
  // threads split the rows); it lowers.
  const vdla_compiler::VdlaConv2dConfig d = vdla_compiler::vdla_conv2d_config_of(t.default_config);
  EXPECT_EQ(d.to_string(),
            vdla_compiler::vdla_conv2d_candidates(op, 2, vdla::Config{}).front().to_string());
  EXPECT_EQ(d.vthreads, 2);
  EXPECT_EQ(d.tile_oc, 2);
  EXPECT_TRUE(d.vthread_h);
  EXPECT_EQ(vdla_compiler::vdla_conv2d_problem(op, d, vdla::Config{}), "");
  EXPECT_NO_THROW(t.lower(t.default_config));
  EXPECT_EQ(vdla_compiler::vdla_conv2d_config_of(vdla_compiler::vdla_conv2d_point(t.space, d))
                .to_string(),
            d.to_string());
  // A point that does not fit: two threads over one oc tile along oc.
  vdla_compiler::VdlaConv2dConfig odd = d;
  odd.vthread_h = false;
  EXPECT_ERROR_CONTAINS(t.lower(vdla_compiler::vdla_conv2d_point(t.space, odd)),
                        "two virtual threads split 1 tiles along oc");
}

TEST(VdlaTask, RebuildsFromItsWorkloadWithRangesAndFlops) {
  const Task t = vdla_task(c8(), true);
  EXPECT_EQ(t.key.rfind("vdla_conv2d:16x14x14x1x16:", 0), 0u) << t.key;
  EXPECT_TRUE(t.on_vdla());
  EXPECT_FALSE(t.on_gpu());
  EXPECT_DOUBLE_EQ(t.flops, 2.0 * c8().macs());
  ASSERT_EQ(t.inputs.size(), 4u);
  std::map<std::string, std::optional<runtime::ValueRange>> ranges;
  for (size_t i = 0; i < t.inputs.size(); ++i) ranges[t.inputs[i]->name()] = t.input_ranges[i];
  EXPECT_EQ(ranges.at("data"), (runtime::ValueRange{-128, 127}));
  EXPECT_EQ(ranges.at("kernel"), (runtime::ValueRange{-128, 127}));
  EXPECT_EQ(ranges.at("bias"), (runtime::ValueRange{-(1 << 18), 1 << 18}));
  EXPECT_EQ(ranges.at("shift"), (runtime::ValueRange{0, 31}));
  const Task u = Task::from_workload(t.template_name, t.workload, "vdla");
  EXPECT_EQ(u.key, t.key);
  EXPECT_EQ(u.space.size(), t.space.size());
  EXPECT_EQ(u.default_config.index(), t.default_config.index());
  // relu is part of the workload: another task.
  EXPECT_NE(vdla_task(c8(), false).key, t.key);
  EXPECT_ERROR_CONTAINS(Task::from_workload("conv2d_nchwc_x86", t.workload, "vdla"),
                        "schedules conv2d_nchwc, conv2d_nchwc_bf16, not 'vdla_conv2d'");
}

TEST(VdlaTask, LoopFeaturesTellConfigsApart) {
  const Task t = vdla_task(small(), false);
  std::set<std::vector<float>> seen;
  int lowered = 0;
  for (uint64_t i = 0; i < t.space.size() && lowered < 12; i += 7) {
    ir::PrimFunc f;
    try {
      f = t.lower(t.space.get(i));
    } catch (const Error&) {
      continue;  // does not fit
    }
    const std::vector<float> x = loop_features(f);
    EXPECT_EQ(x.size(), loop_features(t.lower(t.default_config)).size());
    seen.insert(x);
    ++lowered;
  }
  EXPECT_GE(lowered, 8);
  EXPECT_GE(seen.size(), static_cast<size_t>(lowered) - 2)
      << "loop features of distinct configs collide";
}

/// The task's reference written as .npy files, and its default's program as JSON.
struct Files {
  testing::TempDir dir{"kiln_vdla_run"};
  std::vector<std::string> inputs;
  std::string reference, program;
  std::vector<int64_t> oshape;
  TaskReference ref;
};

void write_files(const Task& t, Files& f) {
  f.ref = compute_reference(t);
  for (size_t i = 0; i < f.ref.inputs.size(); ++i) {
    f.inputs.push_back((f.dir.path() / ("in" + std::to_string(i) + ".npy")).string());
    runtime::save_npy(f.inputs.back(), f.ref.inputs[i]);
  }
  f.reference = (f.dir.path() / "ref.npy").string();
  runtime::save_npy(f.reference, f.ref.output);
  f.oshape = f.ref.output.shape();
  f.program = (f.dir.path() / "candidate.json").string();
  std::ofstream(f.program)
      << vdla_compiler::build_program(t.lower(t.default_config), vdla::Config{}).to_json().dump();
}

runtime::RunRequest vdla_request(const Files& f, const std::string& program,
                                 const std::string& reference) {
  runtime::RunRequest r;
  r.library = program;
  r.function = "candidate";
  r.device = TargetKind::kVdla;
  r.repeat = 3;  // does not apply: one run
  for (const std::string& in : f.inputs) r.args.push_back(runtime::RunArg::make_input(in));
  r.args.push_back(runtime::RunArg::make_output("int8", f.oshape, reference, 0, 0));
  return r;
}

TEST(VdlaRunner, MeasuresBitExactWithTheCycleModelsTime) {
  const Task t = vdla_task(small(), true);
  Files f;
  write_files(t, f);
  // The reference is not trivial: with shifts uniform in [0, 31] some channels saturate, some
  // vanish (relu, large shifts), and some channels (shifts near log2 of the sums) lie between.
  const int8_t* o = f.ref.output.data<int8_t>();
  const int64_t n = f.ref.output.num_elements();
  EXPECT_GT(std::count_if(o, o + n, [](int8_t v) { return v > 0 && v < 127; }), n / 32);
  EXPECT_GT(std::count(o, o + n, int8_t{0}), 0);
  EXPECT_GT(std::count(o, o + n, int8_t{127}), 0);

  const runtime::RunResult r =
      runtime::measure_in_child(vdla_request(f, f.program, f.reference), 60);
  ASSERT_EQ(r.error, ErrorKind::kNone) << r.message;
  ASSERT_EQ(r.costs_s.size(), 1u);
  EXPECT_GT(r.cycles, 0);
  EXPECT_DOUBLE_EQ(r.costs_s[0], static_cast<double>(r.cycles) / 200e6);
  EXPECT_EQ(r.max_error, 0);
  // Deterministic: the same cycles again.
  EXPECT_EQ(runtime::measure_in_child(vdla_request(f, f.program, f.reference), 60).cycles,
            r.cycles);

  // A reference off by one in one element: a wrong answer, naming it.
  runtime::NDArray wrong = runtime::load_npy(f.reference);
  wrong.data<int8_t>()[5] =
      static_cast<int8_t>(wrong.data<int8_t>()[5] == 127 ? 126 : wrong.data<int8_t>()[5] + 1);
  const std::string wrong_path = (f.dir.path() / "wrong.npy").string();
  runtime::save_npy(wrong_path, wrong);
  const runtime::RunResult w =
      runtime::measure_in_child(vdla_request(f, f.program, wrong_path), 60);
  EXPECT_EQ(w.error, ErrorKind::kWrongAnswer) << w.message;
  EXPECT_NE(w.message.find("at index 5"), std::string::npos) << w.message;
}

TEST(VdlaRunner, MalformedAndDeadlockedProgramsAreResults) {
  const Task t = vdla_task(small(), false);
  Files f;
  write_files(t, f);
  std::ifstream in(f.program);
  const kiln::Json good = kiln::Json::parse(
      std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
      "program");
  auto write = [&](const std::string& name, const std::string& text) {
    const std::string p = (f.dir.path() / name).string();
    std::ofstream(p) << text;
    return p;
  };
  // Not JSON, a field out of range, another name, an unbalanced token stream.
  const runtime::RunResult junk = runtime::measure_in_child(
      vdla_request(f, write("junk.json", "{\"name\": "), f.reference), 60);
  EXPECT_EQ(junk.error, ErrorKind::kRuntimeError);
  runtime::RunRequest other = vdla_request(f, f.program, f.reference);
  other.function = "other";
  const runtime::RunResult misnamed = runtime::measure_in_child(other, 60);
  EXPECT_EQ(misnamed.error, ErrorKind::kRuntimeError);
  EXPECT_NE(misnamed.message.find("is 'candidate', not 'other'"), std::string::npos)
      << misnamed.message;

  // A pop nobody pushes for, first in the stream: the compute module waits forever.
  kiln::Json::Object o = good.as_object("program");
  kiln::Json::Array calls = o.at("calls").as_array("calls");
  calls.insert(calls.begin(), kiln::Json::Object{{"kind", "pop"}, {"from", 1}, {"to", 2}});
  o["calls"] = std::move(calls);
  const runtime::RunResult stuck = runtime::measure_in_child(
      vdla_request(f, write("stuck.json", kiln::Json(o).dump()), f.reference), 60);
  EXPECT_EQ(stuck.error, ErrorKind::kRuntimeError) << stuck.message;
  EXPECT_NE(stuck.message.find("deadlock"), std::string::npos) << stuck.message;
}

TEST(VdlaTune, OneResNetLayerBeatsOrMatchesTheDefaultBitExact) {
  testing::TempDir dir("kiln_vdla_tune");
  records::RecordLog log = records::RecordLog::open((dir.path() / "log").string());
  const Task t = vdla_task(c8(), true);
  TuneOptions o;
  o.trials = 40;
  o.batch = 8;
  o.explorer = "xgb";
  o.features = "loop";
  o.local.device = local_device_fingerprint("vdla");
  Tuner tuner(log, o);
  const TaskResult r = tuner.tune(t);
  EXPECT_EQ(r.trials, 40);
  const std::vector<records::MeasureRecord> recs = log.records(t.key, "vdla");
  ASSERT_EQ(recs.size(), 40u);
  double default_cost = INFINITY, best_cost = INFINITY;
  int ok = 0;
  for (const records::MeasureRecord& rec : recs) {
    // Never a wrong answer: every measured config matched the reference bit for bit (the
    // runner checks int8 outputs exactly); configs that do not fit are compile errors.
    EXPECT_TRUE(rec.error == ErrorKind::kNone || rec.error == ErrorKind::kCompileError)
        << error_kind_name(rec.error) << ": " << rec.error_msg;
    EXPECT_EQ(rec.device, runtime::vdla_device_description());
    if (rec.error != ErrorKind::kNone) continue;
    ++ok;
    ASSERT_EQ(rec.costs_s.size(), 1u);  // deterministic: one run
    best_cost = std::min(best_cost, rec.cost());
    if (rec.config_index == t.default_config.index()) default_cost = rec.cost();
  }
  ASSERT_TRUE(std::isfinite(default_cost)) << "the default was not measured";
  EXPECT_GE(ok, 10);
  EXPECT_LE(best_cost, default_cost);
  std::cout << "vdla C8: default " << default_cost * 200e6 << " cycles, tuned best "
            << best_cost * 200e6 << " cycles (" << ok << " of 40 configs fit)\n";

  // The best config's program, run here, is the reference bit for bit.
  const records::MeasureRecord best = *log.best(t.key, "vdla");
  TaskReference ref = compute_reference(t);
  std::vector<runtime::NDArray> arrays = std::move(ref.inputs);
  arrays.push_back(runtime::NDArray::empty(ref.output.shape(), runtime::kInt8));
  const std::string path = (dir.path() / "best.json").string();
  std::ofstream(path) << vdla_compiler::build_program(t.lower(t.space.get(best.config_index)),
                                                      vdla::Config{})
                             .to_json()
                             .dump();
  const runtime::VdlaRun run =
      runtime::run_vdla_program(path, "candidate", arrays, {false, false, false, false, true});
  EXPECT_EQ(std::memcmp(arrays[4].data(), ref.output.data(),
                        static_cast<size_t>(ref.output.num_elements())),
            0);
  EXPECT_DOUBLE_EQ(run.seconds, best.cost());
}

}  // namespace
}  // namespace kiln::autotune
