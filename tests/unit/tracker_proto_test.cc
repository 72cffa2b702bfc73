// The generated wire code (proto/kiln/v1): it compiles, messages round-trip through bytes, and
// the services have the methods and streaming kinds the farm relies on.
#include <google/protobuf/descriptor.h>
#include <gtest/gtest.h>

#include <cctype>

#include "proto/kiln/v1/common.pb.h"
#include "proto/kiln/v1/driver.grpc.pb.h"
#include "proto/kiln/v1/service.grpc.pb.h"
#include "proto/kiln/v1/service.pb.h"
#include "proto/kiln/v1/tracker.grpc.pb.h"
#include "proto/kiln/v1/tracker.pb.h"
#include "records/record.h"
#include "rpc/wire.h"
#include "tests/common/expect_error.h"

namespace {

TEST(TrackerProto, MeasureRecordRoundTrips) {
  kiln::v1::MeasureRecord r;
  r.set_target("llvm -mcpu=znver4");
  r.set_device("AMD EPYC x2");
  r.set_task_key("dense_x86:1x512:0123abcd");
  r.set_config_index(18446744073709551615ull);
  r.set_config("tile_y=[8, 64]");
  r.add_costs_s(1.5e-4);
  r.add_costs_s(1.6e-4);
  r.set_error(kiln::v1::ERROR_KIND_NONE);
  r.set_gflops(93.5);
  r.set_timestamp_ms(1767225600000);
  r.set_search_seed(42);
  std::string bytes;
  ASSERT_TRUE(r.SerializeToString(&bytes));
  kiln::v1::MeasureRecord back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.SerializeAsString(), bytes);
  EXPECT_EQ(back.task_key(), r.task_key());
  EXPECT_EQ(back.config_index(), 18446744073709551615ull);
  ASSERT_EQ(back.costs_s_size(), 2);
  EXPECT_DOUBLE_EQ(back.costs_s(1), 1.6e-4);
  EXPECT_EQ(back.error(), kiln::v1::ERROR_KIND_NONE);
}

// kiln.v1.ErrorKind is kiln::ErrorKind + 1 (0 is UNSPECIFIED), with the same names.
TEST(TrackerProto, ErrorKindMirrorsTheRecordLog) {
  const auto* e = kiln::v1::ErrorKind_descriptor();
  for (int i = 0; i <= static_cast<int>(kiln::ErrorKind::kWrongAnswer); ++i) {
    const auto* v = e->FindValueByNumber(i + 1);
    ASSERT_NE(v, nullptr) << i;
    std::string name = v->name().substr(std::string("ERROR_KIND_").size());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(name, kiln::error_kind_name(static_cast<kiln::ErrorKind>(i)));
  }
  EXPECT_EQ(e->FindValueByNumber(0)->name(), "ERROR_KIND_UNSPECIFIED");
}

// rpc/wire.h: a record survives the wire with every field; what a record cannot hold is refused.
TEST(TrackerProto, RecordsCrossTheWireWhole) {
  kiln::records::MeasureRecord r;
  r.target = "llvm";
  r.device = "dev";
  r.task_key = "dense_x86:4x16:abc";
  r.config_index = 18446744073709551615ull;
  r.config = "tile=[4]";
  r.costs_s = {2e-4, 1e-4};
  r.gflops = 12.5;
  r.timestamp_ms = 1767225600000;
  r.search_seed = 9;
  r.contended = true;
  EXPECT_EQ(kiln::rpc::from_wire(kiln::rpc::to_wire(r), "test"), r);
  r.costs_s.clear();
  r.gflops = 0;
  r.error = kiln::ErrorKind::kWrongAnswer;
  r.error_msg = "out[3] = 1 vs 2";
  r.contended = false;
  EXPECT_EQ(kiln::rpc::from_wire(kiln::rpc::to_wire(r), "test"), r);

  kiln::v1::MeasureRecord w = kiln::rpc::to_wire(r);
  w.set_error(kiln::v1::ERROR_KIND_DEVICE_LOST);
  EXPECT_ERROR_CONTAINS(kiln::rpc::from_wire(w, "record 3"), "record 3: field 'error'");
  w.set_error(kiln::v1::ERROR_KIND_NONE);
  w.add_costs_s(-1);
  EXPECT_ERROR_CONTAINS(kiln::rpc::from_wire(w, "record 3"), "field 'costs_s'");
  for (int k = 0; k <= static_cast<int>(kiln::ErrorKind::kWrongAnswer); ++k) {
    const auto kind = static_cast<kiln::ErrorKind>(k);
    EXPECT_EQ(kiln::rpc::from_wire(kiln::rpc::to_wire(kind)), kind);
  }
  EXPECT_FALSE(kiln::rpc::from_wire(kiln::v1::ERROR_KIND_UNSPECIFIED).has_value());
  EXPECT_FALSE(kiln::rpc::from_wire(kiln::v1::ERROR_KIND_QUEUE_TIMEOUT).has_value());
}

TEST(TrackerProto, DefaultsAreUnspecified) {
  kiln::v1::MeasureResult res;
  EXPECT_EQ(res.error(), kiln::v1::ERROR_KIND_UNSPECIFIED);
  kiln::v1::JobProgress p;
  EXPECT_EQ(p.state(), kiln::v1::JOB_STATE_UNSPECIFIED);
}

