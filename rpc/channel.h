// What every gRPC side of the farm shares: the token, channels (plaintext or TLS), and the
// server's credentials. The token travels as the metadata "authorization: Bearer <token>".
//
//   std::string token = rpc::read_token(flags.token_file);      // or $KILN_TOKEN
//   auto channel = rpc::make_channel("127.0.0.1:7070", flags.tls_ca);
//   grpc::ClientContext ctx;
//   rpc::add_token(ctx, token);
//   ...
//   if (!rpc::has_token(*server_ctx, token)) return rpc::unauthenticated();   // server side
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace kiln::rpc {

/// Largest message any side sends or accepts (artifacts and bundle chunks stay well below).
inline constexpr int kMaxMessageBytes = 64 << 20;

/// The farm's token: the first line of `file` when given (kiln::Error naming the file when it
/// cannot be read or is empty), else $KILN_TOKEN, else "" (no token).
std::string read_token(const std::string& file);

/// A channel to `address` ("host:port"): TLS trusting the PEM certificate(s) in `ca_file` when it
/// is given (kiln::Error naming the file when unreadable), plaintext otherwise.
std::shared_ptr<grpc::Channel> make_channel(const std::string& address, const std::string& ca_file);

/// Server credentials: TLS from PEM `cert_file` and `key_file` when both are given (kiln::Error
/// naming a file that cannot be read; one without the other is an error too), insecure otherwise.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const std::string& cert_file,
                                                            const std::string& key_file);

/// Adds the token to a call (nothing when it is empty).
void add_token(grpc::ClientContext& ctx, const std::string& token);

/// Whether the call carries `token` (true when `token` is empty: the farm has none).
bool has_token(const grpc::ServerContextBase& ctx, const std::string& token);

/// For a process serving gRPC (kilnd, benchmarks): turns off abseil's mutex deadlock detection,
/// a debugging aid that gRPC's locks pay for on every acquisition (a few percent of a busy
/// tracker's CPU). Call once at the start of main.
void prepare_server_process();

/// UNAUTHENTICATED with a message saying what is missing.
grpc::Status unauthenticated(const grpc::ServerContextBase& ctx);

}  // namespace kiln::rpc
