// The `kiln` commands that live in files of their own, and what they share with main.cc. Each
// command is described by a cli::Command (client/cli.h): its flags, their defaults and its usage.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "client/cli.h"

/// "MODEL.onnx" -> "MODEL.kiln".
std::string default_bundle_path(const std::string& onnx_path);

/// Every `--input-shape NAME=D0,D1,...` of `args`, by input name; UsageError for a malformed value
/// or an input given twice.
std::map<std::string, std::vector<int64_t>> input_shapes(const kiln::cli::Args& args);

/// The help line of `--input-shape`, the same for compile, tune and submit.
extern const kiln::cli::Flag kInputShapeFlag;

/// How much `kiln tune` and `kiln submit` measure besides --trials: --budget N (measurements over
/// all tasks), --time D, and --early-stop K, which only these two allow (tune_command.cc).
struct TuningBudget {
  int budget = 0;     ///< 0: none
  double time_s = 0;  ///< 0: none
  std::optional<int> early_stop;
  /// Whether the task scheduler spreads them (else each task gets --trials in turn).
  bool scheduled() const { return budget > 0 || time_s > 0; }
};
/// UsageError for a value that does not parse, or --early-stop without --budget or --time.
TuningBudget tuning_budget(const kiln::cli::Args& args);
/// The help lines of --budget, --time and --early-stop, the same for tune and submit.
extern const kiln::cli::Flag kBudgetFlag, kTimeFlag, kEarlyStopFlag;
/// Seconds as people read them: "45s", "10m00s", "2h05m".
std::string duration_text(double seconds);

/// Prints rows on stdout as left-aligned columns, the first row the heading; an empty cell shows
/// as "-" (farm_commands.cc).
void print_table(std::vector<std::vector<std::string>> rows);

/// kiln tune (tune_command.cc).
const kiln::cli::Command& tune_command();

// The farm commands (farm_commands.cc): each also takes --server, --token-file and --tls-ca.
const kiln::cli::Command& submit_command();
const kiln::cli::Command& jobs_command();
const kiln::cli::Command& watch_command();
const kiln::cli::Command& fetch_command();
const kiln::cli::Command& devices_command();
const kiln::cli::Command& cancel_command();

// The record log's commands (records_commands.cc): kiln records export, import, list.
const kiln::cli::Command& records_export_command();
const kiln::cli::Command& records_import_command();
const kiln::cli::Command& records_list_command();
