// The Grafana dashboard (deploy/farm/grafana/kiln-farm.json) queries only what kilnd exports: every
// kiln_ metric in a panel's `expr` is a family of server::Metrics (histograms through their
// _bucket, _sum and _count series), is declared in a fresh Metrics' /metrics text, and every
// family is shown by some panel; the labels a query groups by exist on that metric.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/json.h"
#include "server/metrics.h"
#include "tests/common/prometheus_text.h"

#ifndef KILN_GRAFANA_DASHBOARD
#error "KILN_GRAFANA_DASHBOARD: the path of deploy/farm/grafana/kiln-farm.json"
#endif

namespace kiln {
namespace {

using kiln::Json;

struct Query {
  std::string panel;
  std::string expr;
};

Json load_dashboard() {
  std::ifstream in(KILN_GRAFANA_DASHBOARD);
  EXPECT_TRUE(in) << "cannot read " << KILN_GRAFANA_DASHBOARD;
  std::ostringstream ss;
  ss << in.rdbuf();
  return Json::parse(ss.str(), KILN_GRAFANA_DASHBOARD);
}

/// Every target's expr in `panels`, rows' nested panels included.
void collect(const Json& panels, std::vector<Query>* out) {
  for (const Json& p : panels.as_array("panels")) {
    const std::string title = p.has("title") ? p.at("title", "panel").as_string("title") : "?";
    if (p.has("targets"))
      for (const Json& t : p.at("targets", title).as_array(title + ".targets"))
        if (t.has("expr")) out->push_back({title, t.at("expr", title).as_string(title + ".expr")});
    if (p.has("panels")) collect(p.at("panels", title), out);
  }
}

std::vector<Query> dashboard_queries() {
  std::vector<Query> queries;
  collect(load_dashboard().at("panels", "dashboard"), &queries);
  return queries;
}

/// The kiln_ names an expression reads (sample names as written, suffixes included).
std::set<std::string> names_in(const std::string& expr) {
  static const std::regex name(R"(\bkiln_[A-Za-z0-9_]*)");
  std::set<std::string> names;
  for (std::sregex_iterator it(expr.begin(), expr.end(), name), end; it != end; ++it)
    names.insert(it->str());
  return names;
}

/// The labels of `by (...)` and `without (...)` clauses, `le` excepted.
std::set<std::string> grouping_labels(const std::string& expr) {
  static const std::regex clause(R"(\b(?:by|without)\s*\(([^)]*)\))");
  static const std::regex label(R"([A-Za-z_][A-Za-z0-9_]*)");
  std::set<std::string> labels;
  for (std::sregex_iterator it(expr.begin(), expr.end(), clause), end; it != end; ++it) {
    const std::string inside = (*it)[1].str();
    for (std::sregex_iterator l(inside.begin(), inside.end(), label); l != end; ++l)
      if (l->str() != "le") labels.insert(l->str());
  }
  return labels;
}

/// The family a sample name belongs to in `exp`: the name itself, or for a histogram's
/// name_bucket / name_sum / name_count, the histogram. Empty when none.
std::string family_of(const std::string& name, const test::PromExposition& exp) {
  if (exp.find(name)) return name;
  static const std::vector<std::string> kSuffixes = {"_bucket", "_sum", "_count"};
  for (const std::string& suffix : kSuffixes) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) {
      const std::string base = name.substr(0, name.size() - suffix.size());
      const test::PromFamily* f = exp.find(base);
      if (f && (f->type == "histogram" || (f->type == "summary" && suffix != "_bucket")))
        return base;
    }
  }
  return "";
}

TEST(GrafanaMetrics, DashboardParsesAndHasQueries) {
  const Json d = load_dashboard();
  EXPECT_FALSE(d.at("title", "dashboard").as_string("title").empty());
  EXPECT_GE(dashboard_queries().size(), 10u);
}

TEST(GrafanaMetrics, EveryQueriedMetricIsExported) {
  const std::vector<std::string> names = server::Metrics::metric_names();
  const std::set<std::string> known(names.begin(), names.end());
  server::Metrics fresh;
  const test::PromExposition exp = test::parse_prometheus_text(fresh.text());
  for (const Query& q : dashboard_queries()) {
    const std::set<std::string> used = names_in(q.expr);
    EXPECT_FALSE(used.empty()) << "panel '" << q.panel << "' queries no kiln_ metric: " << q.expr;
    for (const std::string& name : used) {
      const std::string family = family_of(name, exp);
      EXPECT_FALSE(family.empty()) << "panel '" << q.panel << "' queries " << name
                                   << ", which a fresh Metrics' /metrics text does not declare";
      EXPECT_TRUE(known.count(family.empty() ? name : family))
          << "panel '" << q.panel << "' queries " << name
          << ", which is not in server::Metrics::metric_names()";
    }
  }
}

TEST(GrafanaMetrics, EveryFamilyIsShown) {
  server::Metrics fresh;
  const test::PromExposition exp = test::parse_prometheus_text(fresh.text());
  std::set<std::string> shown;
  for (const Query& q : dashboard_queries())
    for (const std::string& name : names_in(q.expr)) shown.insert(family_of(name, exp));
  for (const std::string& family : server::Metrics::metric_names())
    EXPECT_TRUE(shown.count(family)) << family << " is in metric_names() but no panel shows it";
}

TEST(GrafanaMetrics, GroupingLabelsExist) {
  // Every family with at least one series, per-key ones included.
  server::Metrics m;
  m.set_devices("rk3399", "online", 1);
  m.set_queue_depth("rk3399", 1);
  m.observe_build(0.1, true);
  m.observe_measure(0.1, ErrorKind::kNone);
  m.observe_queue_wait(0.1);
  const test::PromExposition exp = test::parse_prometheus_text(m.text());
  for (const Query& q : dashboard_queries()) {
    std::set<std::string> labels = {"instance", "job"};  // Prometheus adds these at scrape
    for (const std::string& name : names_in(q.expr)) {
      const std::string family = family_of(name, exp);
      if (const test::PromFamily* f = exp.find(family))
        for (const auto& s : f->samples)
          for (const auto& [label, value] : s.labels) labels.insert(label);
    }
    for (const std::string& label : grouping_labels(q.expr))
      EXPECT_TRUE(labels.count(label)) << "panel '" << q.panel << "' groups by '" << label
                                       << "', a label its metrics do not have: " << q.expr;
  }
}

}  // namespace
}  // namespace kiln
