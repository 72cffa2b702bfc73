// Record packs: writing one, and reading one with every line checked.
#include "records/record_pack.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <utility>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/json.h"

namespace kiln::records {

using kiln::Json;

namespace {

constexpr const char* kChecksumField = "fnv1a";
constexpr const char* kSourceField = "source";

/// The fields a record's line may hold: record_to_json's and the checksum.
const std::set<std::string>& record_fields() {
  static const std::set<std::string> fields = {
      "version",      "target",      "device",    "task",      "config_index",
      "config",       "costs",       "error",     "error_msg", "gflops",
      "timestamp_ms", "search_seed", "contended", "emulated",  kChecksumField};
  return fields;
}

/// The fields a header of `version` may hold (version 2 added "sources").
std::set<std::string> header_fields(int64_t version) {
  std::set<std::string> fields = {"format", "version", "target",  "lane",
                                  "count",  "tasks",   "devices", "created_ms"};
  if (version >= 2) fields.insert("sources");
  return fields;
}

/// A source line's fields, and its "source" object's.
const std::set<std::string>& source_line_fields() {
  static const std::set<std::string> fields = {kSourceField, kChecksumField};
  return fields;
}
const std::set<std::string>& source_fields() {
  static const std::set<std::string> fields = {"task", "template", "workload"};
  return fields;
}

std::string hex64(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

uint64_t checksum(const std::string& canonical) {
  return fnv1a64(canonical.data(), canonical.size());
}

/// Every member of `o` is one of `known`; kiln::Error naming the first that is not.
void check_known(const Json::Object& o, const std::set<std::string>& known,
                 const std::string& origin, const char* what, int64_t version) {
  for (const auto& [key, value] : o) {
    KILN_USER_CHECK(known.count(key)) << origin << ": unknown " << what << " field '" << key
                                      << "' (a pack of version " << version << " has none)";
  }
}

/// The canonical JSON text of a task's source, which its line's checksum covers.
std::string source_text(const std::string& task_key, const TaskSource& source) {
  Json::Object o;
  o["task"] = Json(task_key);
  o["template"] = Json(source.template_name);
  o["workload"] = Json(source.workload);
  return Json(std::move(o)).dump();
}

const Json& header_field(const Json& j, const std::string& key, const std::string& origin) {
  KILN_USER_CHECK(j.has(key)) << origin << ": header field '" << key << "' is missing";
  return j.at(key, origin);
}

uint64_t non_negative(const Json& j, const std::string& what) {
  const int64_t v = j.as_int(what);
  KILN_USER_CHECK(v >= 0) << what << " must be a non-negative integer, not " << v;
  return static_cast<uint64_t>(v);
}

/// The header, and the version it was written in (`*version`: 1 or 2).
PackHeader header_from_line(const std::string& line, const std::string& origin, int64_t* version) {
  const std::string not_a_pack =
      origin + ": not a record pack: its first line must be the header {\"format\":\"" +
      kPackFormat + "\",\"version\":" + std::to_string(kPackVersion) + ",...}";
  Json j;
  try {
    j = Json::parse(line, origin);
  } catch (const Error& e) {
    KILN_USER_ERROR() << not_a_pack << ", and it is not JSON (" << e.what() << ")";
  }
  KILN_USER_CHECK(j.is_object()) << not_a_pack << ", not a JSON object";
  if (!j.has("format")) {
    KILN_USER_CHECK(!j.has("task") || !j.has("config_index"))
        << not_a_pack
        << "; it holds a record (a JSON-lines file of records is not a pack: `kiln "
           "records export` writes packs)";
    KILN_USER_ERROR() << not_a_pack << "; it has no field 'format'";
  }
  const std::string& format = j.at("format", origin).as_string(origin + ": header field 'format'");
  KILN_USER_CHECK(format == kPackFormat)
      << not_a_pack << "; its format is \"" << format << "\", not \"" << kPackFormat << "\"";
  *version = header_field(j, "version", origin).as_int(origin + ": header field 'version'");
  KILN_USER_CHECK(*version >= 1 && *version <= kPackVersion)
      << origin << ": a pack of version " << *version << "; this Kiln reads versions 1 to "
      << kPackVersion;
  check_known(j.as_object(origin), header_fields(*version), origin, "header", *version);

  auto what = [&](const char* key) { return origin + ": header field '" + key + "'"; };
  PackHeader h;
  h.target = header_field(j, "target", origin).as_string(what("target"));
  KILN_USER_CHECK(!h.target.empty()) << what("target") << " is empty";
  const std::string& lane = header_field(j, "lane", origin).as_string(what("lane"));
  if (lane == "device") {
    h.lane = Lane::kDevice;
  } else if (lane == "emulated") {
    h.lane = Lane::kEmulated;
  } else {
    KILN_USER_ERROR() << what("lane") << " must be \"device\" or \"emulated\", not \"" << lane
                      << "\"";
  }
  h.count = non_negative(header_field(j, "count", origin), what("count"));
  h.tasks = non_negative(header_field(j, "tasks", origin), what("tasks"));
  if (*version >= 2) h.sources = non_negative(header_field(j, "sources", origin), what("sources"));
  const Json::Array& devices = header_field(j, "devices", origin).as_array(what("devices"));
  for (size_t i = 0; i < devices.size(); ++i) {
    h.devices.push_back(devices[i].as_string(what("devices") + "[" + std::to_string(i) + "]"));
  }
  h.created_ms = header_field(j, "created_ms", origin).as_int(what("created_ms"));
  return h;
}

MeasureRecord record_from_line(Json::Object o, const std::string& origin, const PackHeader& header,
                               int64_t version) {
  check_known(o, record_fields(), origin, "record", version);
  auto sum = o.find(kChecksumField);
  KILN_USER_CHECK(sum != o.end())
      << origin << ": field '" << kChecksumField
      << "' is missing (every record of a pack carries the FNV-1a of its JSON text)";
  const std::string written = sum->second.as_string(origin + ": field 'fnv1a'");
  o.erase(sum);
  MeasureRecord r = record_from_json(Json(std::move(o)), origin);
  check_record(r, origin);
  const std::string computed = hex64(checksum(record_to_string(r)));
  KILN_USER_CHECK(written == computed)
      << origin << ": the record's checksum does not match its fields (fnv1a \"" << written
      << "\" written, \"" << computed << "\" computed): the line was changed after export";
  KILN_USER_CHECK(r.target == header.target) << origin << ": a record of target '" << r.target
                                             << "' in a pack of target '" << header.target << "'";
  KILN_USER_CHECK(lane_of(r) == header.lane)
      << origin << ": a record of the " << lane_name(lane_of(r)) << " lane in a pack of the "
      << lane_name(header.lane) << " lane"
      << (r.emulated ? " (it was measured under emulation)" : " (it was measured on a device)");
  return r;
}

/// A task source's line: its task key and source.
std::pair<std::string, TaskSource> source_from_line(const Json::Object& o,
                                                    const std::string& origin, int64_t version) {
  KILN_USER_CHECK(version >= 2) << origin << ": a task source in a pack of version " << version
                                << " (sources came with version 2)";
  check_known(o, source_line_fields(), origin, "source line", version);
  const Json::Object& s = o.at(kSourceField).as_object(origin + ": field '" + kSourceField + "'");
  check_known(s, source_fields(), origin, "source", version);
  auto field = [&](const char* key) -> const std::string& {
    const std::string what = origin + ": field 'source." + key + "'";
    auto it = s.find(key);
    KILN_USER_CHECK(it != s.end()) << what << " is missing";
    return it->second.as_string(what);
  };
  std::pair<std::string, TaskSource> out{field("task"), {field("template"), field("workload")}};
  auto sum = o.find(kChecksumField);
  KILN_USER_CHECK(sum != o.end())
      << origin << ": field '" << kChecksumField
      << "' is missing (every task source of a pack carries the FNV-1a of its JSON text)";
  const std::string& written = sum->second.as_string(origin + ": field 'fnv1a'");
  check_task_source(out.first, out.second, origin);
  const std::string computed = hex64(checksum(source_text(out.first, out.second)));
  KILN_USER_CHECK(written == computed)
      << origin << ": the task source's checksum does not match its fields (fnv1a \"" << written
      << "\" written, \"" << computed << "\" computed): the line was changed after export";
  return out;
}

}  // namespace

PackHeader pack_header(const std::string& target, Lane lane,
                       const std::vector<MeasureRecord>& records, const PackSources& sources,
                       int64_t created_ms) {
  PackHeader h;
  h.target = target;
  h.lane = lane;
  h.count = records.size();
  h.created_ms = created_ms;
  std::set<std::string> tasks, devices;
  for (const MeasureRecord& r : records) {
    KILN_ICHECK(r.target == target && lane_of(r) == lane)
        << "a record of target '" << r.target << "' (" << lane_name(lane_of(r))
        << " lane) for a pack of target '" << target << "' (" << lane_name(lane) << " lane)";
    tasks.insert(r.task_key);
    devices.insert(r.device);
  }
  for (const auto& [task, source] : sources) {
    KILN_ICHECK(tasks.count(task))
        << "the source of task '" << task << "' for a pack none of whose records is of that task";
  }
  h.tasks = tasks.size();
  h.sources = sources.size();
  h.devices.assign(devices.begin(), devices.end());
  return h;
}

std::string pack_header_line(const PackHeader& h) {
  Json::Array devices;
  for (const std::string& d : h.devices) devices.emplace_back(d);
  Json::Object o;
  o["format"] = Json(kPackFormat);
  o["version"] = Json(kPackVersion);
  o["target"] = Json(h.target);
  o["lane"] = Json(lane_name(h.lane));
  o["count"] = Json(static_cast<int64_t>(h.count));
  o["tasks"] = Json(static_cast<int64_t>(h.tasks));
  o["sources"] = Json(static_cast<int64_t>(h.sources));
  o["devices"] = Json(std::move(devices));
  o["created_ms"] = Json(h.created_ms);
  return Json(std::move(o)).dump();
}

std::string pack_record_line(const MeasureRecord& r) {
  std::string text = record_to_string(r);
  // The checksum covers exactly the text before it: the record's canonical JSON.
  const std::string sum = hex64(checksum(text));
  text.pop_back();  // '}'
  text += ",\"";
  text += kChecksumField;
  text += "\":\"" + sum + "\"}";
  return text;
}

std::string pack_source_line(const std::string& task_key, const TaskSource& source) {
  const std::string text = source_text(task_key, source);
  return std::string("{\"") + kSourceField + "\":" + text + ",\"" + kChecksumField + "\":\"" +
         hex64(checksum(text)) + "\"}";
}

PackHeader write_pack(const std::string& path, const std::string& target, Lane lane,
                      const std::vector<MeasureRecord>& records, const PackSources& sources) {
  namespace fs = std::filesystem;
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const PackHeader header = pack_header(target, lane, records, sources, now_ms);
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    KILN_USER_CHECK(f.is_open()) << "record pack: cannot write '" << path << "'";
    f << pack_header_line(header) << '\n';
    for (const auto& [task, source] : sources) f << pack_source_line(task, source) << '\n';
    for (const MeasureRecord& r : records) f << pack_record_line(r) << '\n';
    f.close();
    if (f.fail()) {
      std::error_code ec;
      fs::remove(tmp, ec);
      KILN_SYSTEM_ERROR() << "record pack: writing '" << path << "' failed";
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    KILN_USER_ERROR() << "record pack: cannot write '" << path << "': " << ec.message();
  }
  return header;
}

RecordPack read_pack(std::istream& in, const std::string& origin) {
  RecordPack pack;
  bool have_header = false;
  int64_t version = 0;
  size_t header_line = 0;
  std::set<std::string> tasks, devices;
  std::map<std::string, size_t> source_lines;  // task key -> the line of its source
  std::string line;
  size_t n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = origin + ":" + std::to_string(n);
    if (!have_header) {
      pack.header = header_from_line(line, where, &version);
      have_header = true;
      header_line = n;
      continue;
    }
    Json j = Json::parse(line, where);
    KILN_USER_CHECK(j.is_object())
        << where << ": a line after the header must be a JSON object (a record or a task source)";
    Json::Object o = j.as_object(where);
    if (o.count(kSourceField)) {
      auto [task, source] = source_from_line(o, where, version);
      auto [first, fresh] = source_lines.emplace(task, n);
      KILN_USER_CHECK(fresh) << where << ": a second source of task '" << task
                             << "' (the first is on line " << first->second << ")";
      pack.sources.emplace(std::move(task), std::move(source));
      continue;
    }
    pack.records.push_back(record_from_line(std::move(o), where, pack.header, version));
    tasks.insert(pack.records.back().task_key);
    devices.insert(pack.records.back().device);
  }
  KILN_SYSTEM_CHECK(!in.bad()) << "record pack: reading '" << origin << "' failed";
  KILN_USER_CHECK(have_header) << origin
                               << ": empty; a record pack starts with its header {\"format\":\""
                               << kPackFormat << "\",...}";
  const PackHeader& h = pack.header;
  const std::string at = origin + ":" + std::to_string(header_line);
  KILN_USER_CHECK(pack.records.size() == h.count)
      << at << ": the header says " << h.count << " records, the file holds " << pack.records.size()
      << " (cut short, or lines removed or added)";
  KILN_USER_CHECK(pack.sources.size() == h.sources)
      << at << ": the header says " << h.sources << " task sources, the file holds "
      << pack.sources.size() << " (cut short, or lines removed or added)";
  KILN_USER_CHECK(tasks.size() == h.tasks)
      << at << ": the header says " << h.tasks << " tasks, the records hold " << tasks.size();
  KILN_USER_CHECK(std::vector<std::string>(devices.begin(), devices.end()) == h.devices)
      << at << ": header field 'devices' does not list the records' devices";
  for (const auto& [task, line_of_source] : source_lines) {
    KILN_USER_CHECK(tasks.count(task)) << origin << ":" << line_of_source << ": a source of task '"
                                       << task << "', but no record of the pack is of that task";
  }
  return pack;
}

RecordPack read_pack(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  KILN_USER_CHECK(f.is_open()) << "record pack: cannot read '" << path << "'";
  return read_pack(f, path);
}

}  // namespace kiln::records
