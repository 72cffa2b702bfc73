#include "rpc/wire.h"

#include <cmath>

#include "base/error.h"

namespace kiln::rpc {

// The wire's kinds are base/error_kind.h's shifted by one (0 is UNSPECIFIED), then the two only
// the farm sees.
static_assert(v1::ERROR_KIND_NONE == static_cast<int>(ErrorKind::kNone) + 1);
static_assert(v1::ERROR_KIND_WRONG_ANSWER == static_cast<int>(ErrorKind::kWrongAnswer) + 1);
static_assert(kNumErrorKinds == v1::ERROR_KIND_WRONG_ANSWER);

v1::ErrorKind to_wire(ErrorKind kind) {
  return static_cast<v1::ErrorKind>(static_cast<int>(kind) + 1);
}

std::optional<ErrorKind> from_wire(v1::ErrorKind kind) {
  const int k = static_cast<int>(kind);
  if (k < v1::ERROR_KIND_NONE || k > v1::ERROR_KIND_WRONG_ANSWER) return std::nullopt;
  return static_cast<ErrorKind>(k - 1);
}

v1::MeasureRecord to_wire(const records::MeasureRecord& r) {
  v1::MeasureRecord w;
  w.set_target(r.target);
  w.set_device(r.device);
  w.set_task_key(r.task_key);
  w.set_config_index(r.config_index);
  w.set_config(r.config);
  for (double c : r.costs_s) w.add_costs_s(c);
  w.set_error(to_wire(r.error));
  w.set_error_msg(r.error_msg);
  w.set_gflops(r.gflops);
  w.set_timestamp_ms(r.timestamp_ms);
  w.set_search_seed(r.search_seed);
  w.set_contended(r.contended);
  w.set_emulated(r.emulated);
  return w;
}

records::MeasureRecord from_wire(const v1::MeasureRecord& w, const std::string& origin) {
  records::MeasureRecord r;
  r.target = w.target();
  r.device = w.device();
  r.task_key = w.task_key();
  r.config_index = w.config_index();
  r.config = w.config();
  for (double c : w.costs_s()) {
    KILN_USER_CHECK(std::isfinite(c) && c >= 0)
        << origin << ": field 'costs_s' holds " << c << "; costs must be finite and non-negative";
    r.costs_s.push_back(c);
  }
  const std::optional<ErrorKind> kind = from_wire(w.error());
  KILN_USER_CHECK(kind.has_value())
      << origin << ": field 'error' is " << v1::ErrorKind_Name(w.error())
      << ", which a record cannot hold";
  r.error = *kind;
  r.error_msg = w.error_msg();
  KILN_USER_CHECK(std::isfinite(w.gflops()) && w.gflops() >= 0)
      << origin << ": field 'gflops' is " << w.gflops() << "; it must be finite and non-negative";
  r.gflops = w.gflops();
  r.timestamp_ms = w.timestamp_ms();
  r.search_seed = w.search_seed();
  r.contended = w.contended();
  r.emulated = w.emulated();
  return r;
}

}  // namespace kiln::rpc
