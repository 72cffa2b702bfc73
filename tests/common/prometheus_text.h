// A small, strict parser of the Prometheus text exposition format 0.0.4, for tests.
//
//   auto exp = kiln::test::parse_prometheus_text(metrics.text());   // throws PrometheusTextError
//   const auto* f = exp.find("kiln_builds_total");                  // family: type, help, samples
//   double ok = exp.value("kiln_builds_total", {{"result", "ok"}});
//
// What it checks (the error names the line, "line 7: ..."):
// - every line ends with '\n'; empty lines are skipped; comments other than HELP/TYPE are ignored;
// - `# HELP name text` (escapes \\ and \n) and `# TYPE name T` with T one of counter, gauge,
//   histogram, summary, untyped; at most one of each per family, TYPE before its first sample;
// - samples `name{label="value",...} value [timestamp]`: metric and label names by the format's
//   character rules, label values with only the escapes \\ \" \n, no duplicate label names, a
//   float value (also +Inf, -Inf, NaN in any case), an optional integer timestamp;
// - a sample belongs to the family declared last when its name fits that family's type
//   (histogram: name_bucket with le, name_sum, name_count; summary: name, name_sum, name_count);
//   a sample of an undeclared name starts an untyped family; a family's lines are not split
//   apart, and no sample (name + labels) appears twice;
// - counters are not negative; histograms: for every label set, _sum, _count and buckets are
//   present, le values are distinct floats, counts are cumulative (non-decreasing with le), the
//   last bucket is le="+Inf" and equals _count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::test {

using PromLabels = std::map<std::string, std::string>;

struct PromSample {
  std::string name;  ///< the sample's own name (e.g. "kiln_build_seconds_bucket")
  PromLabels labels;
  double value = 0;
  std::optional<int64_t> timestamp_ms;
  int line = 0;
};

struct PromFamily {
  std::string name;
  std::string type = "untyped";  ///< counter, gauge, histogram, summary, untyped
  std::string help;
  bool has_type = false;
  bool has_help = false;
  std::vector<PromSample> samples;
  int line = 0;  ///< where it starts
};

class PrometheusTextError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct PromExposition {
  std::vector<PromFamily> families;

  const PromFamily* find(const std::string& family) const {
    for (const auto& f : families)
      if (f.name == family) return &f;
    return nullptr;
  }
  /// The sample `name` with exactly `labels`, or nullptr.
  const PromSample* sample(const std::string& name, const PromLabels& labels = {}) const {
    for (const auto& f : families)
      for (const auto& s : f.samples)
        if (s.name == name && s.labels == labels) return &s;
    return nullptr;
  }
  /// The value of the sample `name` with exactly `labels`; PrometheusTextError when absent.
  double value(const std::string& name, const PromLabels& labels = {}) const {
    const PromSample* s = sample(name, labels);
    if (!s) {
      std::string l;
      for (const auto& [k, v] : labels) l += (l.empty() ? "" : ",") + k + "=\"" + v + "\"";
      throw PrometheusTextError("no sample " + name + "{" + l + "}");
    }
    return s->value;
  }
  /// The sum of every sample named `name` (all label sets).
  double sum(const std::string& name) const {
    double total = 0;
    for (const auto& f : families)
      for (const auto& s : f.samples)
        if (s.name == name) total += s.value;
    return total;
  }
};

namespace prom_detail {

inline bool is_name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
inline bool is_name_char(char c, bool colon) {
  return is_name_start(c, colon) || (c >= '0' && c <= '9');
}
inline bool valid_name(const std::string& s, bool colon) {
  if (s.empty() || !is_name_start(s[0], colon)) return false;
  for (char c : s)
    if (!is_name_char(c, colon)) return false;
  return true;
}
class Parser {
 public:
  explicit Parser(const std::string& text) : text_(text) {}

