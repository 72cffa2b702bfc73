// The grpc fuzz target's seeds (fuzz/corpus/grpc/seed-*): a valid request of every method and a
// few bad ones, in the target's input format (grpc_input.h). Written by the target itself, which
// links the protos: python3 fuzz/make_seeds.py runs it with KILN_FUZZ_WRITE_SEEDS=FOLDER.
#include <cmath>
#include <string>
#include <vector>

#include "fuzz/grpc_input.h"
#include "proto/kiln/v1/service.pb.h"
#include "proto/kiln/v1/tracker.pb.h"
#include "tests/common/model_stream.h"

namespace kiln::fuzz_grpc {

/// Writes fuzz/corpus/grpc's seeds into `folder`: a valid request of every method (for the
/// fixture's jobs 1 running, 2 done and 3 cancelled, and its device) and some bad ones.
void write_grpc_seeds(const fs::path& folder) {
  fs::create_directories(folder);
  auto seed = [&](const std::string& name, Method m, uint8_t flags, const std::string& bytes) {
    write_file(folder / ("seed-" + name),
               std::string{static_cast<char>(m), static_cast<char>(flags)} + bytes);
  };
  auto msg = [&](const std::string& name, Method m, uint8_t flags,
                 const google::protobuf::Message& message) {
    seed(name, m, flags, message.SerializeAsString());
  };
  v1::DriverAuth fake;
  fake.set_job_id(1);
  fake.set_secret("not-the-secret");
  const uint8_t authorized = kRealAuth | kResetTasks;

  v1::RegisterDeviceRequest reg;
  reg.set_key("rk3399");
  reg.set_target("llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a53");
  reg.set_fingerprint("ARM Cortex-A53 (4 cores)");
  reg.mutable_capabilities()->set_cpu_model("Cortex-A53");
  reg.mutable_capabilities()->set_cores(4);
  reg.mutable_capabilities()->set_memory_bytes(4ull << 30);
  reg.mutable_capabilities()->set_driver("none");
  (*reg.mutable_capabilities()->mutable_extra())["board"] = "rk3399";
  msg("register-device", kRegisterDevice, 0, reg);
  reg.set_target("not-a-target -mcpu=");
  msg("register-device-bad-target", kRegisterDevice, 0, reg);

  v1::HeartbeatRequest hb;
  msg("heartbeat", kHeartbeat, kFixtureDevice, hb);
  hb.set_device_id(12345);
  msg("heartbeat-unknown", kHeartbeat, 0, hb);
  v1::GetWorkRequest work;
  msg("get-work", kGetWork, kFixtureDevice, work);
  work.set_device_id(777);
  msg("get-work-unknown", kGetWork, 0, work);

  v1::MeasureResult result;
  result.set_request_id(5);
  result.add_costs_s(1e-3);
  result.add_costs_s(1.1e-3);
  result.set_error(v1::ERROR_KIND_NONE);
  result.set_run_ms(12);
  msg("report-result", kReportResult, kFixtureDevice, result);
  result.set_contended(true);
  msg("report-result-in-flight", kReportResult, kInFlight, result);
  result.set_contended(false);
  result.set_error(static_cast<v1::ErrorKind>(99));
  result.set_error_msg("a kind of error from the future");
  msg("report-result-unknown-kind", kReportResult, kFixtureDevice, result);
  result.clear_costs_s();
  result.set_error(v1::ERROR_KIND_CRASH);
  result.set_error_msg("killed by SIGSEGV");
  msg("report-result-in-flight-crash", kReportResult, kInFlight, result);

  v1::GetBuildWorkRequest builds;
  builds.set_worker_id("worker-1");
  builds.set_max_batch(8);
  builds.add_targets(kTarget);
  msg("get-build-work", kGetBuildWork, 0, builds);
  v1::ReportArtifactRequest artifact;
  artifact.set_build_id(1);
  artifact.set_worker_id("worker-1");
  artifact.mutable_artifact()->set_format(v1::Artifact::FORMAT_SHARED_OBJECT);
  artifact.mutable_artifact()->set_data(std::string("\x7f") + "ELF");
  artifact.mutable_artifact()->set_entry("default_function");
  msg("report-artifact", kReportArtifact, 0, artifact);

  // SubmitModel's stream: the job, the model in chunks, the checksum.
  auto stream = [&](const std::string& name, Method m, uint8_t flags,
                    const std::vector<const google::protobuf::Message*>& messages) {
    std::string bytes;
    for (const google::protobuf::Message* message : messages) {
      const std::string s = message->SerializeAsString();
      bytes += static_cast<char>(s.size() & 0xff);
      bytes += static_cast<char>(s.size() >> 8);
      bytes += s;
    }
    seed(name, m, flags, bytes);
  };
  const std::string model = "an ONNX model";
  v1::ModelUpload first, head, tail, sum;
  head.set_chunk(model.substr(0, 5));
  tail.set_chunk(model.substr(5));
  sum.set_checksum(fnv1a64(model.data(), model.size()));
  v1::SubmitModelRequest& submit = *first.mutable_job();
  submit.set_name("resnet");
  submit.set_target("llvm -mcpu=znver4");
  submit.set_device_key(kDeviceKey);
  submit.set_trials(16);
  submit.set_priority(3);
  submit.set_owner("alice");
  submit.set_model_size(model.size());
  auto submit_seed = [&](const std::string& name) {
    stream(name, kSubmitModel, 0, {&first, &head, &tail, &sum});
  };
  submit_seed("submit-model");
  stream("submit-model-no-job", kSubmitModel, 0, {&head, &tail, &sum});
  stream("submit-model-no-checksum", kSubmitModel, 0, {&first, &head, &tail});
  stream("submit-model-job-twice", kSubmitModel, 0, {&first, &head, &first, &tail, &sum});
  stream("submit-model-empty", kSubmitModel, 0, {&first, &sum});
  sum.set_checksum(sum.checksum() + 1);
  submit_seed("submit-model-bad-checksum");
  sum.set_checksum(sum.checksum() - 1);
  submit.set_model_size(model.size() - 1);
  submit_seed("submit-model-longer-than-its-size");
  submit.set_model_size(model.size() + 1);
  submit_seed("submit-model-shorter-than-its-size");
  submit.set_model_size(1ull << 40);
  submit_seed("submit-model-over-the-limit");
  submit.set_model_size(0);  // not announced
  submit_seed("submit-model-unannounced");
  submit.set_model_size(model.size());
  submit.set_device_key("titanx");
  submit_seed("submit-model-unknown-key");
  submit.set_device_key(kDeviceKey);
  submit.set_trials(1000000);
  submit_seed("submit-model-too-many-trials");
  submit.set_trials(16);
  {  // under a budget and time limit (trials caps each task), then values kilnd refuses
    submit.set_budget(600);
    submit.set_time_limit_s(600);
    submit.set_early_stop(8);
    submit_seed("submit-model-budget");
    submit.set_time_limit_s(std::nan(""));
    submit_seed("submit-model-nan-time-limit");
    submit.set_time_limit_s(-1);
    submit_seed("submit-model-negative-time-limit");
    submit.set_time_limit_s(0);
    submit.set_budget(0);
    submit_seed("submit-model-early-stop-without-budget");
    submit.set_trials(0);
    submit.set_budget(4000000000u);
    submit_seed("submit-model-too-big-budget");
    submit.set_trials(16);
    submit.set_budget(0);
    submit.clear_early_stop();
  }
  {  // --input-shape bindings: a good one, then a zero size and a name given twice
    v1::InputShape* x = submit.add_input_shapes();
    x->set_name("x");
    for (int64_t d : {1, 3, 224, 224}) x->add_dims(d);
    submit_seed("submit-model-input-shapes");
    x->set_dims(0, 0);
    submit_seed("submit-model-input-shape-zero");
    x->set_dims(0, 1);
    *submit.add_input_shapes() = *x;
    submit_seed("submit-model-input-shape-twice");
  }

  for (uint64_t id : {1, 2, 3, 99}) {
    v1::GetJobRequest get;
    get.set_job_id(id);
    msg("get-job-" + std::to_string(id), kGetJob, 0, get);
    v1::WatchJobRequest watch;
    watch.set_job_id(id);
    msg("watch-job-" + std::to_string(id), kWatchJob, 0, watch);
    v1::FetchBundleRequest fetch;
    fetch.set_job_id(id);
    fetch.set_chunk_bytes(4096);
    msg("fetch-bundle-" + std::to_string(id), kFetchBundle, 0, fetch);
  }
  for (uint64_t id : {2, 3, 4}) {
    v1::CancelJobRequest cancel;
    cancel.set_job_id(id);
    cancel.set_reason("changed my mind");
    msg("cancel-job-" + std::to_string(id), kCancelJob, 0, cancel);
  }
  v1::ListJobsRequest list;
  list.set_owner("fuzz");
  list.add_states(v1::JOB_STATE_RUNNING);
  list.add_states(v1::JOB_STATE_DONE);
  msg("list-jobs", kListJobs, 0, list);
  list.add_states(static_cast<v1::JobState>(42));
  msg("list-jobs-unknown-state", kListJobs, 0, list);
  v1::ListDevicesRequest devices;
  devices.set_key(kDeviceKey);
  msg("list-devices", kListDevices, 0, devices);

  v1::DriverJobRequest job;
  *job.mutable_auth() = fake;
  msg("get-driver-job", kGetDriverJob, kRealAuth, job);
  msg("get-driver-job-done", kGetDriverJob, kRealAuth | kDoneDriver, job);
  msg("get-driver-job-refused", kGetDriverJob, 0, job);
  msg("fetch-model", kFetchModel, kRealAuth, job);
  msg("fetch-model-done", kFetchModel, kRealAuth | kDoneDriver, job);
  msg("fetch-model-refused", kFetchModel, 0, job);

  v1::DriverProgress progress;
  *progress.mutable_auth() = fake;
  progress.set_phase("extracting tasks");
  progress.set_has_tasks(true);
  for (const std::string& key : kTasks) {
    v1::TaskRef* t = progress.add_tasks();
    t->set_task_key(key);
    t->set_target(kTarget);
  }
  progress.add_done_tasks(1);
  progress.set_tuning_task(0);
  progress.set_trials_done(40);
  progress.set_best_latency_s(2.5e-3);
  msg("report-progress", kReportDriverProgress, kRealAuth, progress);
  progress.mutable_tasks(1)->set_target("cuda");
  msg("report-progress-other-target", kReportDriverProgress, kRealAuth, progress);
  v1::DriverProgress phase;
  *phase.mutable_auth() = fake;
  phase.set_phase("building the bundle");
  phase.set_error("the model has no outputs");
  msg("report-progress-error", kReportDriverProgress, kRealAuth | kDoneDriver, phase);

  v1::TaskRecordsRequest records;
  *records.mutable_auth() = fake;
  records.set_task_key(kTasks[0]);
  msg("get-task-records", kGetTaskRecords, authorized, records);
  records.set_best_only(true);
  msg("get-task-records-best", kGetTaskRecords, authorized, records);
  records.set_task_key("not-a-task");
  msg("get-task-records-unknown-task", kGetTaskRecords, authorized, records);

  v1::AppendRecordsRequest append;
  *append.mutable_auth() = fake;
  v1::MeasureRecord* r = append.add_records();
  r->set_target(kTarget);
  r->set_device("AMD EPYC 9654 (2 cores)");
  r->set_task_key(kTasks[1]);
  r->set_config_index(17);
  r->set_config("tile_f=[1, 4, 8, 2]");
  r->add_costs_s(2e-3);
  r->set_error(v1::ERROR_KIND_NONE);
  r->set_gflops(12.5);
  r->set_timestamp_ms(1700000000000);
  r->set_search_seed(42);
  msg("append-records", kAppendRecords, authorized, append);
  r->set_costs_s(0, -1);
  msg("append-records-negative-cost", kAppendRecords, authorized, append);
  r->set_costs_s(0, 2e-3);
  r->set_error(v1::ERROR_KIND_UNSPECIFIED);
  msg("append-records-unspecified-kind", kAppendRecords, authorized, append);

  v1::DriverJobRequest history;
  *history.mutable_auth() = fake;
  msg("get-target-history", kGetTargetHistory, authorized, history);
  v1::ShelfRequest shelf;
  *shelf.mutable_auth() = fake;
  msg("get-shelf-count", kGetShelf, authorized, shelf);
  shelf.set_name(std::string("cost-model/xgb/") + kTarget);
  msg("get-shelf", kGetShelf, authorized, shelf);
  v1::PutShelfRequest put;
  *put.mutable_auth() = fake;
  put.set_name(std::string("cost-model/xgb/") + kTarget);
  put.set_data("{\"kind\":\"xgb\"}\nmodel");
  msg("put-shelf", kPutShelf, authorized, put);
  put.set_name("cost-model/xgb/another target");
  msg("put-shelf-other-target", kPutShelf, authorized, put);

  v1::MeasureBatchRequest batch;
  *batch.mutable_auth() = fake;
  v1::TaskRef* task = batch.mutable_task();
  task->set_task_key(kTasks[0]);
  task->set_target(kTarget);
  task->set_template_name("dense");
  task->set_workload(R"({"op": "dense", "shapes": [[1, 16], [10, 16]]})");
  batch.set_flops(320);
  for (uint64_t i : {0, 2}) {  // both in the log already
    v1::Config* c = batch.add_configs();
    c->set_index(i);
    c->set_text("tile=[" + std::to_string(i) + "]");
  }
  batch.set_search_seed(7);
  v1::TensorSpec* in = batch.add_inputs();
  in->set_dtype("float32");
  in->add_shape(1);
  in->add_shape(16);
  batch.mutable_output()->set_dtype("float32");
  batch.mutable_output()->add_shape(1);
  batch.mutable_output()->add_shape(10);
  batch.set_input_seed(11);
  batch.set_rtol(1e-5);
  batch.set_atol(1e-6);
  msg("measure-batch-known", kMeasureBatch, authorized, batch);
  batch.add_configs()->set_index(1000);
  msg("measure-batch", kMeasureBatch, authorized, batch);
  batch.add_configs()->set_index(1000);
  msg("measure-batch-twice", kMeasureBatch, authorized, batch);
  batch.mutable_configs()->RemoveLast();
  batch.mutable_inputs(0)->set_dtype("complex128");
  msg("measure-batch-bad-dtype", kMeasureBatch, authorized, batch);

  auto upload = [&](const std::string& name, uint8_t flags,
                    const std::vector<v1::BundleUpload>& chunks) {
    std::vector<const google::protobuf::Message*> messages;
    for (const v1::BundleUpload& c : chunks) messages.push_back(&c);
    stream(name, kUploadBundle, flags, messages);
  };
  const std::string bundle = valid_bundle("another library");
  upload("upload-bundle", kRealAuth, bundle_chunks(bundle, fake, 64));
  upload("upload-bundle-refused", 0, bundle_chunks(bundle, fake, 1 << 20));
  std::vector<v1::BundleUpload> bad = bundle_chunks(bundle, fake, 1 << 20);
  bad.back().set_checksum(bad.back().checksum() + 1);
  upload("upload-bundle-bad-checksum", kRealAuth, bad);
  upload("upload-bundle-not-a-bundle", kRealAuth, bundle_chunks("not a bundle", fake, 4));
  std::vector<v1::BundleUpload> unfinished = bundle_chunks(bundle, fake, 64);
  unfinished.pop_back();
  upload("upload-bundle-unfinished", kRealAuth, unfinished);
}

}  // namespace kiln::fuzz_grpc
