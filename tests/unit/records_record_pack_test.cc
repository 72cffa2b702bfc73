// Record packs (records/record_pack.h) and the record log's side of them: a round trip from one
// log into an empty one (the same records, in order, the same bests, and the task sources the
// log knew), duplicates dropped, every kind of bad line refused by its number with nothing
// written, a version 1 pack (records only) still read, exporting nothing, the log's keys,
// append_all's one batch, and opening a log that is missing or in use.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "base/fnv1a.h"
#include "base/json.h"
#include "records/record_log.h"
#include "records/record_pack.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"
#include "tests/common/test_record.h"

namespace kiln::records {
namespace {

namespace fs = std::filesystem;
using kiln::testing::TempDir;

const char* kTarget = "llvm -mcpu=znver4";
const char* kOther = "opencl";
const char* kEpyc = "AMD EPYC 9R14 (2 cores)";
const TaskSource kConvSource{"conv2d_nchwc_x86", R"({"c":2,"op":"conv2d"})"};

MeasureRecord make(const std::string& task, uint64_t config, std::vector<double> costs,
                   const std::string& target = kTarget, const std::string& device = kEpyc) {
  return kiln::testing::test_record(task, config, std::move(costs), target, device);
}

MeasureRecord failed(const std::string& task, uint64_t config) {
  MeasureRecord r = make(task, config, {});
  r.device = "worker";
  r.error = ErrorKind::kCompileError;
  r.error_msg = "does not fit";
  return r;
}

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

void write(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  for (const std::string& l : lines) f << l << "\n";
}

/// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from << " in " << text;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

/// A log of target kTarget's two tasks (records of both interleaved, one an error, one
/// contended), two of its emulated lane and two of another target; it knows the sources of
/// "conv" and of the other target's "matmul", not of "pool".
struct Farm {
  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("farm"));
  std::vector<MeasureRecord> device;  ///< kTarget's device lane, in append order