  PromExposition run() {
    if (!text_.empty() && text_.back() != '\n')
      fail_at(count_lines(), "the text does not end with a newline");
    size_t pos = 0;
    while (pos < text_.size()) {
      size_t end = text_.find('\n', pos);
      ++line_;
      std::string l = text_.substr(pos, end - pos);
      pos = end + 1;
      if (l.empty()) continue;
      if (l.find('\r') != std::string::npos) fail("carriage return in the line");
      if (l[0] == '#')
        comment(l);
      else
        sample_line(l);
    }
    for (const auto& f : out_.families) check_family(f);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& msg) const { fail_at(line_, msg); }
  [[noreturn]] static void fail_at(int line, const std::string& msg) {
    throw PrometheusTextError("line " + std::to_string(line) + ": " + msg);
  }
  int count_lines() const {
    int n = 1;
    for (char c : text_) n += c == '\n';
    return n;
  }

  // The family named `name`, created (at the end) when new; families may not be reopened once
  // another family's lines came after them.
  PromFamily& family(const std::string& name) {
    if (!out_.families.empty() && out_.families.back().name == name) return out_.families.back();
    if (closed_.count(name)) fail("the lines of family " + name + " are not together");
    if (!out_.families.empty()) closed_.insert(out_.families.back().name);
    PromFamily f;
    f.name = name;
    f.line = line_;
    out_.families.push_back(std::move(f));
    return out_.families.back();
  }

  void comment(const std::string& l) {
    // "# HELP name text" / "# TYPE name type"; any other comment is ignored.
    size_t p = 1;
    while (p < l.size() && l[p] == ' ') ++p;
    size_t kw_end = l.find(' ', p);
    std::string kw = l.substr(p, kw_end == std::string::npos ? std::string::npos : kw_end - p);
    if (kw != "HELP" && kw != "TYPE") return;
    if (kw_end == std::string::npos) fail("# " + kw + " without a metric name");
    p = kw_end;
    while (p < l.size() && l[p] == ' ') ++p;
    size_t name_end = l.find(' ', p);
    std::string name =
        l.substr(p, name_end == std::string::npos ? std::string::npos : name_end - p);
    if (!valid_name(name, true)) fail("bad metric name \"" + name + "\" in # " + kw);
    std::string rest = name_end == std::string::npos ? "" : l.substr(name_end + 1);
    PromFamily& f = family(name);
    if (kw == "HELP") {
      if (f.has_help) fail("second # HELP for " + name);
      f.has_help = true;
      f.help = unescape_help(rest);
    } else {
      if (f.has_type) fail("second # TYPE for " + name);
      if (!f.samples.empty()) fail("# TYPE for " + name + " after its samples");
      while (!rest.empty() && rest.back() == ' ') rest.pop_back();
      static const std::set<std::string> kTypes = {"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
      if (!kTypes.count(rest)) fail("unknown type \"" + rest + "\" for " + name);
      f.has_type = true;
      f.type = rest;
    }
  }

  std::string unescape_help(const std::string& s) const {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out += s[i];
        continue;
      }
      if (++i == s.size()) fail("a backslash ends the # HELP text");
      if (s[i] == '\\')
        out += '\\';
      else if (s[i] == 'n')
        out += '\n';
      else
        fail(std::string("bad escape \\") + s[i] + " in # HELP text");
    }
    return out;
  }

  // Which family a sample named `name` (with or without le / quantile) belongs to: the current
  // one when the name fits its type, else a new untyped family of that name.
  PromFamily& family_of_sample(const std::string& name) {
    if (!out_.families.empty()) {
      PromFamily& f = out_.families.back();
      const std::string& t = f.type;
      bool fits = false;
      if (t == "histogram")
        fits = name == f.name + "_bucket" || name == f.name + "_sum" || name == f.name + "_count";
      else if (t == "summary")
        fits = name == f.name || name == f.name + "_sum" || name == f.name + "_count";
      else
        fits = name == f.name;
      if (fits) return f;
    }
    for (const auto& f : out_.families) {
      if (f.name == name && &f == &out_.families.back())
        fail("sample " + name + " does not fit " + f.type + " family " + f.name);
      if (f.name == name) fail("the lines of family " + name + " are not together");
      if ((f.type == "histogram" || f.type == "summary") &&
          (name == f.name + "_sum" || name == f.name + "_count" || name == f.name + "_bucket"))
        fail("sample " + name + " apart from the lines of family " + f.name);
    }
    return family(name);
  }

