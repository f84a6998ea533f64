#include "grading/results.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace clockwork::grading {
namespace {

using nlohmann::json;
using handout::shorten;

constexpr size_t kTailForCrash = 3000;  // how much of a crashed program's output to show

std::string seconds_text(double s) {
  std::ostringstream o;
  o.precision(s < 10 ? 2 : 0);
  o << std::fixed << s << " s";
  return o.str();
}

// Numeric value of a recorded property, if it is one.
bool parse_number(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && end && *end == '\0' && std::isfinite(v);
}

std::string tail(const std::string& s, size_t n) { return shorten(s, n, 0.15); }

}  // namespace

std::string unfinished_case(const std::string& output) {
  // GoogleTest prints "[ RUN      ] Suite.Case" and then "[       OK ] Suite.Case" or
  // "[  FAILED  ] Suite.Case" (or SKIPPED); a case with no closing line was running at the end.
  const std::string run_tag = "[ RUN      ] ";
  const size_t pos = output.rfind(run_tag);
  if (pos == std::string::npos) return {};
  const size_t start = pos + run_tag.size();
  const size_t eol = output.find('\n', start);
  const std::string name = output.substr(start, eol == std::string::npos ? std::string::npos : eol - start);
  if (name.empty()) return {};
  for (const char* closing : {"[       OK ] ", "[  FAILED  ] ", "[  SKIPPED ] "}) {
    if (output.find(std::string(closing) + name, start) != std::string::npos) return {};
  }
  return name;
}

std::set<std::string> cases_passed_in_output(const std::filesystem::path& log) {
  std::set<std::string> names;
  std::ifstream in(log, std::ios::binary);
  const std::string ok = "[       OK ] ";
  std::string line;
  while (std::getline(in, line)) {
    const size_t at = line.find(ok);
    if (at == std::string::npos) continue;
    const size_t start = at + ok.size();
    const size_t end = line.find(" (", start);
    names.insert(line.substr(start, end == std::string::npos ? std::string::npos : end - start));
  }
  return names;
}

std::string report_disagreement(const handout::GtestReport& report, const std::set<std::string>& passed_in_output) {
  std::vector<std::string> unstarted, unseen;
  for (const handout::CaseResult& c : report.cases) {
    if (!c.passed()) continue;
    if (!c.started) {
      unstarted.push_back(c.name);
    } else if (passed_in_output.count(c.name) == 0) {
      unseen.push_back(c.name);
    }
  }
  std::ostringstream out;
  if (!unstarted.empty()) {
    out << "GoogleTest lists " << unstarted.front() << (unstarted.size() > 1 ? " and others" : "")
        << " as passed, but never started " << (unstarted.size() > 1 ? "them" : "it")
        << ": something skipped or stopped the tests before they ran (a global test environment that calls "
           "GTEST_SKIP, for instance). Tests that do not run earn no points.\n";
  } else if (!unseen.empty()) {
    out << "The test report says that " << unseen.front() << (unseen.size() > 1 ? " and others" : "")
        << " passed, but the program's output never shows GoogleTest running "
        << (unseen.size() > 1 ? "them" : "it")
        << ": the report was not written by the tests (code that writes a report and ends the program early, "
           "for instance). Tests that do not run earn no points.\n";
  }
  return out.str();
}

std::vector<std::string> parse_test_listing(const std::string& listing) {
  std::vector<std::string> names;
  std::istringstream in(listing);
  std::string line, suite;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.rfind("  ", 0) == 0) {
      if (suite.empty()) continue;
      std::string name = line.substr(2);
      const size_t comment = name.find("  #");
      if (comment != std::string::npos) name.erase(comment);
      while (!name.empty() && name.back() == ' ') name.pop_back();
      if (!name.empty() && name.find(' ') == std::string::npos) names.push_back(suite + name);
      continue;
    }
    // A suite line: "Suite." alone, or followed by a type-parameter comment.
    const size_t comment = line.find("  #");
    const std::string head = line.substr(0, comment);
    suite = !head.empty() && head.back() == '.' && head.find(' ') == std::string::npos ? head : std::string();
  }
  return names;
}