  Farm() {
    log.note_task("conv", kConvSource);
    log.note_task("matmul", {"matmul_gpu", R"({"m":64})"});
    for (uint64_t i = 0; i < 8; ++i) {
      MeasureRecord r = i == 5  ? failed("conv", i)
                        : i % 3 ? make("conv", i, {1e-3 * (9 - i), 1.1e-3 * (9 - i)})
                                : make("pool", i, {2e-4 / (i + 1)});
      if (i == 4) r.contended = true;
      log.append(r);
      device.push_back(r);
      if (i < 2) {
        MeasureRecord e = make("conv", i, {1e-4});
        e.emulated = true;
        e.device = "qemu-user on " + std::string(kEpyc);
        log.append(e);
        log.append(make("matmul", i, {5e-5}, kOther, "PoCL"));
      }
    }
  }
};

TEST(RecordPack, RoundTripKeepsTheRecordsTheirOrderAndTheBests) {
  Farm farm;
  const std::string pack = farm.tmp.file("znver4.jsonl");
  const PackHeader h = farm.log.export_pack(pack, kTarget);
  EXPECT_EQ(h.target, kTarget);
  EXPECT_EQ(h.lane, Lane::kDevice);
  EXPECT_EQ(h.count, 8u);
  EXPECT_EQ(h.tasks, 2u);
  EXPECT_EQ(h.sources, 1u) << "the log knows conv's source, not pool's";
  EXPECT_EQ(h.devices, (std::vector<std::string>{kEpyc, "worker"}));
  EXPECT_GT(h.created_ms, 1700000000000);

  // The file: the header, the task source, then one line per record; each line ends with its
  // checksum.
  const std::vector<std::string> lines = lines_of(read(pack));
  ASSERT_EQ(lines.size(), 10u);
  EXPECT_EQ(lines[0], pack_header_line(h));
  const Json first = Json::parse(lines[0]);
  EXPECT_EQ(first.at("format", "").as_string(""), "kiln.records");
  EXPECT_EQ(first.at("version", "").as_int(""), 2);
  EXPECT_EQ(first.at("count", "").as_int(""), 8);
  EXPECT_EQ(first.at("sources", "").as_int(""), 1);
  EXPECT_EQ(lines[1], pack_source_line("conv", kConvSource));
  EXPECT_EQ(lines[1].substr(0, 30), R"({"source":{"task":"conv","temp)");
  for (size_t i = 2; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i], pack_record_line(farm.device[i - 2]));
    EXPECT_NE(lines[i].rfind(",\"fnv1a\":\""), std::string::npos) << lines[i];
  }
  // The source's checksum is the FNV-1a of its object's canonical text, as a record's is of its.
  const Json source = Json::parse(lines[1]);
  EXPECT_EQ(source.at("fnv1a", "").as_string(""), [&] {
    char hex[17];
    const std::string text = source.at("source", "").dump();
    std::snprintf(hex, sizeof hex, "%016llx",
                  static_cast<unsigned long long>(fnv1a64(text.data(), text.size())));
    return std::string(hex);
  }());

  // What a cost model reads.
  const RecordPack read = read_pack(pack);
  EXPECT_EQ(read.header, h);
  EXPECT_EQ(read.records, farm.device);
  EXPECT_EQ(read.sources, (PackSources{{"conv", kConvSource}}));

  // Into an empty log: the same records in the same order, the same bests and counts.
  TempDir other;
  RecordLog b = RecordLog::open(other.file("b"));
  const RecordLog::ImportReport r = b.import_pack(pack);
  EXPECT_EQ(r.imported, 8u);
  EXPECT_EQ(r.skipped, 0u);
  EXPECT_EQ(r.sources, 1u);
  EXPECT_EQ(r.header, h);
  EXPECT_TRUE(r.log_devices.empty());
  EXPECT_EQ(r.pack_devices, (std::vector<std::string>{kEpyc}));
  EXPECT_EQ(b.all(), farm.device);
  for (const char* task : {"conv", "pool"}) {
    ASSERT_TRUE(b.best(task, kTarget).has_value()) << task;
    EXPECT_EQ(*b.best(task, kTarget), *farm.log.best(task, kTarget)) << task;
    EXPECT_EQ(b.count(task, kTarget), farm.log.count(task, kTarget)) << task;
    EXPECT_EQ(b.records(task, kTarget), farm.log.records(task, kTarget)) << task;
  }
  EXPECT_TRUE(b.measured("conv", kTarget, 5)) << "an error record is knowledge too";
  // The sources travelled: the importing log can rebuild conv (and read its records' features).
  EXPECT_EQ(b.task_source("conv"), kConvSource);
  EXPECT_FALSE(b.task_source("pool").has_value());
  EXPECT_FALSE(b.task_source("matmul").has_value()) << "another target's task stays out";
  ASSERT_EQ(b.history(kTarget).size(), 1u);
  EXPECT_EQ(b.history(kTarget)[0].records.size(), 5u) << "conv's records, error included";
  ASSERT_EQ(b.keys().size(), 1u);
  EXPECT_EQ(b.keys()[0].sources, 1u);
  EXPECT_TRUE(b.tasks(kTarget, Lane::kEmulated).empty()) << "the other lane stays out";
  EXPECT_TRUE(b.tasks(kOther).empty()) << "the other target stays out";

  // The emulated lane is a key of its own.
  const PackHeader e =
      farm.log.export_pack(farm.tmp.file("emulated.jsonl"), kTarget, Lane::kEmulated);
  EXPECT_EQ(e.lane, Lane::kEmulated);
  EXPECT_EQ(e.count, 2u);
  EXPECT_EQ(e.sources, 1u);
  const RecordLog::ImportReport er = b.import_pack(farm.tmp.file("emulated.jsonl"));
  EXPECT_EQ(er.imported, 2u);
  EXPECT_EQ(er.sources, 0u) << "conv's source is known already";
  EXPECT_EQ(*b.best("conv", kTarget, Lane::kEmulated),
            *farm.log.best("conv", kTarget, Lane::kEmulated));
  EXPECT_EQ(*b.best("conv", kTarget), *farm.log.best("conv", kTarget)) << "the lanes never mix";
}

