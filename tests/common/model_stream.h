// A model held in memory as the ModelUpload messages Farm::submit reads after the job (its chunks,
// then its checksum), for the tests, fuzz targets and benchmarks that submit in process.
//
//   farm.submit(submission, testing::model_stream(bytes));
#pragma once

#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "rpc/model_upload.h"

namespace kiln::testing {

/// The messages of `model` in chunks of `chunk_bytes`, then its checksum (rpc::write_model_upload
/// without the job): a reader that fills the next one, false after the last.
inline std::function<bool(v1::ModelUpload&)> model_stream(
    const std::string& model, size_t chunk_bytes = rpc::kModelChunkBytes) {
  auto messages = std::make_shared<std::vector<v1::ModelUpload>>();
  std::istringstream in(model);
  rpc::write_model_upload(
      {}, in, model.size(),
      [&](const v1::ModelUpload& m) {
        if (!m.has_job()) messages->push_back(m);
        return true;
      },
      {}, chunk_bytes);
  return [messages, next = size_t{0}](v1::ModelUpload& m) mutable {
    if (next == messages->size()) return false;
    m = (*messages)[next++];
    return true;
  };
}

}  // namespace kiln::testing
