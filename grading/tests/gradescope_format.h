/// @file gradescope_format.h
/// Checks a results.json against Gradescope's autograder format (its "Autograder
/// Specifications": the top-level fields, tests[] and leaderboard[]), independently of the code
/// that writes it, so that the tests catch a document Gradescope would reject or misread.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace clockwork::grading {

/// What is wrong with `results` as a Gradescope results.json, one line each, naming the field
/// (`tests[3].status`); empty when it is valid. Besides the types and allowed values of each
/// field, it requires what Clockwork relies on: a top-level `score` equal to the sum of the
/// tests' scores, and `name`, `score`, `max_score`, `status`, `output` and `visibility` on every
/// test. Unknown fields are reported: Gradescope ignores them, so a misspelt one is lost silently.
std::vector<std::string> gradescope_format_problems(const nlohmann::json& results);

}  // namespace clockwork::grading