TEST(RecordPack, RecordsAlreadyPresentAreSkipped) {
  Farm farm;
  const std::string pack = farm.tmp.file("p.jsonl");
  farm.log.export_pack(pack, kTarget);
  // Into the log it came from: every record is there.
  RecordLog::ImportReport r = farm.log.import_pack(pack);
  EXPECT_EQ(r.imported, 0u);
  EXPECT_EQ(r.skipped, 8u);
  EXPECT_EQ(r.sources, 0u);
  EXPECT_EQ(farm.log.size(), 12u);

  TempDir other;
  RecordLog b = RecordLog::open(other.file("b"));
  // A log that knows another source of conv keeps its own.
  const TaskSource own{"conv2d_nchwc_x86", R"({"c":2,"op":"conv2d","layout":"NCHW16c"})"};
  b.note_task("conv", own);
  r = b.import_pack(pack);
  EXPECT_EQ(r.imported, 8u);
  EXPECT_EQ(r.sources, 0u);
  EXPECT_EQ(b.task_source("conv"), own);
  r = b.import_pack(pack);
  EXPECT_EQ(r.imported, 0u);
  EXPECT_EQ(r.skipped, 8u);
  EXPECT_EQ(b.size(), 8u);
  EXPECT_EQ(r.log_devices, (std::vector<std::string>{kEpyc}));

  // The farm measures more; its next pack adds only that.
  farm.log.append(make("conv", 100, {1e-5}));
  farm.log.note_task("pool", {"pool2d_x86", R"({"k":2})"});
  farm.log.export_pack(pack, kTarget);
  r = b.import_pack(pack);
  EXPECT_EQ(r.imported, 1u);
  EXPECT_EQ(r.skipped, 8u);
  EXPECT_EQ(r.sources, 1u) << "pool's source is new; the records are not";
  EXPECT_EQ(b.task_source("pool"), (TaskSource{"pool2d_x86", R"({"k":2})"}));
  EXPECT_EQ(b.best("conv", kTarget)->config_index, 100u);

  // The same config measured again (another time) is another record, not a duplicate; the same
  // record twice in one pack is imported once.
  MeasureRecord again = make("conv", 100, {2e-5});
  again.timestamp_ms += 1000;
  const std::vector<MeasureRecord> recs = {again, again};
  write(farm.tmp.file("twice.jsonl"),
        {pack_header_line(pack_header(kTarget, Lane::kDevice, recs, {}, 1)),
         pack_record_line(again), pack_record_line(again)});
  r = b.import_pack(farm.tmp.file("twice.jsonl"));
  EXPECT_EQ(r.imported, 1u);
  EXPECT_EQ(r.skipped, 1u);
  EXPECT_EQ(b.count("conv", kTarget), 7u);
}

/// A good pack of three records of kTarget and the source of "conv", as lines (the header first,
/// the source last), and the way to make a bad one from it.
struct BadCase {
  std::string name;
  std::function<std::vector<std::string>(std::vector<std::string>)> spoil;
  std::string error;  ///< what the message must contain
};

