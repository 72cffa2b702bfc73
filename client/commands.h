// The subcommands of `kiln` that live in files of their own, and what they share with main.cc.
#pragma once

#include <exception>
#include <string>
#include <vector>

/// Prints "error: <what>" for a failure and returns the exit code 1.
int report(const std::exception& e);
/// "MODEL.onnx" -> "MODEL.kiln".
std::string default_bundle_path(const std::string& onnx_path);

/// kiln tune MODEL.onnx [--target T] [--trials N] [--records DIR] [-o MODEL.kiln] [--explorer E]
///                      [--batch B] [--seed S] [--threads T] [--repeat R] [--flush-cache]
int tune_main(const std::vector<std::string>& args);

// The farm commands (farm_commands.cc): each also takes [--server HOST:PORT] [--token-file F]
// [--tls-ca F]; exit 0 on success, 1 on a failed call, 2 on a bad command line.

/// kiln submit MODEL.onnx --target T --device-key KEY --trials N [--name NAME] [--priority P]
///                        [--owner O] [--watch]
int submit_main(const std::vector<std::string>& args);
/// kiln jobs [--owner O] [--state S]...
int jobs_main(const std::vector<std::string>& args);
/// kiln watch JOB: exit 0 when the job ends DONE, 1 when it fails or is cancelled.
int watch_main(const std::vector<std::string>& args);
/// kiln fetch JOB [-o OUT.kiln]
int fetch_main(const std::vector<std::string>& args);
/// kiln devices [--key KEY]
int devices_main(const std::vector<std::string>& args);
/// kiln cancel JOB [--reason R]
int cancel_main(const std::vector<std::string>& args);
