// A record pack: what one farm learned on one kind of device, as a file a team hands to another
// (`kiln records export` writes one from a record log, `kiln records import` adds one to a log;
// a cost model can read one as it is). JSON lines: a header, then the sources of the records'
// tasks (how a task is rebuilt, so that a log's cost model can read the features of the records:
// record.h, TaskSource) and the records, one per line, each carrying the FNV-1a (64-bit) of its
// canonical JSON text, so that a line edited by hand is refused by its number:
//
//   {"count":2,"created_ms":1700000000000,"devices":["AMD EPYC 9R14 x2"],"format":"kiln.records",
//    "lane":"device","sources":1,"target":"llvm -mcpu=znver4","tasks":1,"version":2}
//   {"source":{"task":"dense_x86 ...","template":"dense_x86","workload":"{...}"},"fnv1a":"..."}
//   {"config":"tile=[4, 1]",...,"task":"dense_x86 ...","version":1,"fnv1a":"3b0f5c9e1d27a8c4"}
//   {...}
//
// A record's checksum covers its JSON text (record_to_string), a source's the canonical text of
// its "source" object (sorted keys, as base/json.h writes objects). The writer puts the sources
// (by task key) before the records; a reader takes the two kinds of line in any order. A source
// is optional per task (a log knows only the sources its tuners noted), and at most one per task.
// Version 1 packs (no "sources" in the header, no source lines) still read, with no sources.
//
// A pack holds the records of one key of a record log: one target string in one lane (records
// are filed, and a tuner finds its bests, by (target, task); a farm's device key is not in a
// record, but `kiln devices` shows the target each key's agents measure for). Reading one checks
// every line before returning any record: the header (its format, version and fields), each
// record's fields (record.h, plus what a log accepts: check_record), its checksum, its target and
// lane against the header's, each source's fields (check_task_source) and checksum, its task
// among the records' and not given twice, and the header's count, sources, tasks and devices
// against the lines; a kiln::Error names the file, the line and the field.
//
//   RecordPack pack = read_pack("znver4.jsonl");
//   for (const MeasureRecord& r : pack.records) ...   // all of pack.header.target
//   pack.sources.at(r.task_key)                        // when the pack carries its source
#pragma once

#include <cstdint>
#include <istream>
#include <map>
#include <string>
#include <vector>

#include "records/record.h"

namespace kiln::records {

inline constexpr const char* kPackFormat = "kiln.records";
/// The current version of a pack's header and layout (2: task sources; 1 still reads).
inline constexpr int kPackVersion = 2;

/// The task sources of a pack, by task key.
using PackSources = std::map<std::string, TaskSource>;

/// The first line of a pack: what it holds.
struct PackHeader {
  std::string target;                ///< every record's target
  Lane lane = Lane::kDevice;         ///< every record's lane
  uint64_t count = 0;                ///< the records that follow
  uint64_t sources = 0;              ///< the task sources that follow (0 in a version 1 pack)
  uint64_t tasks = 0;                ///< distinct task keys among them
  std::vector<std::string> devices;  ///< distinct device fingerprints among them, sorted
  int64_t created_ms = 0;            ///< when it was written, ms since the Unix epoch
  bool operator==(const PackHeader&) const = default;
};

struct RecordPack {
  PackHeader header;
  std::vector<MeasureRecord> records;  ///< in the file's order
  PackSources sources;                 ///< of some of the records' tasks (none: version 1)
};

/// The header of a pack of `records`, all of `target` and `lane`, and `sources`, each of a task of
/// `records` (kiln::InternalError otherwise).
PackHeader pack_header(const std::string& target, Lane lane,
                       const std::vector<MeasureRecord>& records, const PackSources& sources,
                       int64_t created_ms);

/// The header's line (no newline).
std::string pack_header_line(const PackHeader& header);
/// A record's line in a pack (no newline): its JSON text with the field "fnv1a", the checksum of
/// record_to_string(r) as 16 lowercase hex digits.
std::string pack_record_line(const MeasureRecord& r);
/// A task source's line in a pack (no newline): {"source":{"task":..,"template":..,"workload":..},
/// "fnv1a":..}, the checksum of the "source" object's JSON text.
std::string pack_source_line(const std::string& task_key, const TaskSource& source);

/// Writes a pack of `records` (all of `target` and `lane`) and `sources` (each of a task of
/// `records`: kiln::InternalError otherwise) to `path`: into a temporary file beside it, renamed
/// over `path` once complete, so that a failed write leaves no partial pack. Returns its header.
/// kiln::Error naming `path` when it cannot be written.
PackHeader write_pack(const std::string& path, const std::string& target, Lane lane,
                      const std::vector<MeasureRecord>& records, const PackSources& sources);

/// Reads and checks a whole pack (see the header comment); `origin` names it in errors
/// ("pack.jsonl", then "pack.jsonl:12: ..."). Blank lines are skipped and counted.
RecordPack read_pack(std::istream& in, const std::string& origin);
/// The same from the file `path`; kiln::Error naming it when it cannot be read.
RecordPack read_pack(const std::string& path);

}  // namespace kiln::records