namespace {

// Glob matching with '*' and '?', iteratively (a pattern cannot make it recurse).
bool glob_matches(const std::string& pattern, const std::string& text) {
  size_t p = 0, t = 0, star = std::string::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == text[t])) {
      ++p;
      ++t;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (star != std::string::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool any_pattern_matches(const std::string& patterns, const std::string& name) {
  size_t start = 0;
  while (true) {
    const size_t colon = patterns.find(':', start);
    if (glob_matches(patterns.substr(start, colon - start), name)) return true;
    if (colon == std::string::npos) return false;
    start = colon + 1;
  }
}

}  // namespace

bool filter_selects(const std::string& filter, const std::string& name) {
  const size_t dash = filter.find('-');
  const std::string positive = filter.substr(0, dash);
  const std::string negative = dash == std::string::npos ? std::string() : filter.substr(dash + 1);
  if (!any_pattern_matches(positive.empty() ? "*" : positive, name)) return false;
  return negative.empty() || !any_pattern_matches(negative, name);
}

std::string missing_cases(const handout::GtestReport& report, const std::vector<std::string>& expected) {
  std::set<std::string> passed;
  for (const handout::CaseResult& c : report.cases) {
    if (c.passed()) passed.insert(c.name);
  }
  std::vector<std::string> missing;
  for (const std::string& name : expected) {
    if (passed.count(name) == 0) missing.push_back(name);
  }
  if (missing.empty()) return "";
  std::ostringstream out;
  out << "This item runs " << expected.size() << " test case" << (expected.size() == 1 ? "" : "s")
      << ", but the report shows " << missing.front();
  if (missing.size() > 1) out << " and " << missing.size() - 1 << " other" << (missing.size() > 2 ? "s" : "");
  out << " never passing: " << (missing.size() == 1 ? "it was" : "they were")
      << " not run (something changed which tests run: the test filter, or the tests GoogleTest knows). Every "
         "case of an item must run and pass to earn its points.\n";
  const std::set<std::string> wanted(expected.begin(), expected.end());
  std::vector<std::string> others;
  for (const std::string& name : passed) {
    if (wanted.count(name) == 0) others.push_back(name);
  }
  if (!others.empty()) {
    out << "The report shows other cases instead: ";
    for (size_t i = 0; i < others.size() && i < 5; ++i) out << (i ? ", " : "") << others[i];
    out << (others.size() > 5 ? ", ...\n" : "\n");
  }
  return out.str();
}

TestOutcome not_run(const std::string& why) {
  TestOutcome o;
  o.output = why;
  return o;
}

TestOutcome judge_run(const RubricTest& test, const handout::RunResult& run, const handout::GtestReport& report) {
  TestOutcome o;
  std::ostringstream out;
  const std::string what = test.program() + " --gtest_filter=" + test.filter;
  if (!run.started) {
    out << "The test program could not be started: " << run.error << "\n";
    o.output = out.str();
    return o;
  }
  const std::string running = unfinished_case(run.output);
  if (run.timed_out || run.signal != 0 || !report.valid) {
    if (run.timed_out) {
      out << "The test program did not finish within its time limit (" << seconds_text(run.seconds)
          << ") and was stopped. Look for an infinite loop, or a barrier or spin-wait that some threads never "
             "reach.\n";
    } else if (run.signal != 0) {
      out << "The test program crashed: " << run.describe() << ". ";
      if (run.signal == SIGSEGV || run.signal == SIGBUS) {
        out << "Look for an out-of-bounds access (check every index against its size) or a null pointer.\n";
      } else if (run.signal == SIGABRT) {
        out << "Something called abort(): a failed assertion, or an exception nothing caught.\n";
      } else {
        out << "\n";
      }
    } else {
      out << "The test program stopped (" << run.describe() << ") before it could report its results.\n";
    }
    if (!running.empty()) out << "It was running " << running << ".\n";
    // Cases that finished before the crash still tell the student something.
    for (const handout::CaseResult& c : report.cases) {
      if (!c.passed()) out << "FAILED " << c.name << "\n";
    }
    if (!run.output.empty()) out << "\nThe end of its output:\n" << tail(run.output, kTailForCrash);
    o.output = out.str();
    return o;
  }

  size_t ran = 0, passed = 0;
  for (const handout::CaseResult& c : report.cases) {
    if (!c.ran) continue;
    ++ran;
    if (c.passed()) ++passed;
    for (const auto& [key, value] : c.properties) {
      double v = 0;
      if (key.rfind("leaderboard_", 0) == 0 && parse_number(value, v)) o.figures.emplace_back(key, v);
    }
  }
  if (ran == 0) {
    out << "No test case matches '" << test.filter << "' in " << test.program()
        << ": the rubric and the tests disagree. Please tell the course staff.\n";
    o.output = out.str();
    return o;
  }
  o.passed = passed == ran && run.exit_code == 0;
  out << passed << " of " << ran << " test case" << (ran == 1 ? "" : "s") << " passed (" << what << ", "
      << seconds_text(run.seconds) << ").\n";
  if (test.isolated) {
    out << "This item ran with known-good versions of the other steps it calls, so only the step it is about "
           "counts here; your own versions of those steps are graded by their own items.\n";
  } else if (test.end_to_end) {
    out << "This item runs your whole chain, as `ctest` does: a mistake in any step it calls shows here too.\n";
  }
  if (passed == ran && run.exit_code != 0) {
    out << "Every case passed, but the program then ended with " << run.describe() << ".\n"
        << tail(run.output, kTailForCrash);
  }
  for (const handout::CaseResult& c : report.cases) {
    if (!c.ran || c.passed()) continue;
    out << "\nFAILED " << c.name << (c.skipped ? " (skipped)" : "") << "\n";
    for (const std::string& f : c.failures) out << f << "\n";
  }
  o.output = out.str();
  return o;
}

namespace {

// Cuts the text fields to the limits: each test's output to `per_test`, the overall output to
// `top_level`, and then all of them together to `total` by lowering the per-test share.
void apply_limits(json& results, const OutputLimits& limits) {
  std::string top = results.value("output", "");
  top = shorten(top, limits.top_level, 0.7);
  results["output"] = top;
  json& tests = results["tests"];
  size_t per_test = limits.per_test;
  if (!tests.empty()) {
    const size_t room = limits.total > top.size() ? limits.total - top.size() : 0;
    size_t used = 0;
    for (const json& t : tests) used += std::min(t.value("output", std::string()).size(), per_test);
    if (used > room) per_test = std::max<size_t>(room / tests.size(), 64);
  }
  for (json& t : tests) t["output"] = shorten(t.value("output", std::string()), per_test, 0.7);
}

double round_score(double s) { return std::round(s * 1000) / 1000; }

}  // namespace

json make_results(const Rubric& rubric, const std::vector<TestOutcome>& outcomes, const std::string& top_output,
                  double execution_time_s, const OutputLimits& limits) {
  json results;
  json tests = json::array();
  double score = 0;
  std::vector<std::pair<std::string, double>> figures;
  for (size_t i = 0; i < rubric.tests.size(); ++i) {
    const RubricTest& t = rubric.tests[i];
    const TestOutcome& o = i < outcomes.size() ? outcomes[i] : TestOutcome{false, "not run", {}};
    const double earned = o.passed ? t.points : 0;
    score += earned;
    json entry;
    entry["name"] = "Milestone " + std::to_string(t.milestone) + ": " + t.name;
    entry["score"] = round_score(earned);
    entry["max_score"] = round_score(t.points);
    entry["status"] = o.passed ? "passed" : "failed";
    entry["output"] = o.output;
    entry["visibility"] = t.visibility;
    std::vector<std::string> tags = {"milestone" + std::to_string(t.milestone), t.binary};
    if (t.hidden) tags.push_back("hidden");
    tags.insert(tags.end(), t.tags.begin(), t.tags.end());
    entry["tags"] = tags;
    tests.push_back(std::move(entry));
    figures.insert(figures.end(), o.figures.begin(), o.figures.end());
  }
  results["score"] = round_score(score);
  results["execution_time"] = std::round(execution_time_s * 10) / 10;
  results["output"] = top_output;
  results["tests"] = std::move(tests);

  if (!figures.empty()) {
    // One column per reported property, named and ordered as the rubric says; the first value
    // reported wins when several tests report the same property.
    json board = json::array();
    std::vector<std::string> seen;
    for (const auto& [key, value] : figures) {
      if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
      seen.push_back(key);
      json column;
      column["name"] = key.substr(std::string("leaderboard_").size());
      for (const LeaderboardColumn& c : rubric.leaderboard) {
        if (c.property != key) continue;
        column["name"] = c.name;
        if (!c.order.empty()) column["order"] = c.order;
      }
      column["value"] = value;
      board.push_back(std::move(column));
    }
    results["leaderboard"] = std::move(board);
  }
  apply_limits(results, limits);
  return results;
}

json make_failed_results(const Rubric* rubric, const std::string& message, const std::string& test_message,
                         double execution_time_s, const OutputLimits& limits) {
  if (rubric) {
    std::vector<TestOutcome> outcomes(rubric->tests.size(), not_run(test_message));
    return make_results(*rubric, outcomes, message, execution_time_s, limits);
  }
  json results;
  results["score"] = 0;
  results["execution_time"] = std::round(execution_time_s * 10) / 10;
  results["output"] = message;
  results["tests"] = json::array();
  apply_limits(results, limits);
  return results;
}

std::string dump_results(const json& results) {
  // Tests print whatever they like; invalid UTF-8 becomes U+FFFD instead of an exception.
  return results.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace clockwork::grading
