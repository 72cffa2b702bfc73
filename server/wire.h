// Conversions between the tracker's job types and their kiln.v1 messages (error kinds and records:
// rpc/wire.h).
#pragma once

#include <optional>

#include "proto/kiln/v1/common.pb.h"
#include "proto/kiln/v1/service.pb.h"
#include "rpc/wire.h"
#include "tracker/job_store.h"

namespace kiln::server {

using rpc::from_wire;
using rpc::to_wire;

v1::JobState to_wire(tracker::JobState state);
/// nullopt for UNSPECIFIED and unknown values.
std::optional<tracker::JobState> from_wire(v1::JobState state);

/// The job as the public API shows it.
v1::Job to_wire(const tracker::JobRecord& job);
v1::JobProgress progress_of(const tracker::JobRecord& job);

}  // namespace kiln::server
