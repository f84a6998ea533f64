#include "tools/handout/test_reports.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tools/handout/process.h"
#include "tools/handout/tree.h"

namespace clockwork::handout {
namespace {

using nlohmann::json;

// Keys GoogleTest writes for every test case; any other key is a RecordProperty() value.
const std::set<std::string> kStandardKeys = {"name",   "file", "line",      "status",     "result",    "timestamp",
                                             "time",   "classname", "failures", "value_param", "type_param"};

// Decodes one UTF-8 sequence at s[i]; returns its length, or 0 when it is not valid UTF-8
// (overlong forms, surrogates and code points past U+10FFFF included).
size_t utf8_sequence(const std::string& s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n = 0;
  if (c < 0x80) { cp = c; return 1; }
  if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; }
  else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; }
  else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; }
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kSmallest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

bool valid_utf8(const std::string& s) {
  uint32_t cp = 0;
  for (size_t i = 0, n = 0; i < s.size(); i += n) {
    if ((n = utf8_sequence(s, i, cp)) == 0) return false;
  }
  return true;
}

// GoogleTest's JSON writer escapes every byte of a multi-byte UTF-8 character on its own, as if
// it were a Latin-1 character ("γ" becomes "\u00CE\u00B3"), so the parsed text reads "Î³". Where
// every character of a string is below U+0100 and taking them back as bytes gives valid UTF-8,
// those bytes are what the test printed.
std::string repair_utf8(const std::string& text) {
  std::string bytes;
  bytes.reserve(text.size());
  bool changed = false;
  uint32_t cp = 0;
  for (size_t i = 0, n = 0; i < text.size(); i += n) {
    n = utf8_sequence(text, i, cp);
    if (n == 0 || cp > 0xFF) return text;
    changed |= cp >= 0x80;
    bytes.push_back(static_cast<char>(cp));
  }
  return changed && valid_utf8(bytes) ? bytes : text;
}

std::string as_text(const json& v) {
  if (v.is_string()) return repair_utf8(v.get<std::string>());
  return v.dump();
}

double parse_seconds(const json& v) {
  if (!v.is_string()) return 0;
  return std::strtod(v.get<std::string>().c_str(), nullptr);  // "0.042s"
}

}  // namespace

size_t GtestReport::passed() const {
  return static_cast<size_t>(std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.passed(); }));
}

size_t GtestReport::failed() const {
  return static_cast<size_t>(
      std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return c.ran && !c.skipped && !c.passed(); }));
}

GtestReport parse_gtest_report(const std::string& text) {
  GtestReport report;
  try {
    const json doc = json::parse(text);
    if (!doc.is_object() || !doc.contains("testsuites") || !doc["testsuites"].is_array()) {
      report.error = "not a GoogleTest JSON report (no \"testsuites\")";
      return report;
    }
    for (const json& suite : doc["testsuites"]) {
      const std::string suite_name = suite.value("name", "");
      if (!suite.contains("testsuite") || !suite["testsuite"].is_array()) continue;
      for (const json& tc : suite["testsuite"]) {
        CaseResult c;
        c.name = repair_utf8(suite_name + "." + tc.value("name", ""));
        c.ran = tc.value("status", "") == "RUN";
        c.skipped = tc.value("result", "") == "SKIPPED";
        c.seconds = tc.contains("time") ? parse_seconds(tc["time"]) : 0;
        // GoogleTest stamps a case when it starts it; one it never started keeps the epoch.
        const std::string stamp = tc.contains("timestamp") ? as_text(tc["timestamp"]) : std::string();
        c.started = !stamp.empty() && stamp.rfind("1970-01-01", 0) != 0;
        if (tc.contains("failures") && tc["failures"].is_array()) {
          for (const json& f : tc["failures"]) {
            c.failures.push_back(repair_utf8(f.is_object() ? f.value("failure", std::string("(no message)")) : as_text(f)));
          }
        }
        for (auto it = tc.begin(); it != tc.end(); ++it) {
          if (kStandardKeys.count(it.key()) == 0) c.properties[it.key()] = as_text(it.value());
        }
        report.cases.push_back(std::move(c));
      }
    }
    report.valid = true;
  } catch (const std::exception& e) {
    report.error = std::string("unreadable GoogleTest report: ") + e.what();
  }
  return report;
}

GtestReport read_gtest_report(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    GtestReport r;
    r.error = "the test program wrote no report";
    return r;
  }
  try {
    return parse_gtest_report(read_file(file));
  } catch (const std::exception& e) {
    GtestReport r;
    r.error = e.what();
    return r;
  }
}

bool CtestTest::has_label(const std::string& label) const {
  return std::find(labels.begin(), labels.end(), label) != labels.end();
}

std::string CtestTest::target() const {
  if (!command.empty()) return std::filesystem::path(command[0]).filename().string();
  for (const char* backend : {".sim", ".check", ".cuda"}) {
    const std::string suffix = backend;
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return name.substr(0, name.size() - suffix.size()) + "_" + suffix.substr(1);
    }
  }
  return name;
}

std::vector<CtestTest> parse_ctest_listing(const std::string& text) {
  std::vector<CtestTest> tests;
  try {
    const json doc = json::parse(text);
    for (const json& t : doc.at("tests")) {
      CtestTest c;
      c.name = t.at("name").get<std::string>();
      if (t.contains("command")) c.command = t["command"].get<std::vector<std::string>>();
      if (t.contains("properties")) {
        for (const json& p : t["properties"]) {
          const std::string name = p.value("name", "");
          const json& v = p.contains("value") ? p["value"] : json();
          if (name == "LABELS" && v.is_array()) c.labels = v.get<std::vector<std::string>>();
          if (name == "WORKING_DIRECTORY" && v.is_string()) c.working_directory = v.get<std::string>();
          if (name == "TIMEOUT" && v.is_number()) c.timeout_s = v.get<double>();
          if (name == "ENVIRONMENT" && v.is_array()) c.environment = v.get<std::vector<std::string>>();
        }
      }
      tests.push_back(std::move(c));
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("unreadable ctest listing: ") + e.what());
  }
  return tests;
}

std::vector<CtestTest> list_ctest_tests(const std::string& ctest, const std::filesystem::path& build_dir) {
  RunOptions o;
  o.argv = {"sh", "-c", "exec \"$@\" 2>/dev/null", ctest, ctest, "--show-only=json-v1"};
  o.cwd = build_dir;
  o.timeout_s = 120;
  o.max_output = 64 * 1024 * 1024;
  const RunResult r = run_process(o);
  if (!r.succeeded()) throw std::runtime_error("ctest --show-only=json-v1 in " + build_dir.string() + ": " + r.describe());
  return parse_ctest_listing(r.output);
}

}  // namespace clockwork::handout
