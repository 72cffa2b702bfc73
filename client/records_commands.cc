// `kiln records`: a record log's keys, and record packs out of and into it (records/record_pack.h),
// so that a team can share what one farm learned.
//
//   kiln records list kiln-state/records
//   kiln records export kiln-state/records --key "llvm -mcpu=znver4" -o znver4.jsonl
//   kiln records import znver4.jsonl --records other-farm/records
//
// A thin layer over RecordLog::keys / export_pack / import_pack.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "client/cli.h"
#include "client/commands.h"
#include "records/record_log.h"

namespace {

using kiln::cli::Args;
using kiln::records::Lane;
using kiln::records::RecordLog;

constexpr const char* kGroup = "record logs (kiln tune --records DIR, a kilnd's STATE/records)";

constexpr const char* kKeyNotes =
    "A pack holds one key of a log: the records of one target string (as kiln tune --target or "
    "kiln submit --target gave it) in one lane, the device's or, with --emulated, those measured "
    "under emulation (qemu-user agents). Records are filed, and a tuner finds each task's best, "
    "by target and task; a farm's device key is not in a record, and kiln devices shows the "
    "target each key's agents measure for. A pack also carries the sources the log knows of its "
    "tasks (their template and workload, noted by kiln tune and the farm's drivers), so that the "
    "importing log's cost model can learn from its records too. kiln records list DIR shows a "
    "log's keys, with how many of each key's tasks have a source. ";

constexpr const char* kLockNotes =
    "A log that a running kilnd (its STATE/records) or kiln tune holds is locked: the command "
    "fails at once, saying so; stop kilnd first. Exit codes: 0 done, 1 a failure (\"error: ...\": "
    "a bad pack, naming its line; a missing or locked log; nothing to export), 2 a mistake on the "
    "command line.";

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& e : v) s += (s.empty() ? "" : "; ") + e;
  return s;
}

std::string key_text(const std::string& target, Lane lane) {
  return "target '" + target + "' (" + kiln::records::lane_name(lane) + " lane)";
}

// ---- kiln records export -----------------------------------------------------------------------

int export_main(const Args& args) {
  const std::string& dir = args.only_operand("DIR (a record log)");
  const Lane lane = args.has("--emulated") ? Lane::kEmulated : Lane::kDevice;
  const std::string out = args.get("-o");
  const RecordLog log = RecordLog::open_existing(dir);
  const kiln::records::PackHeader h = log.export_pack(out, args.get("--key"), lane);
  std::cout << "wrote " << out << ": " << h.count << (h.count == 1 ? " record" : " records")
            << " of " << h.tasks << (h.tasks == 1 ? " task" : " tasks") << " (" << h.sources
            << " with " << (h.sources == 1 ? "its" : "their") << " source), "
            << key_text(h.target, h.lane) << ", measured on " << join(h.devices) << "\n";
  return 0;
}

// ---- kiln records import -----------------------------------------------------------------------

int import_main(const Args& args) {
  const std::string& pack = args.only_operand("PACK.jsonl");
  const std::string dir = args.get("--records");
  RecordLog log = RecordLog::open(dir);
  const RecordLog::ImportReport r = log.import_pack(pack);
  const kiln::records::PackHeader& h = r.header;
  std::cout << "imported " << r.imported << ", skipped " << r.skipped << " already present, "
            << r.sources << (r.sources == 1 ? " new task source: " : " new task sources: ")
            << key_text(h.target, h.lane) << " into " << dir << "\n";
  // Timings of one target string from other machines now share this log's bests: say so.
  std::set<std::string> before(r.log_devices.begin(), r.log_devices.end());
  std::vector<std::string> others;
  for (const std::string& d : r.pack_devices) {
    if (!before.count(d)) others.push_back(d);
  }
  if (!before.empty() && !others.empty() && r.imported > 0) {
    std::cerr << "note: the log's timed records of this target were measured on "
              << join(r.log_devices) << "; the pack's also on " << join(others)
              << ": their timings now share each task's best\n";
  }
  return 0;
}

// ---- kiln records list -------------------------------------------------------------------------

int list_main(const Args& args) {
  const std::string& dir = args.only_operand("DIR (a record log)");
  const RecordLog log = RecordLog::open_existing(dir);
  std::vector<std::vector<std::string>> rows = {{"TARGET", "LANE", "TASKS", "RECORDS", "SOURCES"}};
  for (const RecordLog::Key& k : log.keys()) {
    rows.push_back({k.target, kiln::records::lane_name(k.lane), std::to_string(k.tasks),
                    std::to_string(k.records), std::to_string(k.sources)});
  }
  if (rows.size() == 1) {
    std::cout << "record log '" << dir << "' is empty\n";
    return 0;
  }
  print_table(rows);
  return 0;
}

}  // namespace

const kiln::cli::Command& records_export_command() {
  static const kiln::cli::Command c{
      .name = "records export",
      .operands = "DIR",
      .summary = "write one key of a record log (a target's records) as a pack file",
      .flags = {{"--key", "TARGET", "the target string whose records to export", true},
                {"-o", "PACK.jsonl", "the pack to write (replaced if it exists)", true},
                {"--emulated", "", "the records measured under emulation (default: a device's)"}},
      .notes = std::string(kKeyNotes) +
               "The pack is JSON lines: a header {\"format\":\"kiln.records\", \"version\":2, "
               "\"target\":..., \"lane\":..., \"count\":N, \"sources\":S, ...}, then one line "
               "per task source ({\"source\":{\"task\":..., \"template\":..., "
               "\"workload\":...}, ...}) and one per record in the log's order, each with "
               "\"fnv1a\", the FNV-1a 64 of its JSON text, so that a line changed by hand is "
               "refused at import. It is written whole or not at all; a key with no records is "
               "an error listing the log's keys. " +
               kLockNotes,
      .main = export_main,
      .group = kGroup,
  };
  return c;
}

const kiln::cli::Command& records_import_command() {
  static const kiln::cli::Command c{
      .name = "records import",
      .operands = "PACK.jsonl",
      .summary = "add a pack's records to a record log, dropping those it holds already",
      .flags = {{"--records", "DIR", "the record log (created if missing)", true}},
      .notes = std::string(
                   "Every line is checked before any record is written, and one bad line "
                   "refuses the whole pack, naming its line number and what is wrong: a header "
                   "missing or of another version, a line that is not JSON, a field missing, "
                   "unknown or of the wrong type, a checksum that does not match the record or "
                   "task source (the line was changed), a record of another target or lane than "
                   "the header's, a task source given twice or for a task no record has, a count "
                   "that does not match. Version 1 packs (records only) still import. A record "
                   "equal in every field to one the log holds (or to an earlier one of the pack) "
                   "is skipped; the rest are written as one batch, all or none, and the task "
                   "sources the log lacks are noted (a task whose source the log knows keeps "
                   "it). Prints \"imported N, skipped M already present, S new task sources\"; "
                   "a note on stderr when the pack's timings come from other machines than the "
                   "log's of the same target. kiln tune --records DIR then starts from them (a "
                   "task with --trials records already is not measured again), and its cost "
                   "model learns from them. ") +
               kKeyNotes + kLockNotes,
      .main = import_main,
      .group = kGroup,
  };
  return c;
}

const kiln::cli::Command& records_list_command() {
  static const kiln::cli::Command c{
      .name = "records list",
      .operands = "DIR",
      .summary = "a record log's keys (targets and lanes) with their tasks, records and sources",
      .flags = {},
      .notes = std::string(kKeyNotes) + kLockNotes,
      .main = list_main,
      .group = kGroup,
  };
  return c;
}
