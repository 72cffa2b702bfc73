// Fuzz target: one line of the record log's JSON (records::record_from_string), as `kiln tune
// --records`' import and the farm's log read it. A line is refused with kiln::Error or read; a
// record read must survive record_to_string and record_from_string unchanged.
#include <cstdint>
#include <string>

#include "base/error.h"
#include "fuzz/fuzz_check.h"
#include "records/record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace records = kiln::records;
  const std::string text(reinterpret_cast<const char*>(data), size);
  records::MeasureRecord r;
  try {
    r = records::record_from_string(text, "fuzz");
  } catch (const kiln::Error&) {
    return 0;
  }
  KILN_FUZZ_CHECK(records::record_from_string(records::record_to_string(r), "round trip") == r);
  return 0;
}
