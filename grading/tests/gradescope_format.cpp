#include "grading/tests/gradescope_format.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <sstream>

namespace clockwork::grading {
namespace {

using nlohmann::json;

// The fields of Gradescope's format, as its autograder specification lists them.
const std::set<std::string> kTopLevel = {"score",          "execution_time",    "output",     "output_format",
                                         "test_output_format", "test_name_format", "visibility", "stdout_visibility",
                                         "extra_data",     "tests",             "leaderboard"};
const std::set<std::string> kTest = {"score",  "max_score", "status", "name",       "name_format", "number",
                                     "output", "output_format", "tags", "visibility", "extra_data"};
const std::set<std::string> kLeaderboard = {"name", "value", "order"};
const std::set<std::string> kVisibility = {"visible", "hidden", "after_due_date", "after_published"};
const std::set<std::string> kFormats = {"text", "html", "simple_format", "md", "ansi"};

std::string quoted(const json& value) {
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  return text.size() > 40 ? text.substr(0, 37) + "..." : text;
}

class Checker {
 public:
  std::vector<std::string> problems;

  void add(const std::string& where, const std::string& what) { problems.push_back(where + ": " + what); }

  // Checks the field `key` of `object` when present (or always, when `required`); true when it is
  // present and of the right kind.
  bool number(const json& object, const std::string& where, const char* key, bool required) {
    if (!present(object, where, key, required)) return false;
    const json& v = object[key];
    if (!v.is_number()) return wrong(where, key, v, "a number");
    if (!std::isfinite(v.get<double>())) return wrong(where, key, v, "a finite number");
    return true;
  }

  bool string(const json& object, const std::string& where, const char* key, bool required) {
    if (!present(object, where, key, required)) return false;
    return object[key].is_string() || wrong(where, key, object[key], "a string");
  }

  void one_of(const json& object, const std::string& where, const char* key, const std::set<std::string>& allowed,
              bool required) {
    if (!string(object, where, key, required)) return;
    if (!allowed.count(object[key].get<std::string>())) {
      std::ostringstream list;
      for (const std::string& a : allowed) list << (list.tellp() > 0 ? ", " : "") << a;
      add(where + "." + key, quoted(object[key]) + " is none of " + list.str());
    }
  }

  void known_keys(const json& object, const std::string& where, const std::set<std::string>& known) {
    for (auto it = object.begin(); it != object.end(); ++it) {
      if (!known.count(it.key())) add(where.empty() ? it.key() : where + "." + it.key(), "not a field Gradescope knows");
    }
  }

 private:
  bool present(const json& object, const std::string& where, const char* key, bool required) {
    if (object.contains(key)) return true;
    if (required) add(where.empty() ? std::string(key) : where + "." + key, "missing");
    return false;
  }

  bool wrong(const std::string& where, const char* key, const json& v, const char* expected) {
    add(where.empty() ? std::string(key) : where + "." + key, "should be " + std::string(expected) + ", is " + quoted(v));
    return false;
  }
};

}  // namespace

std::vector<std::string> gradescope_format_problems(const json& results) {
  Checker c;
  if (!results.is_object()) {
    c.add("results.json", "should be a JSON object, is " + quoted(results));
    return c.problems;
  }
  c.known_keys(results, "", kTopLevel);
  const bool has_score = c.number(results, "", "score", true);
  c.number(results, "", "execution_time", false);
  c.string(results, "", "output", false);
  for (const char* key : {"output_format", "test_output_format", "test_name_format"}) {
    c.one_of(results, "", key, kFormats, false);
  }
  c.one_of(results, "", "visibility", kVisibility, false);
  c.one_of(results, "", "stdout_visibility", kVisibility, false);
  if (results.contains("extra_data") && !results["extra_data"].is_object()) {
    c.add("extra_data", "should be an object, is " + quoted(results["extra_data"]));
  }

  double sum = 0;
  bool sum_known = true;
  if (!results.contains("tests")) {
    c.add("tests", "missing");
    sum_known = false;
  } else if (!results["tests"].is_array()) {
    c.add("tests", "should be an array, is " + quoted(results["tests"]));
    sum_known = false;
  } else {
    const json& tests = results["tests"];
    for (size_t i = 0; i < tests.size(); ++i) {
      const json& t = tests[i];
      const std::string where = "tests[" + std::to_string(i) + "]";
      if (!t.is_object()) {
        c.add(where, "should be an object, is " + quoted(t));
        sum_known = false;
        continue;
      }
      c.known_keys(t, where, kTest);
      if (c.string(t, where, "name", true) && t["name"].get<std::string>().empty()) c.add(where + ".name", "empty");
      if (c.number(t, where, "score", true)) {
        sum += t["score"].get<double>();
      } else {
        sum_known = false;
      }
      if (c.number(t, where, "max_score", true) && t["max_score"].get<double>() < 0) {
        c.add(where + ".max_score", "negative (" + quoted(t["max_score"]) + ")");
      }
      c.one_of(t, where, "status", {"passed", "failed"}, true);
      c.string(t, where, "output", true);
      c.one_of(t, where, "visibility", kVisibility, true);
      c.one_of(t, where, "output_format", kFormats, false);
      c.one_of(t, where, "name_format", kFormats, false);
      c.string(t, where, "number", false);
      if (t.contains("tags")) {
        if (!t["tags"].is_array() ||
            !std::all_of(t["tags"].begin(), t["tags"].end(), [](const json& tag) { return tag.is_string(); })) {
          c.add(where + ".tags", "should be an array of strings, is " + quoted(t["tags"]));
        }
      }
      if (t.contains("extra_data") && !t["extra_data"].is_object()) {
        c.add(where + ".extra_data", "should be an object, is " + quoted(t["extra_data"]));
      }
    }
  }
  // Gradescope takes the top-level score as the grade, whatever the tests add up to: the two
  // must agree, or a student sees tests whose points do not make the grade.
  if (has_score && sum_known) {
    const double score = results["score"].get<double>();
    if (std::fabs(score - sum) > 1e-6 * std::max(1.0, std::fabs(score))) {
      std::ostringstream what;
      what << score << " differs from the sum of the tests' scores, " << sum;
      c.add("score", what.str());
    }
  }

  if (results.contains("leaderboard")) {
    if (!results["leaderboard"].is_array()) {
      c.add("leaderboard", "should be an array, is " + quoted(results["leaderboard"]));
    } else {
      const json& board = results["leaderboard"];
      for (size_t i = 0; i < board.size(); ++i) {
        const json& column = board[i];
        const std::string where = "leaderboard[" + std::to_string(i) + "]";
        if (!column.is_object()) {
          c.add(where, "should be an object, is " + quoted(column));
          continue;
        }
        c.known_keys(column, where, kLeaderboard);
        c.string(column, where, "name", true);
        if (!column.contains("value")) {
          c.add(where + ".value", "missing");
        } else if (!column["value"].is_number() && !column["value"].is_string()) {
          c.add(where + ".value", "should be a number or a string, is " + quoted(column["value"]));
        }
        c.one_of(column, where, "order", {"asc", "desc"}, false);
      }
    }
  }
  return c.problems;
}

}  // namespace clockwork::grading
