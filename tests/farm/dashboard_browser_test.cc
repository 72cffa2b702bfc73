// The dashboard in a real browser: Debian's chromium, headless, against a kilnd started here with
// the embedded farm (a compiler worker and a CPU agent) and a small CNN being tuned. The page's
// rendered DOM is read twice: the device is listed, the job's progress moved between the reads,
// and a task's tuning curve has at least two points. A screenshot is saved as the test's artifact
// (its path is printed). chromium missing is a failure, not a skip: scripts/setup.sh installs it.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <regex>
#include <string>

#include "base/json.h"
#include "tests/common/small_cnn.h"
#include "tests/farm/farm_test_util.h"

namespace kiln {
namespace {

using testing::context;
using testing::http_get;
using testing::Kilnd;
using testing::TempDir;

std::string find_chromium() {
  if (const char* env = std::getenv("KILN_CHROMIUM"); env && *env) return env;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"})
    if (std::filesystem::exists(p)) return p;
  return "";
}

/// Runs `cmd` and returns its stdout.
std::string run(const std::string& cmd) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (!f) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  pclose(f);
  return out;
}

/// The page's DOM once its data loaded: chromium renders it (up to 3 tries: on a loaded machine
/// the virtual-time budget can end before the first fetch returns).
std::string dump_dom(const std::string& cmd, const std::string& url, const std::string& log) {
  std::string dom;
  for (int attempt = 0; attempt < 3; ++attempt) {
    dom = run(cmd + " --dump-dom '" + url + "' 2>>" + log);
    if (dom.find("data-loaded=\"1\"") != std::string::npos) break;
  }
  return dom;
}

std::string chromium_cmd(const std::string& chromium, const TempDir& dir) {
  return chromium +
         " --headless --no-sandbox --disable-gpu --disable-dev-shm-usage "
         "--no-first-run --hide-scrollbars --user-data-dir=" +
         dir.file("chromium") + " --virtual-time-budget=6000";
}

/// The value of attribute `name` in the first start tag of `html` that matches `tag_re`;
/// "" when none.
std::string attribute(const std::string& html, const std::string& tag_re, const std::string& name) {
  std::smatch m;
  if (!std::regex_search(html, m, std::regex(tag_re))) return "";
  std::smatch a;
  const std::string tag = m.str(0);
  if (!std::regex_search(tag, a, std::regex(name + "=\"([^\"]*)\""))) return "";
  return a.str(1);
}

int64_t job_trials(const std::string& http, uint64_t id) {
  const auto r = http_get(http, "/api/v1/jobs/" + std::to_string(id));
  const kiln::Json j = kiln::Json::parse(r.body, "job");
  return j.at("job", "d").at("trials_done", "job").as_int("trials_done");
}

TEST(DashboardBrowserTest, ThePageShowsTheFarmAndALiveJob) {
  const std::string chromium = find_chromium();
  ASSERT_TRUE(!chromium.empty() && std::filesystem::exists(chromium))
      << "chromium is not installed" << (chromium.empty() ? "" : " at " + chromium)
      << ": run scripts/setup.sh (it installs Debian's chromium), or set KILN_CHROMIUM to a "
         "chromium binary";

  TempDir dir("dashboard_browser");
  Kilnd kilnd(dir, {"--local-workers", "1", "--local-agent", "cpu", "--local-agent-target", "llvm",
                    "--batch", "2", "--repeat", "1"});
  const std::string& http = kilnd.http_address();
  ASSERT_TRUE(testing::eventually(
      [&] {
        return http_get(http, "/api/v1/farm").body.find("\"key\":\"cpu\"") != std::string::npos;
      },
      std::chrono::seconds(30)));

  v1::SubmitModelRequest req;
  req.set_name("small-cnn");
  req.set_target("llvm");
  req.set_device_key("cpu");
  req.set_trials(24);
  req.set_owner("ana");
  v1::SubmitModelResponse resp;
  ASSERT_TRUE(
      testing::submit_model(*kilnd.service(), *context(), req, testing::small_cnn_model(), &resp)
          .ok());
  const uint64_t id = resp.job_id();
  // Enough trials for a curve of two points.
  ASSERT_TRUE(
      testing::eventually([&] { return job_trials(http, id) >= 3; }, std::chrono::seconds(180)))
      << kilnd.process().stderr_text();

  const std::string url = "http://" + http + "/";
  const std::string cmd = chromium_cmd(chromium, dir);
  const std::string dom1 = dump_dom(cmd, url, dir.file("chromium1.log"));
  ASSERT_NE(dom1.find("data-loaded=\"1\""), std::string::npos) << "the page did not load its data\n"
                                                               << dom1.substr(0, 4000);

  // The device, by key.
  EXPECT_NE(attribute(dom1, "<div[^>]*class=\"device device-row\"[^>]*>", "data-key"), "")
      << dom1.substr(0, 4000);
  EXPECT_EQ(attribute(dom1, "<div[^>]*class=\"device device-row\"[^>]*>", "data-key"), "cpu");
  // The job's row and its trials.
  const std::string job_row = "<tr[^>]*data-job-id=\"" + std::to_string(id) + "\"[^>]*>";
  const std::string trials1 = attribute(dom1, job_row, "data-trials");
  ASSERT_FALSE(trials1.empty()) << dom1.substr(0, 4000);
  // The selected job's page: a curve per task, the first with at least two points.
  const std::string points = attribute(dom1, "<svg[^>]*class=\"curve\"[^>]*>", "data-points");
  ASSERT_FALSE(points.empty()) << dom1;
  EXPECT_GE(std::stoi(points), 2) << dom1;

  // Later: the job moved on, and the page shows it.
  const int64_t seen = std::stoll(trials1);
  ASSERT_TRUE(
      testing::eventually([&] { return job_trials(http, id) > seen; }, std::chrono::seconds(120)));
  const std::string dom2 = dump_dom(cmd, url, dir.file("chromium2.log"));
  const std::string trials2 = attribute(dom2, job_row, "data-trials");
  ASSERT_FALSE(trials2.empty()) << dom2.substr(0, 4000);
  EXPECT_GT(std::stoll(trials2), seen) << "progress did not move between the two reads";

  // The screenshot: the test's artifact.
  const std::string png = DASHBOARD_SCREENSHOT;
  std::filesystem::remove(png);
  run(cmd + " --window-size=1400,1000 --screenshot=" + png + " '" + url + "' >" +
      dir.file("chromium3.log") + " 2>&1");
  ASSERT_TRUE(std::filesystem::exists(png)) << "no screenshot at " << png;
  EXPECT_GT(std::filesystem::file_size(png), 10000u);
  std::cout << "dashboard screenshot: " << png << std::endl;
}

}  // namespace
}  // namespace kiln
