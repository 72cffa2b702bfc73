// The device registry and the Tracker object on a fake clock: leases and expiry, the re-queue of
// a dropped device's in-flight work onto another device, quarantine after repeated crashes,
// counts by key and state, and results appended to the record log.
#include <gtest/gtest.h>

#include "records/record_log.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"
#include "tracker/device_registry.h"
#include "tracker/tracker.h"

namespace kiln::tracker {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TrackerOptions options(Duration lease, int max_attempts = 3, int quarantine_after = 3,
                       Duration max_queue_wait = std::chrono::minutes(15)) {
  TrackerOptions o;
  o.registry.lease = lease;
  o.registry.quarantine_after = quarantine_after;
  o.queue.max_attempts = max_attempts;
  o.max_queue_wait = max_queue_wait;
  return o;
}

RegistryOptions registry_options(Duration lease, int capacity = 1) {
  RegistryOptions o;
  o.lease = lease;
  o.capacity = capacity;
  return o;
}

MeasureOutcome ok(std::vector<double> costs, double gflops = 0) {
  MeasureOutcome o;
  o.costs_s = std::move(costs);
  o.gflops = gflops;
  return o;
}

MeasureOutcome failed(ErrorKind e, const std::string& msg = "", std::vector<double> costs = {}) {
  MeasureOutcome o;
  o.error = e;
  o.error_msg = msg;
  o.costs_s = std::move(costs);
  return o;
}

MeasureSpec spec(JobId job, const std::string& key, uint64_t config = 0) {
  MeasureSpec s;
  s.job_id = job;
  s.task_key = "dense_x86:1x64:abcd";
  s.config_index = config;
  s.target = "llvm -mcpu=znver4";
  s.device_key = key;
  return s;
}

TEST(TrackerRegistry, LeaseRenewedByHeartbeatsAndExpires) {
  FakeClock clock;
  DeviceRegistry reg(clock, registry_options(seconds(10)));
  DeviceId a = reg.register_device("rk3399", "llvm -mtriple=aarch64-linux-gnu");
  DeviceId b = reg.register_device("rk3399", "llvm -mtriple=aarch64-linux-gnu");
  EXPECT_NE(a, b);
  clock.advance(seconds(8));
  EXPECT_TRUE(reg.heartbeat(a));
  clock.advance(seconds(8));  // a: 8 s since its heartbeat; b: 16 s since it registered
  auto dropped = reg.expire();
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].id, b);
  EXPECT_EQ(reg.find(b), nullptr);
  EXPECT_FALSE(reg.heartbeat(b));  // must register again
  EXPECT_NE(reg.find(a), nullptr);
  EXPECT_TRUE(reg.heartbeat(a));
  clock.advance(seconds(10));  // exactly at the lease: still alive
  EXPECT_TRUE(reg.expire().empty());
  clock.advance(milliseconds(1));
  EXPECT_EQ(reg.expire().size(), 1u);
  EXPECT_EQ(reg.size(), 0u);
}

TEST(TrackerRegistry, RejectsEmptyKeyOrTarget) {
  FakeClock clock;
  DeviceRegistry reg(clock);
  EXPECT_ERROR_CONTAINS(reg.register_device("", "llvm"), "device key is empty");
  EXPECT_ERROR_CONTAINS(reg.register_device("rk3399", ""), "'rk3399'");
  EXPECT_ERROR_CONTAINS(reg.quarantine(99, "x"), "no device with id 99");
}

