// How far a farm job has got, as one fraction from 0 to 1: the rule `kiln watch` and the
// dashboard draw their bars by (python/kiln/farm.py's bar follows the same rule). A job measures
// either in the fixed split (each task to `trials`) or under a budget and / or a time limit (the
// task scheduler):
//
//   fixed split:  max(trials_done / (tasks_total x trials), tasks_done / tasks_total)
//   scheduled:    max(trials_done / budget, (now - started_ms) / time_limit_s)
//
// A done job is at 1. Under a schedule the tasks done say little (a task that stopped improving
// early leaves the budget to the others), so they do not count there.
#pragma once

#include <cstdint>

#include "proto/kiln/v1/service.pb.h"

namespace kiln::rpc {

/// Whether the job is tuned by the task scheduler (a budget or a time limit) rather than the
/// fixed split.
bool is_scheduled(const v1::Job& job);

/// The measurements the job is to make in all: its budget, or in the fixed split tasks_total x
/// trials; 0 when that is not known (tasks not extracted yet, or only a time limit bounds it).
uint64_t planned_measurements(const v1::Job& job);

/// The seconds of its time limit that have passed at `now_ms` (Unix ms), up to its end when it
/// has finished; 0 before it started or without a time limit.
double limited_seconds_elapsed(const v1::Job& job, int64_t now_ms);

/// The job's progress at `now_ms` (Unix ms), from 0 to 1 (see the header comment).
double job_progress(const v1::Job& job, int64_t now_ms);

}  // namespace kiln::rpc
