#include "grading/rubric.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "tools/handout/tree.h"

namespace clockwork::grading {
namespace {

using nlohmann::json;

const std::set<std::string> kVisibilities = {"visible", "hidden", "after_due_date", "after_published"};

std::string where(int milestone, size_t index) {
  return "milestone " + std::to_string(milestone) + ", test " + std::to_string(index + 1);
}

}  // namespace

bool Rubric::is_student_file(const std::string& path) const { return student_files.count(path) != 0; }

double Rubric::total_points() const {
  double sum = 0;
  for (const RubricTest& t : tests) sum += t.points;
  return sum;
}

double Rubric::points_of_milestones(int from, int to) const {
  double sum = 0;
  for (const RubricTest& t : tests) {
    if (t.milestone >= from && t.milestone <= to) sum += t.points;
  }
  return sum;
}

Rubric parse_rubric(const std::string& text, bool hidden) {
  Rubric r;
  json doc;
  try {
    doc = json::parse(text);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("not valid JSON: ") + e.what());
  }
  if (!doc.is_object()) throw std::runtime_error("the rubric must be a JSON object");
  try {
    if (doc.contains("student_files")) {
      throw std::runtime_error(
          "\"student_files\" is not read any more: the student files are the files with solution regions "
          "(clockwork-handout --list-student-files prints them); remove the key");
    }
    if (doc.contains("timeout_s")) r.timeout_s = doc["timeout_s"].get<double>();
    if (!(r.timeout_s > 0)) throw std::runtime_error("timeout_s must be positive");
    if (doc.contains("leaderboard")) {
      for (const json& c : doc["leaderboard"]) {
        LeaderboardColumn col;
        col.property = c.at("property").get<std::string>();
        col.name = c.value("name", col.property);
        col.order = c.value("order", "");
        if (!col.order.empty() && col.order != "asc" && col.order != "desc") {
          throw std::runtime_error("leaderboard order must be \"asc\" or \"desc\", not \"" + col.order + "\"");
        }
        r.leaderboard.push_back(col);
      }
    }
    if (doc.contains("benchmark")) {
      const json& b = doc["benchmark"];
      r.benchmark.target = b.at("target").get<std::string>();
      if (b.contains("args")) r.benchmark.args = b["args"].get<std::vector<std::string>>();
      r.benchmark.timeout_s = b.value("timeout_s", r.benchmark.timeout_s);
      if (r.benchmark.target.empty()) throw std::runtime_error("benchmark: target must not be empty");
      if (!(r.benchmark.timeout_s > 0)) throw std::runtime_error("benchmark: timeout_s must be positive");
    }
    if (!doc.contains("milestones") || !doc["milestones"].is_array()) {
      throw std::runtime_error("the rubric has no \"milestones\" list");
    }
    for (const json& m : doc["milestones"]) {
      const int milestone = m.at("milestone").get<int>();
      if (milestone < 1) throw std::runtime_error("milestone numbers start at 1");
      const json& tests = m.at("tests");
      for (size_t i = 0; i < tests.size(); ++i) {
        const json& t = tests[i];
        RubricTest rt;
        rt.milestone = milestone;
        rt.hidden = hidden;
        try {
          rt.name = t.at("name").get<std::string>();
          rt.binary = t.at("binary").get<std::string>();
          rt.filter = t.value("filter", std::string("*"));
          rt.points = t.at("points").get<double>();
          rt.visibility = t.value("visibility", std::string(hidden ? "after_due_date" : "visible"));
          if (t.contains("tags")) rt.tags = t["tags"].get<std::vector<std::string>>();
          rt.timeout_s = t.value("timeout_s", 0.0);
          rt.isolated = t.value("isolated", false);
          rt.end_to_end = t.value("end_to_end", false);
        } catch (const std::exception& e) {
          throw std::runtime_error(where(milestone, i) + ": " + e.what());
        }
        if (!(rt.points >= 0) || !std::isfinite(rt.points)) {
          throw std::runtime_error(where(milestone, i) + " (" + rt.name + "): points must be >= 0");
        }
        if (kVisibilities.count(rt.visibility) == 0) {
          throw std::runtime_error(where(milestone, i) + " (" + rt.name + "): visibility \"" + rt.visibility +
                                   "\" is not one of visible, hidden, after_due_date, after_published");
        }
        if (rt.binary.empty() || rt.filter.empty()) {
          throw std::runtime_error(where(milestone, i) + " (" + rt.name + "): binary and filter must not be empty");
        }
        if (rt.isolated && rt.end_to_end) {
          throw std::runtime_error(where(milestone, i) + " (" + rt.name +
                                   "): an item is either isolated (known-good earlier steps) or end_to_end "
                                   "(the student's whole chain), not both");
        }
        r.tests.push_back(std::move(rt));
      }
    }
  } catch (const json::exception& e) {
    throw std::runtime_error(e.what());
  }
  return r;
}

Rubric load_rubric(const std::filesystem::path& file, bool hidden) {
  std::string text;
  try {
    text = handout::read_file(file);
  } catch (const std::exception&) {
    throw std::runtime_error("cannot read the rubric " + file.string());
  }
  try {
    return parse_rubric(text, hidden);
  } catch (const std::exception& e) {
    throw std::runtime_error(file.filename().string() + ": " + e.what());
  }
}

void merge_rubric(Rubric& base, const Rubric& extra) {
  base.tests.insert(base.tests.end(), extra.tests.begin(), extra.tests.end());
  base.leaderboard.insert(base.leaderboard.end(), extra.leaderboard.begin(), extra.leaderboard.end());
  if (!extra.benchmark.target.empty()) base.benchmark = extra.benchmark;
  // Group by milestone, keeping rubric order inside each, so the report reads milestone by milestone.
  std::stable_sort(base.tests.begin(), base.tests.end(),
                   [](const RubricTest& a, const RubricTest& b) { return a.milestone < b.milestone; });
}

}  // namespace clockwork::grading
