// Fuzz target: a record pack (records::read_pack), the file `kiln records import` takes from
// another team. A pack is refused with kiln::Error or read whole; a pack read must survive being
// written again (its header, task source and record lines; a version 1 pack as version 2) and
// read back unchanged.
#include <cstdint>
#include <sstream>
#include <string>

#include "base/error.h"
#include "fuzz/fuzz_check.h"
#include "records/record_pack.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace records = kiln::records;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  records::RecordPack pack;
  try {
    pack = records::read_pack(in, "fuzz.jsonl");
  } catch (const kiln::Error&) {
    return 0;
  }
  std::string again = records::pack_header_line(pack.header) + "\n";
  for (const auto& [task, source] : pack.sources) {
    again += records::pack_source_line(task, source) + "\n";
  }
  for (const records::MeasureRecord& r : pack.records) again += records::pack_record_line(r) + "\n";
  std::istringstream in2(again);
  const records::RecordPack back = records::read_pack(in2, "round trip");
  KILN_FUZZ_CHECK(back.header == pack.header);
  KILN_FUZZ_CHECK(back.records == pack.records);
  KILN_FUZZ_CHECK(back.sources == pack.sources);
  return 0;
}