  void sample_line(const std::string& l) {
    size_t p = 0;
    while (p < l.size() && is_name_char(l[p], true)) ++p;
    std::string name = l.substr(0, p);
    if (!valid_name(name, true)) fail("bad metric name at the start of \"" + l + "\"");
    PromSample s;
    s.name = name;
    s.line = line_;
    if (p < l.size() && l[p] == '{') p = labels(l, p + 1, s.labels);
    if (p >= l.size() || (l[p] != ' ' && l[p] != '\t')) fail("expected a space before the value");
    while (p < l.size() && (l[p] == ' ' || l[p] == '\t')) ++p;
    size_t v_end = p;
    while (v_end < l.size() && l[v_end] != ' ' && l[v_end] != '\t') ++v_end;
    s.value = parse_value(l.substr(p, v_end - p));
    p = v_end;
    while (p < l.size() && (l[p] == ' ' || l[p] == '\t')) ++p;
    if (p < l.size()) {
      std::string ts = l.substr(p);
      while (!ts.empty() && (ts.back() == ' ' || ts.back() == '\t')) ts.pop_back();
      size_t i = ts[0] == '-' ? 1 : 0;
      if (i == ts.size()) fail("bad timestamp \"" + ts + "\"");
      for (size_t j = i; j < ts.size(); ++j)
        if (ts[j] < '0' || ts[j] > '9') fail("bad timestamp \"" + ts + "\"");
      s.timestamp_ms = std::stoll(ts);
    }

    PromFamily& f = family_of_sample(name);
    if (f.type == "histogram" && name == f.name + "_bucket" && !s.labels.count("le"))
      fail("histogram bucket " + name + " without an le label");
    if (f.type == "histogram" && name != f.name + "_bucket" && s.labels.count("le"))
      fail("le label on " + name + ", which is not a bucket");
    if (f.type == "summary" && name == f.name && !s.labels.count("quantile"))
      fail("summary sample " + name + " without a quantile label");
    if (f.type == "counter" && s.value < 0) fail("counter " + name + " is negative");
    std::string key = name + "{" + labels_key(s.labels) + "}";
    if (!seen_.insert(key).second) fail("duplicate sample " + key);
    f.samples.push_back(std::move(s));
  }

  // Parses label pairs after '{' up to and including '}'; returns the position after '}'.
  size_t labels(const std::string& l, size_t p, PromLabels& out) {
    while (true) {
      if (p >= l.size()) fail("unterminated label set");
      if (l[p] == '}') return p + 1;
      size_t n_end = p;
      while (n_end < l.size() && is_name_char(l[n_end], false)) ++n_end;
      std::string lname = l.substr(p, n_end - p);
      if (!valid_name(lname, false)) fail("bad label name at column " + std::to_string(p + 1));
      p = n_end;
      if (p + 1 >= l.size() || l[p] != '=' || l[p + 1] != '"')
        fail("expected =\" after label " + lname);
      p += 2;
      std::string value;
      while (true) {
        if (p >= l.size()) fail("unterminated value of label " + lname);
        char c = l[p++];
        if (c == '"') break;
        if (c != '\\') {
          value += c;
          continue;
        }
        if (p >= l.size()) fail("unterminated value of label " + lname);
        char e = l[p++];
        if (e == '\\' || e == '"')
          value += e;
        else if (e == 'n')
          value += '\n';
        else
          fail(std::string("bad escape \\") + e + " in the value of label " + lname);
      }
      if (!out.emplace(lname, value).second) fail("duplicate label " + lname);
      if (p < l.size() && l[p] == ',') {
        ++p;
      } else if (p >= l.size() || l[p] != '}') {
        fail("expected , or } after the value of label " + lname);
      }
    }
  }

