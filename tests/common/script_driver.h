// A stand-in for kiln-tuner as a Farm's job driver, for driving the farm's JobDriver calls in
// process (farm tests, the gRPC fuzz target): a shell script that passes the model check
// (--check exits 0, its arguments appended as a line to <folder>/checks) and, started as a job's
// driver, writes the secret kilnd gave it into <folder>/driver-<job> (and a line into
// <folder>/driver-<job>.starts) and lives until its parent is gone or the farm stops it. It never
// calls kilnd: the test makes the driver's calls itself, with the secret.
//
//   ScriptDriver drivers(folder);                 // writes <folder>/driver.sh
//   options.driver.program = drivers.program();
//   farm.start("127.0.0.1:1");                    // the address is never called
//   v1::DriverAuth auth = drivers.wait(job_id);   // once the job's driver started
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "proto/kiln/v1/driver.pb.h"

namespace kiln::testing {

class ScriptDriver {
 public:
  explicit ScriptDriver(std::filesystem::path folder) : folder_(std::move(folder)) {
    std::ofstream out(program());
    // argv: --server ADDR --job ID [...]; KILN_PARENT_PID is kilnd's (server/child_process.h).
    out << "#!/bin/sh\n"
           "[ \"$1\" = --check ] && { echo \"$*\" >> \"$(dirname \"$0\")/checks\"; exit 0; }\n"
           "out=\"$(dirname \"$0\")/driver-$4\"\n"
           "echo \"$$\" >> \"$out.starts\"\n"
           "printf '%s' \"$KILN_DRIVER_SECRET\" > \"$out.tmp\" && mv \"$out.tmp\" \"$out\"\n"
           "while kill -0 \"$KILN_PARENT_PID\" 2>/dev/null; do sleep 1; done\n";
    out.close();
    if (!out) throw std::runtime_error("cannot write " + program());
    std::filesystem::permissions(program(), std::filesystem::perms::owner_all);
  }

  std::string program() const { return (folder_ / "driver.sh").string(); }

  /// The auth of job `job`'s driver once it started (std::runtime_error after `limit`).
  v1::DriverAuth wait(uint64_t job, std::chrono::seconds limit = std::chrono::seconds(60)) const {
    const std::filesystem::path file = folder_ / ("driver-" + std::to_string(job));
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!std::filesystem::exists(file)) {
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("the driver of job " + std::to_string(job) + " did not start");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    std::ifstream in(file, std::ios::binary);
    v1::DriverAuth auth;
    auth.set_job_id(job);
    auth.set_secret(std::string(std::istreambuf_iterator<char>(in), {}));
    return auth;
  }

  /// The arguments of each --check so far, one line each ("--check FILE --input-shape x=1,3").
  std::vector<std::string> checks() const {
    std::ifstream in(folder_ / "checks");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  /// How many drivers of job `job` were started.
  int starts(uint64_t job) const {
    std::ifstream in(folder_ / ("driver-" + std::to_string(job) + ".starts"));
    int n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

 private:
  std::filesystem::path folder_;
};

}  // namespace kiln::testing
