// A record pack: what one farm learned on one kind of device, as a file a team hands to another
// (`kiln records export` writes one from a record log, `kiln records import` adds one to a log;
// a cost model can read one as it is). JSON lines: a header, then one record per line, each
// carrying the FNV-1a (64-bit) of its canonical JSON text, so that a line edited by hand is
// refused by its number:
//
//   {"count":2,"created_ms":1700000000000,"devices":["AMD EPYC 9R14 x2"],"format":"kiln.records",
//    "lane":"device","target":"llvm -mcpu=znver4","tasks":1,"version":1}
//   {"config":"tile=[4, 1]",...,"task":"conv2d_nchw ...","version":1,"fnv1a":"3b0f5c9e1d27a8c4"}
//   {...}
//
// A pack holds the records of one key of a record log: one target string in one lane (records
// are filed, and a tuner finds its bests, by (target, task); a farm's device key is not in a
// record, but `kiln devices` shows the target each key's agents measure for). Reading one checks
// every line before returning any record: the header (its format, version and fields), each
// record's fields (record.h, plus what a log accepts: check_record), its checksum, its target and
// lane against the header's, and the header's count, tasks and devices against the records; a
// kiln::Error names the file, the line and the field.
//
//   RecordPack pack = read_pack("znver4.jsonl");
//   for (const MeasureRecord& r : pack.records) ...   // all of pack.header.target
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "records/record.h"

namespace kiln::records {

inline constexpr const char* kPackFormat = "kiln.records";
/// The current version of a pack's header and layout.
inline constexpr int kPackVersion = 1;

/// The first line of a pack: what it holds.
struct PackHeader {
  std::string target;                ///< every record's target
  Lane lane = Lane::kDevice;         ///< every record's lane
  uint64_t count = 0;                ///< the records that follow
  uint64_t tasks = 0;                ///< distinct task keys among them
  std::vector<std::string> devices;  ///< distinct device fingerprints among them, sorted
  int64_t created_ms = 0;            ///< when it was written, ms since the Unix epoch
  bool operator==(const PackHeader&) const = default;
};

struct RecordPack {
  PackHeader header;
  std::vector<MeasureRecord> records;  ///< in the file's order
};

/// The header of a pack of `records`, all of `target` and `lane` (kiln::InternalError otherwise).
PackHeader pack_header(const std::string& target, Lane lane,
                       const std::vector<MeasureRecord>& records, int64_t created_ms);

/// The header's line (no newline).
std::string pack_header_line(const PackHeader& header);
/// A record's line in a pack (no newline): its JSON text with the field "fnv1a", the checksum of
/// record_to_string(r) as 16 lowercase hex digits.
std::string pack_record_line(const MeasureRecord& r);

/// Writes a pack of `records` (all of `target` and `lane`) to `path`: into a temporary file
/// beside it, renamed over `path` once complete, so that a failed write leaves no partial pack.
/// Returns its header. kiln::Error naming `path` when it cannot be written.
PackHeader write_pack(const std::string& path, const std::string& target, Lane lane,
                      const std::vector<MeasureRecord>& records);

/// Reads and checks a whole pack (see the header comment); `origin` names it in errors
/// ("pack.jsonl", then "pack.jsonl:12: ..."). Blank lines are skipped and counted.
RecordPack read_pack(std::istream& in, const std::string& origin);
/// The same from the file `path`; kiln::Error naming it when it cannot be read.
RecordPack read_pack(const std::string& path);

}  // namespace kiln::records