TEST(RecordPack, BadLinesAreRefusedByNumberAndNothingIsWritten) {
  const std::vector<MeasureRecord> recs = {make("conv", 1, {1e-3}), make("conv", 2, {2e-3}),
                                           make("pool", 3, {3e-4})};
  const PackSources sources = {{"conv", kConvSource}};
  std::vector<std::string> good = {
      pack_header_line(pack_header(kTarget, Lane::kDevice, recs, sources, 1))};
  for (const MeasureRecord& r : recs) good.push_back(pack_record_line(r));
  good.push_back(pack_source_line("conv", kConvSource));  // line 5: any order reads

  auto line = [](size_t i, std::function<std::string(const std::string&)> f) {
    return [i, f](std::vector<std::string> l) {
      l[i] = f(l[i]);
      return l;
    };
  };
  auto with = [](size_t i, std::string text) {
    return [i, text](std::vector<std::string> l) {
      l[i] = text;
      return l;
    };
  };
  MeasureRecord elsewhere = make("pool", 3, {3e-4}, kOther);
  MeasureRecord emulated = recs[2];
  emulated.emulated = true;
  MeasureRecord negative = recs[2];
  negative.costs_s = {-1};
  const std::string header = good[0];
  auto append = [](std::string text) {
    return [text](std::vector<std::string> l) {
      l.push_back(text);
      return l;
    };
  };
  auto source_with = [](std::string from, std::string to) {
    return [from, to](std::vector<std::string> l) {
      l[4] = replaced(l[4], from, to);
      return l;
    };
  };

  const std::vector<BadCase> cases = {
      {"not JSON", with(2, "{\"version\":1,"), "bad.jsonl:3: "},
      {"not an object", with(2, "[1, 2]"),
       "bad.jsonl:3: a line after the header must be a JSON object (a record or a task source)"},
      {"a missing field",
       line(2, [](const std::string& s) { return replaced(s, "\"gflops\":500,", ""); }),
       "bad.jsonl:3: field 'gflops' is missing"},
      {"a field of the wrong type",
       line(2, [](const std::string& s) { return replaced(s, "[0.002]", "\"fast\""); }),
       "bad.jsonl:3: field 'costs' must be an array"},
      {"an unknown field",
       line(1, [](const std::string& s) { return replaced(s, "{", "{\"speed\":1,"); }),
       "bad.jsonl:2: unknown record field 'speed'"},
      {"no checksum",
       line(3, [](const std::string& s) { return s.substr(0, s.rfind(",\"fnv1a\"")) + "}"; }),
       "bad.jsonl:4: field 'fnv1a' is missing"},
      {"a tampered cost",
       line(2, [](const std::string& s) { return replaced(s, "[0.002]", "[0.0002]"); }),
       "bad.jsonl:3: the record's checksum does not match its fields"},
      {"a tampered target",
       line(3, [](const std::string& s) { return replaced(s, "znver4", "znver5"); }),
       "bad.jsonl:4: the record's checksum does not match"},
      {"a tampered checksum",
       line(1,
            [](const std::string& s) {
              return s.substr(0, s.size() - 4) + (s[s.size() - 4] == '0' ? "1" : "0") + "\"}";
            }),
       "bad.jsonl:2: the record's checksum does not match"},
      {"another target", with(3, pack_record_line(elsewhere)),
       "bad.jsonl:4: a record of target 'opencl' in a pack of target 'llvm -mcpu=znver4'"},
      {"another lane", with(3, pack_record_line(emulated)),
       "bad.jsonl:4: a record of the emulated lane in a pack of the device lane"},
      {"a negative cost", with(3, pack_record_line(negative)),
       "bad.jsonl:4: field 'costs' of task pool holds -1"},
      {"no header",
       [](std::vector<std::string> l) {
         l.erase(l.begin());
         return l;
       },
       "bad.jsonl:1: not a record pack: its first line must be the header"},
      {"a header of another version",
       line(0, [](const std::string& s) { return replaced(s, "\"version\":2", "\"version\":3"); }),
       "bad.jsonl:1: a pack of version 3; this Kiln reads versions 1 to 2"},
      {"a header of another format",
       line(0, [](const std::string& s) { return replaced(s, "kiln.records", "tvm.log"); }),
       "its format is \"tvm.log\""},
      {"a header without its target",
       line(0,
            [](const std::string& s) {
              return replaced(s, ",\"target\":\"llvm -mcpu=znver4\"", "");
            }),
       "bad.jsonl:1: header field 'target' is missing"},
      {"a header of another lane",
       line(0, [](const std::string& s) { return replaced(s, "\"device\"", "\"gpu\""); }),
       "header field 'lane' must be \"device\" or \"emulated\""},
      {"a line removed",
       [](std::vector<std::string> l) {
         l.erase(l.begin() + 3);
         return l;
       },
       "bad.jsonl:1: the header says 3 records, the file holds 2"},
      {"tasks that do not match",
       line(0, [](const std::string& s) { return replaced(s, "\"tasks\":2", "\"tasks\":3"); }),
       "the header says 3 tasks, the records hold 2"},
      {"a blank line before a bad one",
       [&](std::vector<std::string> l) {
         l.insert(l.begin() + 1, "");
         l[3] = "nonsense";
         return l;
       },
       "bad.jsonl:4: "},
      {"an empty file", [](std::vector<std::string>) { return std::vector<std::string>{}; },
       "bad.jsonl: empty; a record pack starts with its header"},
      // Task sources, line 5.
      {"a source that is not an object", with(4, R"({"source":"conv","fnv1a":"0000000000000000"})"),
       "bad.jsonl:5: field 'source' must be an object"},
      {"an unknown field of a source line", source_with("{", R"({"by":"me",)"),
       "bad.jsonl:5: unknown source line field 'by'"},
      {"an unknown field of a source", source_with(R"("task":)", R"("shape":[1],"task":)"),
       "bad.jsonl:5: unknown source field 'shape'"},
      {"a source without its template", source_with(R"("template":"conv2d_nchwc_x86",)", ""),
       "bad.jsonl:5: field 'source.template' is missing"},
      {"a source of the wrong type",
       source_with(R"("workload":"{\"c\":2,\"op\":\"conv2d\"}")", R"("workload":{"c":2})"),
       "bad.jsonl:5: field 'source.workload' must be a string"},
      {"a source without its checksum",
       line(4, [](const std::string& s) { return s.substr(0, s.rfind(",\"fnv1a\"")) + "}"; }),
       "bad.jsonl:5: field 'fnv1a' is missing (every task source of a pack carries"},
      {"a tampered source", source_with("conv2d_nchwc_x86", "conv2d_nchw_x86"),
       "bad.jsonl:5: the task source's checksum does not match its fields"},
      {"a source with an empty template", with(4, pack_source_line("conv", {"", "{}"})),
       "bad.jsonl:5: the template of task 'conv' must be non-empty"},
      {"a source with an oversized workload",
       with(4, pack_source_line("conv", {"conv2d_nchwc_x86", std::string(70000, 'w')})),
       "bad.jsonl:5: the workload of task 'conv' must be non-empty, hold no NUL character and be "
       "at most 65536 bytes (it has 70000)"},
      {"a task's source twice", append(pack_source_line("conv", {"conv2d_nchwc_x86", "{}"})),
       "bad.jsonl:6: a second source of task 'conv' (the first is on line 5)"},
      {"a source of a task no record has",
       with(4, pack_source_line("dense", {"dense_x86", R"({"n":1})"})),
       "bad.jsonl:5: a source of task 'dense', but no record of the pack is of that task"},
      {"a source line removed",
       [](std::vector<std::string> l) {
         l.pop_back();
         return l;
       },
       "bad.jsonl:1: the header says 1 task sources, the file holds 0"},
      {"a header without its sources",
       line(0, [](const std::string& s) { return replaced(s, "\"sources\":1,", ""); }),
       "bad.jsonl:1: header field 'sources' is missing"},
      {"sources in a version 1 header",
       line(0, [](const std::string& s) { return replaced(s, "\"version\":2", "\"version\":1"); }),
       "bad.jsonl:1: unknown header field 'sources' (a pack of version 1 has none)"},
      {"a source line in a version 1 pack",
       line(0,
            [](const std::string& s) {
              return replaced(replaced(s, "\"sources\":1,", ""), "\"version\":2", "\"version\":1");
            }),
       "bad.jsonl:5: a task source in a pack of version 1 (sources came with version 2)"},
  };

  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("log"));
  log.append(make("conv", 9, {5e-3}));
  const std::string path = tmp.file("bad.jsonl");
  write(path, good);
  ASSERT_NO_THROW(read_pack(path)) << "the unspoiled pack is good";
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    write(path, c.spoil(good));
    EXPECT_ERROR_CONTAINS(log.import_pack(path), c.error);
    EXPECT_EQ(log.size(), 1u) << "nothing is written when any line is bad";
    EXPECT_EQ(log.count("pool", kTarget), 0u);
    EXPECT_FALSE(log.task_source("conv").has_value()) << "not even a source";
  }
  EXPECT_ERROR_CONTAINS(log.import_pack(tmp.file("missing.jsonl")),
                        "cannot read '" + tmp.file("missing.jsonl") + "'");
  // A JSON-lines file of bare records is not a pack, and says so.
  write(path, {record_to_string(recs[0])});
  EXPECT_ERROR_CONTAINS(log.import_pack(path), "it holds a record");
}