// One key is measured on real devices or under emulation, never both at once.
TEST(TrackerRegistry, AKeyIsEmulatedOrRealNeverBoth) {
  FakeClock clock;
  DeviceRegistry reg(clock, registry_options(seconds(10)));
  const DeviceId e = reg.register_device("a53", "llvm -mtriple=aarch64-linux-gnu", {}, true);
  EXPECT_TRUE(reg.key_emulated("a53"));
  EXPECT_FALSE(reg.key_emulated("rpi"));
  EXPECT_ERROR_CONTAINS(reg.register_device("a53", "llvm -mtriple=aarch64-linux-gnu", {}, false),
                        "key 'a53' is measured under emulation (device 1)");
  reg.register_device("a53", "llvm -mtriple=aarch64-linux-gnu", {}, true);  // another emulated
  reg.register_device("rpi", "llvm -mtriple=aarch64-linux-gnu", {}, false);
  EXPECT_ERROR_CONTAINS(reg.register_device("rpi", "llvm -mtriple=aarch64-linux-gnu", {}, true),
                        "an emulated agent must register under another key");
  reg.remove(e);
  reg.remove(2);
  EXPECT_NO_THROW(reg.register_device("a53", "llvm -mtriple=aarch64-linux-gnu", {}, false))
      << "once its emulated devices are gone, a key may take real ones";
}

// A device's clock readings: later ones are fine, and so are earlier ones within the slack (a
// heartbeat and a result cross on the way, a result is retried with its first reading); one
// further back gives the reason.
TEST(TrackerRegistry, AClockRunningBackwardsIsNamed) {
  FakeClock clock;
  RegistryOptions o = registry_options(seconds(10));
  o.clock_slack = seconds(30);
  DeviceRegistry reg(clock, o);
  const DeviceId d = reg.register_device("cpu", "llvm");
  EXPECT_FALSE(reg.observe_clock(d, 100000));
  EXPECT_FALSE(reg.observe_clock(d, 100000));
  EXPECT_FALSE(reg.observe_clock(d, 0)) << "0: not sent";
  EXPECT_FALSE(reg.observe_clock(d, 150000));
  EXPECT_FALSE(reg.observe_clock(d, 125000)) << "25 s back: a delayed message";
  EXPECT_FALSE(reg.observe_clock(d, 120000)) << "30 s back: still within the slack";
  const auto why = reg.observe_clock(d, 119999);
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("from 150000 ms to 119999 ms"), std::string::npos) << *why;
  EXPECT_FALSE(reg.observe_clock(99, 1)) << "unknown device";
}

TEST(TrackerRegistry, ExpiredDeviceWorkIsRequeuedToAnotherDevice) {
  FakeClock clock;
  Tracker t(clock, options(seconds(10)));
  DeviceId a = t.devices().register_device("rk3399", "llvm -mtriple=aarch64-linux-gnu");
  RequestId r = t.queue().enqueue(spec(1, "rk3399", 5));
  auto got = t.dispatch(a);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->id, r);
  EXPECT_EQ(t.devices().find(a)->in_flight.count(r), 1u);
  EXPECT_FALSE(t.dispatch(a)) << "capacity 1: busy";

  clock.advance(seconds(5));
  DeviceId b = t.devices().register_device("rk3399", "llvm -mtriple=aarch64-linux-gnu");
  EXPECT_FALSE(t.dispatch(b)) << "nothing pending while a holds the request";
  clock.advance(seconds(6));  // a missed its heartbeats; b registered 6 s ago
  auto m = t.tick();
  ASSERT_EQ(m.dropped.size(), 1u);
  EXPECT_EQ(m.dropped[0].id, a);
  EXPECT_EQ(m.dropped[0].in_flight, std::vector<RequestId>{r});
  EXPECT_EQ(m.requeued, 1u);
  EXPECT_TRUE(m.given_up.empty());

  clock.advance(seconds(2));
  ASSERT_TRUE(t.devices().heartbeat(b));
  auto retry = t.dispatch(b);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->id, r);
  EXPECT_EQ(retry->device, b);
  EXPECT_EQ(retry->attempts, 1);
  EXPECT_EQ(retry->config_index, 5u);
  // The dropped device's late report is stale and ignored; b's is taken.
  EXPECT_FALSE(t.report(r, a, ok({1e-3})));
  clock.advance(milliseconds(250));
  auto rep = t.report(r, b, ok({1e-3}));
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->completion.run, milliseconds(250));
  EXPECT_EQ(rep->completion.queued, seconds(2)) << "queued (waiting for b) apart from run time";
  EXPECT_FALSE(t.report(r, b, MeasureOutcome()));  // twice: stale
  EXPECT_TRUE(t.devices().find(b)->in_flight.empty());
}

