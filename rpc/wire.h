// Conversions between the C++ vocabulary every side shares and its kiln.v1 messages: error kinds
// and measurement records. (Job states and jobs, which only kilnd speaks, are in server/wire.h.)
#pragma once

#include <optional>

#include "base/error_kind.h"
#include "proto/kiln/v1/common.pb.h"
#include "records/record.h"

namespace kiln::rpc {

/// The kind as the wire's (kNone -> ERROR_KIND_NONE, ...).
v1::ErrorKind to_wire(ErrorKind kind);
/// The wire's kind; nullopt for UNSPECIFIED, DEVICE_LOST, QUEUE_TIMEOUT and unknown values (kinds
/// a record cannot hold).
std::optional<ErrorKind> from_wire(v1::ErrorKind kind);

v1::MeasureRecord to_wire(const records::MeasureRecord& r);
/// kiln::Error naming `origin` and the field for an error kind a record cannot hold, or a cost or
/// gflops that is negative or not finite.
records::MeasureRecord from_wire(const v1::MeasureRecord& r, const std::string& origin);

}  // namespace kiln::rpc
