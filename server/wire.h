// Conversions between the C++ types of the tracker and the tuner and their kiln.v1 messages.
#pragma once

#include <optional>

#include "compiler/autotune/record_log.h"
#include "proto/kiln/v1/common.pb.h"
#include "proto/kiln/v1/service.pb.h"
#include "tracker/job_store.h"

namespace kiln::server {

/// The record log's kind as the wire's (kNone -> ERROR_KIND_NONE, ...).
v1::ErrorKind to_wire(autotune::ErrorKind kind);
/// The wire's kind as the record log's; nullopt for UNSPECIFIED, DEVICE_LOST, QUEUE_TIMEOUT and
/// unknown values (kinds a device cannot report).
std::optional<autotune::ErrorKind> from_wire(v1::ErrorKind kind);

v1::JobState to_wire(tracker::JobState state);
/// nullopt for UNSPECIFIED and unknown values.
std::optional<tracker::JobState> from_wire(v1::JobState state);

/// The job as the public API shows it.
v1::Job to_wire(const tracker::JobRecord& job);
v1::JobProgress progress_of(const tracker::JobRecord& job);

}  // namespace kiln::server