TEST(TrackerRegistry, DeviceLeavingRequeuesItsWork) {
  FakeClock clock;
  Tracker t(clock, options(seconds(10)));
  DeviceId a = t.devices().register_device("pi", "llvm");
  DeviceId b = t.devices().register_device("pi", "llvm");
  RequestId r = t.queue().enqueue(spec(1, "pi"));
  ASSERT_TRUE(t.dispatch(a));
  EXPECT_TRUE(t.remove_device(a).empty());
  EXPECT_TRUE(t.remove_device(a).empty()) << "unknown now";
  auto retry = t.dispatch(b);
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->id, r);
  EXPECT_EQ(retry->attempts, 1);
}

TEST(TrackerRegistry, RequestGivenUpAfterMaxAttempts) {
  FakeClock clock;
  Tracker t(clock, options(seconds(10), 2));
  RequestId r = t.queue().enqueue(spec(1, "pi"));
  for (int attempt = 0; attempt < 2; ++attempt) {
    DeviceId d = t.devices().register_device("pi", "llvm");
    ASSERT_TRUE(t.dispatch(d));
    clock.advance(seconds(11));
    auto m = t.tick();
    ASSERT_EQ(m.dropped.size(), 1u);
    if (attempt == 0) {
      EXPECT_EQ(m.requeued, 1u);
    } else {
      ASSERT_EQ(m.given_up.size(), 1u);
      EXPECT_EQ(m.given_up[0].request.id, r);
      EXPECT_EQ(m.given_up[0].kind, GiveUpKind::kDeviceLost);
      EXPECT_NE(m.given_up[0].reason.find("missed its heartbeats"), std::string::npos);
    }
  }
  EXPECT_EQ(t.queue().find(r), nullptr);
  EXPECT_EQ(t.queue().pending(), 0u);
}

TEST(TrackerRegistry, QueueTimeoutIsNotARunTimeout) {
  FakeClock clock;
  Tracker t(clock, options(seconds(100), 3, 3, seconds(60)));
  t.queue().enqueue(spec(1, "no-such-board"));
  DeviceId d = t.devices().register_device("pi", "llvm");
  RequestId slow = t.queue().enqueue(spec(1, "pi"));
  ASSERT_TRUE(t.dispatch(d));
  clock.advance(seconds(30));
  t.devices().heartbeat(d);
  EXPECT_TRUE(t.tick().given_up.empty());
  clock.advance(seconds(31));
  t.devices().heartbeat(d);
  auto m = t.tick();
  ASSERT_EQ(m.given_up.size(), 1u) << "the in-flight request's long run is not a queue wait";
  EXPECT_EQ(m.given_up[0].kind, GiveUpKind::kQueueTimeout);
  EXPECT_EQ(m.given_up[0].request.device_key, "no-such-board");
  EXPECT_NE(m.given_up[0].reason.find("in the queue"), std::string::npos);
  auto rep = t.report(slow, d, failed(ErrorKind::kRunTimeout));
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->completion.queued, Duration::zero());
  EXPECT_EQ(rep->completion.run, seconds(61));
}

