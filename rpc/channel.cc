#include "rpc/channel.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/synchronization/mutex.h"
#include "base/error.h"

namespace kiln::rpc {
namespace {

std::string read_file(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  KILN_USER_CHECK(in.good()) << "cannot read " << what << " '" << path << "'";
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

constexpr char kAuthKey[] = "authorization";
constexpr char kBearer[] = "Bearer ";

}  // namespace

std::string read_token(const std::string& file) {
  if (!file.empty()) {
    std::string text = read_file(file, "token file");
    const size_t end = text.find_first_of("\r\n");
    if (end != std::string::npos) text.resize(end);
    KILN_USER_CHECK(!text.empty()) << "token file '" << file << "' is empty";
    return text;
  }
  const char* env = std::getenv("KILN_TOKEN");
  return env ? std::string(env) : std::string();
}

std::shared_ptr<grpc::Channel> make_channel(const std::string& address,
                                            const std::string& ca_file) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (ca_file.empty()) {
    creds = grpc::InsecureChannelCredentials();
  } else {
    grpc::SslCredentialsOptions opts;
    opts.pem_root_certs = read_file(ca_file, "TLS CA certificate");
    creds = grpc::SslCredentials(opts);
  }
  return grpc::CreateCustomChannel(address, creds, args);
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const std::string& cert_file,
                                                            const std::string& key_file) {
  KILN_USER_CHECK(cert_file.empty() == key_file.empty())
      << "TLS needs both a certificate and a key (got only the "
      << (cert_file.empty() ? "key" : "certificate") << ")";
  if (cert_file.empty()) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back(
      {read_file(key_file, "TLS key"), read_file(cert_file, "TLS certificate")});
  return grpc::SslServerCredentials(opts);
}

void add_token(grpc::ClientContext& ctx, const std::string& token) {
  if (!token.empty()) ctx.AddMetadata(kAuthKey, kBearer + token);
}

bool has_token(const grpc::ServerContextBase& ctx, const std::string& token) {
  if (token.empty()) return true;
  const auto& md = ctx.client_metadata();
  auto it = md.find(kAuthKey);
  if (it == md.end()) return false;
  const std::string value(it->second.data(), it->second.size());
  return value == kBearer + token;
}

void prepare_server_process() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

grpc::Status unauthenticated(const grpc::ServerContextBase& ctx) {
  const bool present = ctx.client_metadata().count(kAuthKey) > 0;
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      present ? "the token is wrong (metadata 'authorization: Bearer <token>')"
                              : "this farm requires a token: pass --token-file or set KILN_TOKEN");
}

}  // namespace kiln::rpc