TEST(RecordPack, AVersionOnePackStillReadsWithNoSources) {
  // As Kiln wrote packs before task sources (fuzz/corpus/pack/seed-ok.jsonl of that time).
  const std::vector<std::string> v1 = {
      R"({"count":3,"created_ms":1700000000000,"devices":["AMD EPYC 9R14 x2"],)"
      R"("format":"kiln.records","lane":"device","target":"llvm -mcpu=znver4","tasks":2,)"
      R"("version":1})",
      R"({"config":"tile=[7, 1]","config_index":7,"costs":[0.5],"device":"AMD EPYC 9R14 x2",)"
      R"("error":"none","error_msg":"","gflops":2,"search_seed":7,"target":"llvm -mcpu=znver4",)"
      R"("task":"dense_x86:1x512:0123456789abcdef","timestamp_ms":1700000000007,"version":1,)"
      R"("fnv1a":"14070cd0cac3390f"})",
      R"({"config":"tile=[3, 1]","config_index":3,"costs":[0.25],"device":"AMD EPYC 9R14 x2",)"
      R"("error":"none","error_msg":"","gflops":4,"search_seed":7,"target":"llvm -mcpu=znver4",)"
      R"("task":"conv2d_nchwc_x86:1x4x7x7x16:fedcba9876543210","timestamp_ms":1700000000003,)"
      R"("version":1,"fnv1a":"eb67ef0e3412fa8b"})",
      R"({"config":"tile=[9, 1]","config_index":9,"costs":[],"device":"AMD EPYC 9R14 x2",)"
      R"("error":"compile_error","error_msg":"does not lower","gflops":0,"search_seed":7,)"
      R"("target":"llvm -mcpu=znver4","task":"dense_x86:1x512:0123456789abcdef",)"
      R"("timestamp_ms":1700000000007,"version":1,"fnv1a":"16eb9bf4116e1e03"})",
  };
  TempDir tmp;
  const std::string path = tmp.file("v1.jsonl");
  write(path, v1);
  const RecordPack pack = read_pack(path);
  EXPECT_EQ(pack.header.target, kTarget);
  EXPECT_EQ(pack.header.count, 3u);
  EXPECT_EQ(pack.header.tasks, 2u);
  EXPECT_EQ(pack.header.sources, 0u);
  EXPECT_TRUE(pack.sources.empty());
  ASSERT_EQ(pack.records.size(), 3u);
  EXPECT_EQ(pack.records[1].config_index, 3u);
  EXPECT_EQ(pack.records[2].error, ErrorKind::kCompileError);

  RecordLog log = RecordLog::open(tmp.file("log"));
  const RecordLog::ImportReport r = log.import_pack(path);
  EXPECT_EQ(r.imported, 3u);
  EXPECT_EQ(r.sources, 0u);
  EXPECT_EQ(log.best("dense_x86:1x512:0123456789abcdef", kTarget)->config_index, 7u);
  EXPECT_TRUE(log.history(kTarget).empty()) << "no source, nothing for a cost model";
}

