#include "rpc/model_upload.h"

#include <algorithm>
#include <string>

#include "base/error.h"
#include "base/fnv1a.h"

namespace kiln::rpc {

bool write_model_upload(v1::SubmitModelRequest job, std::istream& in, uint64_t size,
                        const std::function<bool(const v1::ModelUpload&)>& write,
                        const std::function<void(uint64_t sent)>& progress, size_t chunk_bytes) {
  KILN_USER_CHECK(chunk_bytes > 0 && chunk_bytes <= kMaxModelChunkBytes)
      << "a model chunk of " << chunk_bytes << " bytes; it must be from 1 to "
      << kMaxModelChunkBytes;
  job.set_model_size(size);
  v1::ModelUpload msg;
  *msg.mutable_job() = std::move(job);
  if (!write(msg)) return false;
  uint64_t sent = 0, hash = kFnv1a64Basis;
  std::string buf;
  while (sent < size) {
    buf.resize(static_cast<size_t>(std::min<uint64_t>(chunk_bytes, size - sent)));
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    KILN_USER_CHECK(static_cast<size_t>(in.gcount()) == buf.size())
        << "the model ended after " << sent + static_cast<uint64_t>(in.gcount()) << " of " << size
        << " bytes (was it changed while being sent?)";
    hash = fnv1a64(buf.data(), buf.size(), hash);
    msg.set_chunk(buf);
    if (!write(msg)) return false;
    sent += buf.size();
    if (progress) progress(sent);
  }
  msg.set_checksum(hash);
  return write(msg);
}

grpc::Status submit_model(v1::KilnService::Stub& stub, grpc::ClientContext& ctx,
                          v1::SubmitModelRequest job, std::istream& in, uint64_t size,
                          v1::SubmitModelResponse* resp,
                          const std::function<void(uint64_t sent)>& progress, size_t chunk_bytes) {
  std::unique_ptr<grpc::ClientWriter<v1::ModelUpload>> writer = stub.SubmitModel(&ctx, resp);
  try {
    // A write that fails means kilnd ended the call (a refusal it names) or the connection
    // broke: Finish says which.
    if (write_model_upload(
            std::move(job), in, size, [&](const v1::ModelUpload& m) { return writer->Write(m); },
            progress, chunk_bytes)) {
      writer->WritesDone();
    }
  } catch (...) {
    ctx.TryCancel();  // the model could not be read: kilnd drops what arrived
    writer->Finish();
    throw;
  }
  return writer->Finish();
}

}  // namespace kiln::rpc
