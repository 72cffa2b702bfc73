// The `kiln` commands that live in files of their own, and what they share with main.cc. Each
// command is described by a cli::Command (client/cli.h): its flags, their defaults and its usage.
#pragma once

#include <cstdint>
#include <map>
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