TEST(RecordPack, ExportingNothingSaysWhatTheLogHolds) {
  Farm farm;
  const std::string pack = farm.tmp.file("cpu.jsonl");
  EXPECT_ERROR_CONTAINS(
      farm.log.export_pack(pack, "cpu"),
      "holds no records of target 'cpu' in the device lane; it holds 'llvm -mcpu=znver4' (8 "
      "records of 2 tasks), 'llvm -mcpu=znver4' emulated lane (2 records of 1 task), 'opencl' "
      "(2 records of 1 task)");
  EXPECT_ERROR_CONTAINS(farm.log.export_pack(pack, kOther, Lane::kEmulated),
                        "no records of target 'opencl' in the emulated lane");
  EXPECT_FALSE(fs::exists(pack)) << "no pack is written";

  TempDir tmp;
  RecordLog empty = RecordLog::open(tmp.file("empty"));
  EXPECT_ERROR_CONTAINS(empty.export_pack(pack, kTarget), "it holds nothing");

  // A pack that cannot be written names itself and leaves nothing behind.
  EXPECT_ERROR_CONTAINS(farm.log.export_pack(tmp.file("no/such/folder/p.jsonl"), kTarget),
                        "cannot write '" + tmp.file("no/such/folder/p.jsonl") + "'");
  for (const auto& e : fs::directory_iterator(tmp.path())) {
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  }
}

