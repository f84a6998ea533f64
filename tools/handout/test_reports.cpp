#include "tools/handout/test_reports.h"

#include <algorithm>
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

std::string as_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
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
        c.name = suite_name + "." + tc.value("name", "");
        c.ran = tc.value("status", "") == "RUN";
        c.skipped = tc.value("result", "") == "SKIPPED";
        c.seconds = tc.contains("time") ? parse_seconds(tc["time"]) : 0;
        if (tc.contains("failures") && tc["failures"].is_array()) {
          for (const json& f : tc["failures"]) {
            c.failures.push_back(f.is_object() ? f.value("failure", std::string("(no message)")) : as_text(f));
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