  double parse_value(const std::string& v) const {
    if (v.empty()) fail("missing value");
    if (v == "+Inf" || v == "Inf") return INFINITY;
    if (v == "-Inf") return -INFINITY;
    std::string lower;
    for (char c : v) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    if (lower == "nan") return NAN;
    for (char c : v)
      if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
        fail("bad value \"" + v + "\"");
    char* end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (end != v.c_str() + v.size()) fail("bad value \"" + v + "\"");
    return d;
  }

  static std::string labels_key(const PromLabels& labels) {
    std::string k;
    for (const auto& [n, v] : labels) k += (k.empty() ? "" : ",") + n + "=\"" + v + "\"";
    return k;
  }

  void check_family(const PromFamily& f) const {
    if (f.type != "histogram") return;
    struct Group {
      std::vector<std::pair<double, const PromSample*>> buckets;
      const PromSample* sum = nullptr;
      const PromSample* count = nullptr;
      int line = 0;
    };
    std::map<std::string, Group> groups;  // by labels without le
    for (const auto& s : f.samples) {
      PromLabels rest = s.labels;
      rest.erase("le");
      Group& g = groups[labels_key(rest)];
      if (!g.line) g.line = s.line;
      if (s.name == f.name + "_sum") {
        g.sum = &s;
      } else if (s.name == f.name + "_count") {
        g.count = &s;
      } else {
        const std::string& le = s.labels.at("le");
        double bound;
        try {
          bound = parse_value(le);
        } catch (const PrometheusTextError&) {
          fail_at(s.line, "bad le \"" + le + "\" in " + s.name);
        }
        if (std::isnan(bound)) fail_at(s.line, "le is NaN in " + s.name);
        for (const auto& [b, other] : g.buckets)
          if (b == bound) fail_at(s.line, "two buckets with le " + le + " in " + f.name);
        g.buckets.emplace_back(bound, &s);
      }
    }
    for (auto& [key, g] : groups) {
      std::string where = f.name + "{" + key + "}";
      if (!g.count) fail_at(g.line, "histogram " + where + " has no _count");
      if (!g.sum) fail_at(g.line, "histogram " + where + " has no _sum");
      if (g.buckets.empty()) fail_at(g.line, "histogram " + where + " has no buckets");
      std::sort(g.buckets.begin(), g.buckets.end(),
                [](const auto& a, const auto& b) { return a.first < b.first; });
      for (size_t i = 1; i < g.buckets.size(); ++i)
        if (g.buckets[i].second->value < g.buckets[i - 1].second->value)
          fail_at(g.buckets[i].second->line,
                  "histogram " + where + " buckets are not cumulative (le " +
                      g.buckets[i].second->labels.at("le") + " has fewer than le " +
                      g.buckets[i - 1].second->labels.at("le") + ")");
      const auto& [last_bound, last] = g.buckets.back();
      if (!std::isinf(last_bound))
        fail_at(last->line, "histogram " + where + " has no le=\"+Inf\" bucket");
      if (last->value != g.count->value)
        fail_at(last->line, "histogram " + where + " le=\"+Inf\" bucket (" +
                                std::to_string(last->value) + ") differs from _count (" +
                                std::to_string(g.count->value) + ")");
    }
  }

  const std::string& text_;
  int line_ = 0;
  PromExposition out_;
  std::set<std::string> closed_;
  std::set<std::string> seen_;
};

}  // namespace prom_detail

/// Parses `text` (see the header comment); PrometheusTextError naming the line otherwise.
inline PromExposition parse_prometheus_text(const std::string& text) {
  return prom_detail::Parser(text).run();
}

}  // namespace kiln::test