TEST(RecordLog, KeysAreTargetsInLanes) {
  Farm farm;
  const std::vector<RecordLog::Key> keys = farm.log.keys();
  ASSERT_EQ(keys.size(), 3u);
  EXPECT_EQ(keys[0].target, kTarget);
  EXPECT_EQ(keys[0].lane, Lane::kDevice);
  EXPECT_EQ(keys[0].tasks, 2u);
  EXPECT_EQ(keys[0].records, 8u);
  EXPECT_EQ(keys[0].sources, 1u) << "conv's";
  EXPECT_EQ(keys[1].target, kTarget);
  EXPECT_EQ(keys[1].lane, Lane::kEmulated);
  EXPECT_EQ(keys[1].records, 2u);
  EXPECT_EQ(keys[1].sources, 1u) << "a task's source serves both lanes";
  EXPECT_EQ(keys[2].target, kOther);
  EXPECT_EQ(keys[2].records, 2u);
  EXPECT_EQ(keys[2].sources, 1u) << "matmul's";
  // A target that is a prefix of another is its own key.
  farm.log.append(make("conv", 1, {1.0}, "llvm"));
  const std::vector<RecordLog::Key> more = farm.log.keys();
  ASSERT_EQ(more.size(), 4u);
  EXPECT_EQ(more[0].target, "llvm");
  EXPECT_EQ(more[0].records, 1u);
  EXPECT_EQ(more[1].records, 8u);
}

TEST(RecordLog, AppendAllIsOneBatchOrNothing) {
  TempDir tmp;
  RecordLog log = RecordLog::open(tmp.file("log"));
  log.append(make("conv", 0, {1.0}));
  std::vector<MeasureRecord> recs;
  for (uint64_t i = 1; i <= 50; ++i) recs.push_back(make(i % 2 ? "conv" : "pool", i, {1.0 / i}));
  EXPECT_EQ(log.append_all(recs), 1u);
  EXPECT_EQ(log.size(), 51u);
  EXPECT_EQ(log.best("conv", kTarget)->config_index, 49u);
  EXPECT_EQ(log.best("pool", kTarget)->config_index, 50u);
  EXPECT_EQ(log.count("pool", kTarget), 25u);
  EXPECT_EQ(log.append_all({}), 51u);
  // One malformed record: none is written.
  recs = {make("conv", 60, {1.0}), make("conv", 61, {1.0}, "")};
  EXPECT_ERROR_CONTAINS(log.append_all(recs), "field 'target'");
  EXPECT_EQ(log.size(), 51u);
  EXPECT_FALSE(log.measured("conv", kTarget, 60));
}

TEST(RecordLog, OpenExistingCreatesNothing) {
  TempDir tmp;
  EXPECT_ERROR_CONTAINS(RecordLog::open_existing(tmp.file("missing")),
                        "record log '" + tmp.file("missing") + "': no such folder");
  EXPECT_FALSE(fs::exists(tmp.file("missing")));
  fs::create_directories(tmp.file("plain"));
  EXPECT_ERROR_CONTAINS(RecordLog::open_existing(tmp.file("plain")),
                        "the folder holds no record log");
  EXPECT_TRUE(fs::is_empty(tmp.file("plain")));
  { RecordLog::open(tmp.file("log")).append(make("conv", 1, {1.0})); }
  EXPECT_EQ(RecordLog::open_existing(tmp.file("log")).size(), 1u);
  // In use (here by this process; kilnd's is another's): refused at once, saying so.
  RecordLog held = RecordLog::open(tmp.file("log"));
  EXPECT_ERROR_CONTAINS(RecordLog::open_existing(tmp.file("log")), "in use by another process");
}

}  // namespace
}  // namespace kiln::records
