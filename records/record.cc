// Measurement records <-> JSON text, every field checked.
#include "records/record.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include "base/error.h"
#include "base/json.h"

namespace kiln::records {

using kiln::Json;

namespace {

Json u64_to_json(uint64_t v) {
  if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Json(static_cast<int64_t>(v));
  }
  return Json(std::to_string(v));
}

uint64_t u64_from_json(const Json& j, const std::string& what) {
  if (j.is_null() || j.is_array() || j.is_object()) {
    KILN_USER_ERROR() << what << " must be a non-negative integer";
  }
  std::optional<int64_t> as_int;
  try {
    as_int = j.as_int(what);
  } catch (const Error&) {
  }
  if (as_int) {
    KILN_USER_CHECK(*as_int >= 0) << what << " must be a non-negative integer, not " << *as_int;
    return static_cast<uint64_t>(*as_int);
  }
  // Values above INT64_MAX are written as decimal strings.
  const std::string& s = j.as_string(what + " (an integer)");
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  KILN_USER_CHECK(ec == std::errc() && end == s.data() + s.size() && !s.empty())
      << what << " must be a non-negative integer, not \"" << s << "\"";
  return v;
}

const Json& field(const Json& j, const std::string& key, const std::string& origin) {
  KILN_USER_CHECK(j.has(key)) << origin << ": field '" << key << "' is missing";
  return j.at(key, origin);
}

std::string what(const std::string& origin, const std::string& key) {
  return origin + ": field '" + key + "'";
}

}  // namespace

const char* lane_name(Lane lane) { return lane == Lane::kEmulated ? "emulated" : "device"; }

void check_record(const MeasureRecord& r, const std::string& origin) {
  auto check_name = [&](const std::string& v, const char* name) {
    KILN_USER_CHECK(!v.empty() && v.find('\0') == std::string::npos)
        << origin << ": field '" << name << "' must be non-empty and hold no NUL character";
  };
  check_name(r.target, "target");
  check_name(r.task_key, "task");
  KILN_USER_CHECK(r.target.find('\1') == std::string::npos)
      << origin << ": field 'target' must hold no \\u0001 character (it marks the emulated lane)";
  for (double c : r.costs_s) {
    KILN_USER_CHECK(std::isfinite(c) && c >= 0)
        << origin << ": field 'costs' of task " << r.task_key << " holds " << c
        << "; costs must be finite and non-negative";
  }
  KILN_USER_CHECK(std::isfinite(r.gflops) && r.gflops >= 0)
      << origin << ": field 'gflops' of task " << r.task_key << " is " << r.gflops
      << "; it must be finite and non-negative";
}

void check_task_source(const std::string& task_key, const TaskSource& source,
                       const std::string& origin) {
  auto check = [&](const std::string& v, const char* name, size_t limit) {
    KILN_USER_CHECK(!v.empty() && v.find('\0') == std::string::npos && v.size() <= limit)
        << origin << ": the " << name << " of task '" << task_key.substr(0, 200)
        << "' must be non-empty, hold no NUL character and be at most " << limit
        << " bytes (it has " << v.size() << ")";
  };
  check(task_key, "key", 1024);
  check(source.template_name, "template", 1024);
  check(source.workload, "workload", 64 * 1024);
}

double MeasureRecord::cost() const {
  if (costs_s.empty()) return std::numeric_limits<double>::infinity();
  return *std::min_element(costs_s.begin(), costs_s.end());
}

Json record_to_json(const MeasureRecord& r) {
  Json::Array costs;
  costs.reserve(r.costs_s.size());
  for (double c : r.costs_s) costs.emplace_back(c);
  Json::Object o;
  o["version"] = Json(kRecordVersion);
  o["target"] = Json(r.target);
  o["device"] = Json(r.device);
  o["task"] = Json(r.task_key);
  o["config_index"] = u64_to_json(r.config_index);
  o["config"] = Json(r.config);
  o["costs"] = Json(std::move(costs));
  o["error"] = Json(error_kind_name(r.error));
  o["error_msg"] = Json(r.error_msg);
  o["gflops"] = Json(r.gflops);
  o["timestamp_ms"] = Json(r.timestamp_ms);
  o["search_seed"] = u64_to_json(r.search_seed);
  if (r.contended) o["contended"] = Json(true);
  if (r.emulated) o["emulated"] = Json(true);
  return Json(std::move(o));
}

MeasureRecord record_from_json(const Json& j, const std::string& origin) {
  KILN_USER_CHECK(j.is_object()) << origin << ": a record must be a JSON object";
  int64_t version = field(j, "version", origin).as_int(what(origin, "version"));
  KILN_USER_CHECK(version >= 1 && version <= kRecordVersion)
      << what(origin, "version") << ": version " << version << " is not one this Kiln reads (1 to "
      << kRecordVersion << ")";
  MeasureRecord r;
  r.target = field(j, "target", origin).as_string(what(origin, "target"));
  r.device = field(j, "device", origin).as_string(what(origin, "device"));
  r.task_key = field(j, "task", origin).as_string(what(origin, "task"));
  r.config_index = u64_from_json(field(j, "config_index", origin), what(origin, "config_index"));
  r.config = field(j, "config", origin).as_string(what(origin, "config"));
  const Json::Array& costs = field(j, "costs", origin).as_array(what(origin, "costs"));
  for (size_t i = 0; i < costs.size(); ++i) {
    r.costs_s.push_back(costs[i].as_double(what(origin, "costs") + "[" + std::to_string(i) + "]"));
  }
  const std::string& err = field(j, "error", origin).as_string(what(origin, "error"));
  r.error = error_kind_from_name(err, what(origin, "error"));
  r.error_msg = field(j, "error_msg", origin).as_string(what(origin, "error_msg"));
  r.gflops = field(j, "gflops", origin).as_double(what(origin, "gflops"));
  r.timestamp_ms = field(j, "timestamp_ms", origin).as_int(what(origin, "timestamp_ms"));
  r.search_seed = u64_from_json(field(j, "search_seed", origin), what(origin, "search_seed"));
  if (j.has("contended"))
    r.contended = j.at("contended", origin).as_bool(what(origin, "contended"));
  if (j.has("emulated")) r.emulated = j.at("emulated", origin).as_bool(what(origin, "emulated"));
  return r;
}

std::string record_to_string(const MeasureRecord& r) { return record_to_json(r).dump(); }

MeasureRecord record_from_string(const std::string& text, const std::string& origin) {
  return record_from_json(Json::parse(text, origin), origin);
}

}  // namespace kiln::records