TEST(TrackerProto, NestedMessagesRoundTrip) {
  kiln::v1::MeasureRequest m;
  m.set_request_id(7);
  m.set_job_id(3);
  m.mutable_task()->set_task_key("conv2d_nchwc_x86:1x4x56x56x16:5c0f");
  m.mutable_task()->set_target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  m.mutable_config()->set_index(12);
  m.set_device_key("rk3399");
  m.mutable_artifact()->set_format(kiln::v1::Artifact::FORMAT_SHARED_OBJECT);
  m.mutable_artifact()->set_data(
      std::string("\x7f"
                  "ELF\0\1",
                  6));
  m.mutable_options()->set_repeat(3);
  m.set_attempt(1);
  kiln::v1::MeasureRequest back;
  ASSERT_TRUE(back.ParseFromString(m.SerializeAsString()));
  EXPECT_EQ(back.task().target(), m.task().target());
  EXPECT_EQ(back.artifact().data().size(), 6u);
  EXPECT_EQ(back.artifact().format(), kiln::v1::Artifact::FORMAT_SHARED_OBJECT);

  kiln::v1::RegisterDeviceRequest reg;
  reg.set_key("rk3399");
  (*reg.mutable_capabilities()->mutable_extra())["board"] = "firefly";
  kiln::v1::RegisterDeviceRequest reg_back;
  ASSERT_TRUE(reg_back.ParseFromString(reg.SerializeAsString()));
  EXPECT_EQ(reg_back.capabilities().extra().at("board"), "firefly");

  kiln::v1::ModelUpload sub;
  sub.mutable_job()->set_priority(-2);
  sub.mutable_job()->set_model_size(1000);
  kiln::v1::ModelUpload sub_back;
  ASSERT_TRUE(sub_back.ParseFromString(sub.SerializeAsString()));
  EXPECT_EQ(sub_back.job().priority(), -2);
  EXPECT_EQ(sub_back.job().model_size(), 1000u);
  kiln::v1::ModelUpload chunk;
  chunk.set_chunk(std::string(1000, '\x01'));
  ASSERT_TRUE(sub_back.ParseFromString(chunk.SerializeAsString()));
  EXPECT_EQ(sub_back.part_case(), kiln::v1::ModelUpload::kChunk);
  EXPECT_EQ(sub_back.chunk().size(), 1000u);
  kiln::v1::ModelUpload end;
  end.set_checksum(0);  // a oneof member: set even when zero
  ASSERT_TRUE(sub_back.ParseFromString(end.SerializeAsString()));
  EXPECT_TRUE(sub_back.has_checksum());
}

TEST(TrackerProto, ServicesHaveTheirMethods) {
  const auto* svc =
      kiln::v1::SubmitModelRequest::descriptor()->file()->FindServiceByName("KilnService");
  ASSERT_NE(svc, nullptr);
  EXPECT_STREQ(kiln::v1::KilnService::service_full_name(), "kiln.v1.KilnService");
  EXPECT_EQ(svc->full_name(), "kiln.v1.KilnService");
  ASSERT_NE(svc->FindMethodByName("WatchJob"), nullptr);
  EXPECT_TRUE(svc->FindMethodByName("WatchJob")->server_streaming());
  EXPECT_TRUE(svc->FindMethodByName("FetchBundle")->server_streaming());
  EXPECT_FALSE(svc->FindMethodByName("SubmitModel")->server_streaming());
  EXPECT_TRUE(svc->FindMethodByName("SubmitModel")->client_streaming());  // the model in chunks
  for (const char* m : {"SubmitModel", "GetJob", "ListJobs", "CancelJob"}) {
    EXPECT_NE(svc->FindMethodByName(m), nullptr) << m;
  }
  const auto* tr = kiln::v1::MeasureRequest::descriptor()->file()->FindServiceByName("Tracker");
  ASSERT_NE(tr, nullptr);
  for (const char* m : {"RegisterDevice", "Heartbeat", "GetWork", "ReportResult", "GetBuildWork",
                        "ReportArtifact"}) {
    EXPECT_NE(tr->FindMethodByName(m), nullptr) << m;
  }
  EXPECT_TRUE(tr->FindMethodByName("GetWork")->server_streaming());
  EXPECT_EQ(tr->FindMethodByName("GetJobModel"), nullptr);  // workers never get a model
  const auto* drv = kiln::v1::DriverJob::descriptor()->file()->FindServiceByName("JobDriver");
  ASSERT_NE(drv, nullptr);
  for (const char* m : {"GetDriverJob", "FetchModel", "ReportDriverProgress", "GetTaskRecords",
                        "AppendRecords", "MeasureBatch", "UploadBundle"}) {
    EXPECT_NE(drv->FindMethodByName(m), nullptr) << m;
  }
  EXPECT_TRUE(drv->FindMethodByName("UploadBundle")->client_streaming());
  EXPECT_TRUE(drv->FindMethodByName("FetchModel")->server_streaming());  // a model of any size
  // The generated service bases can be instantiated (what kilnd will subclass).
  kiln::v1::KilnService::Service service;
  kiln::v1::Tracker::Service tracker;
  (void)service;
  (void)tracker;
}

}  // namespace
