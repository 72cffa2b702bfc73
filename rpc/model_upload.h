// SubmitModel's client stream (proto/kiln/v1/service.proto, ModelUpload) from the sending side:
// the job, the model read from a stream in chunks (never the whole model in memory), then the
// FNV-1a of its bytes. `kiln submit` and the tests send models this way.
//
//   std::ifstream in("resnet50.onnx", std::ios::binary);
//   v1::SubmitModelResponse resp;
//   grpc::Status s = rpc::submit_model(*stub, ctx, job, in, fs::file_size(path), &resp,
//                                      [](uint64_t sent) { ... });   // after each chunk
#pragma once

#include <cstdint>
#include <functional>
#include <istream>

#include "proto/kiln/v1/service.grpc.pb.h"

namespace kiln::rpc {

/// The model bytes of one ModelUpload chunk `kiln submit` sends: well under gRPC's default
/// message limit of 4 MiB, which kilnd enforces as kMaxModelChunkBytes.
inline constexpr size_t kModelChunkBytes = 1 << 20;
/// The largest chunk kilnd accepts.
inline constexpr size_t kMaxModelChunkBytes = 4 << 20;

/// Writes the ModelUpload messages of `job` (its model_size set to `size`) and the `size` bytes
/// read from `in`: the job, chunks of at most `chunk_bytes`, the checksum. `progress(sent)`
/// follows each chunk. Returns false as soon as `write` does (the stream broke; its status says
/// why). kiln::Error when `in` ends or fails before `size` bytes.
bool write_model_upload(v1::SubmitModelRequest job, std::istream& in, uint64_t size,
                        const std::function<bool(const v1::ModelUpload&)>& write,
                        const std::function<void(uint64_t sent)>& progress = {},
                        size_t chunk_bytes = kModelChunkBytes);

/// SubmitModel of `job` with the `size`-byte model read from `in` (write_model_upload over the
/// call's stream): the call's status, and the new job's id in `resp` when it is OK.
grpc::Status submit_model(v1::KilnService::Stub& stub, grpc::ClientContext& ctx,
                          v1::SubmitModelRequest job, std::istream& in, uint64_t size,
                          v1::SubmitModelResponse* resp,
                          const std::function<void(uint64_t sent)>& progress = {},
                          size_t chunk_bytes = kModelChunkBytes);

}  // namespace kiln::rpc