TEST(TrackerRegistry, QuarantineAfterConsecutiveCrashes) {
  FakeClock clock;
  Tracker t(clock, options(seconds(10), 3, 3));
  DeviceId d = t.devices().register_device("pi", "llvm");
  DeviceId other = t.devices().register_device("pi", "llvm");
  for (int i = 0; i < 10; ++i) t.queue().enqueue(spec(1, "pi", i));

  auto run = [&](ErrorKind e) {
    auto req = t.dispatch(d);
    EXPECT_TRUE(req);
    auto rep = t.report(req->id, d, failed(e));
    EXPECT_TRUE(rep);
    return rep->quarantined;
  };
  EXPECT_FALSE(run(ErrorKind::kCrash));
  EXPECT_FALSE(run(ErrorKind::kRunTimeout));
  EXPECT_FALSE(run(ErrorKind::kNone));  // a success resets the count
  EXPECT_FALSE(run(ErrorKind::kCrash));
  EXPECT_FALSE(run(ErrorKind::kWrongAnswer));  // the config's fault, not the device's: resets
  EXPECT_FALSE(run(ErrorKind::kCrash));
  EXPECT_FALSE(run(ErrorKind::kCrash));
  EXPECT_TRUE(run(ErrorKind::kRunTimeout));
  const Device* dev = t.devices().find(d);
  EXPECT_TRUE(dev->quarantined);
  EXPECT_NE(dev->quarantine_reason.find("3 crashed or timed-out runs in a row"), std::string::npos)
      << dev->quarantine_reason;
  EXPECT_FALSE(t.dispatch(d)) << "a quarantined device gets no work";
  EXPECT_TRUE(t.dispatch(other));

  auto counts = t.devices().counts();
  EXPECT_EQ(counts["pi"], (KeyCounts{.online = 0, .busy = 1, .quarantined = 1}));
  t.devices().release_quarantine(d);
  EXPECT_TRUE(t.dispatch(d));
  EXPECT_EQ(t.devices().counts()["pi"], (KeyCounts{.online = 0, .busy = 2, .quarantined = 0}));
}

TEST(TrackerRegistry, CountsByKeyAndState) {
  FakeClock clock;
  DeviceRegistry reg(clock, registry_options(seconds(10), 2));
  DeviceId a = reg.register_device("pi", "llvm");
  reg.register_device("pi", "llvm");
  DeviceId c = reg.register_device("titanx", "cuda");
  reg.assign(a, 1);
  EXPECT_TRUE(reg.can_take_work(a));
  reg.assign(a, 2);
  EXPECT_FALSE(reg.can_take_work(a));
  reg.quarantine(c, "operator: fan failure");
  auto counts = reg.counts();
  EXPECT_EQ(counts["pi"], (KeyCounts{.online = 1, .busy = 1, .quarantined = 0}));
  EXPECT_EQ(counts["titanx"], (KeyCounts{.online = 0, .busy = 0, .quarantined = 1}));
  EXPECT_STREQ(device_state_name(reg.find(c)->state(2)), "quarantined");
  reg.release(a, 1);
  EXPECT_TRUE(reg.can_take_work(a));
}

TEST(TrackerRegistry, ResultsBecomeRecordsForTheLog) {
  kiln::testing::TempDir dir;
  auto log = records::RecordLog::open(dir.file("records"));
  FakeClock clock;
  Tracker t(clock, TrackerOptions());
  DeviceId d = t.devices().register_device("pi", "llvm -mcpu=cortex-a53",
                                           {{"fingerprint", "pi4-serial-1234"}});
  t.queue().enqueue(spec(1, "pi", 11));
  t.queue().enqueue(spec(1, "pi", 12));
  auto r1 = t.dispatch(d);
  MeasureOutcome busy = ok({2e-3, 2.2e-3}, 1.5);
  busy.contended = true;  // the agent's CPU was shared: the record says so
  auto rep1 = t.report(r1->id, d, busy);
  ASSERT_TRUE(rep1);
  log.append(rep1->record);
  auto r2 = t.dispatch(d);
  auto rep2 = t.report(r2->id, d, failed(ErrorKind::kCrash, "SIGSEGV", {1.0}));
  ASSERT_TRUE(rep2);
  log.append(rep2->record);

  auto records = log.records("dense_x86:1x64:abcd", "llvm -mcpu=znver4");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].device, "pi4-serial-1234");
  EXPECT_EQ(records[0].config_index, 11u);
  EXPECT_EQ(records[0].timestamp_ms, clock.unix_ms());
  EXPECT_TRUE(records[0].contended);
  EXPECT_EQ(records[1].error, ErrorKind::kCrash);
  EXPECT_FALSE(records[1].contended);
  EXPECT_TRUE(records[1].costs_s.empty()) << "no costs for an error";
  EXPECT_TRUE(log.measured("dense_x86:1x64:abcd", "llvm -mcpu=znver4", 12));
  EXPECT_EQ(log.best("dense_x86:1x64:abcd", "llvm -mcpu=znver4")->config_index, 11u);
}

}  // namespace
}  // namespace kiln::tracker
