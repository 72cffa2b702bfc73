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
