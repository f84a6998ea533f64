// clockwork-grade: grades a submission and writes Gradescope's results.json.
//
//   clockwork-grade --submission DIR --out results.json [--rubric FILE] [--hidden] [--timeout S]
//                   [--source ROOT] [--work DIR] [--seed S] [--backend auto|sim|cuda] [--jobs N]
//                   [--framework-build DIR | --no-framework-build] [--student-user NAME]
//
// A results.json is written whatever happens: a build error, a crash or a hang only costs points.
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include "grading/grader.h"
#include "grading/results.h"
#include "tools/handout/tree.h"

#ifndef CLOCKWORK_DEFAULT_SOURCE
#define CLOCKWORK_DEFAULT_SOURCE "."
#endif
#ifndef CLOCKWORK_DEFAULT_FRAMEWORK_BUILD
#define CLOCKWORK_DEFAULT_FRAMEWORK_BUILD ""
#endif

namespace {

namespace fs = std::filesystem;

int usage(const std::string& why) {
  if (!why.empty()) std::cerr << "clockwork-grade: " << why << "\n";
  std::cerr
      << "usage: clockwork-grade --submission DIR --out results.json [options]\n"
         "  --rubric FILE         the rubric (default: ROOT/grading/rubric.json)\n"
         "  --hidden              also run the hidden tests (ROOT/grading/hidden, ROOT/grading/rubric-hidden.json)\n"
         "  --hidden-rubric FILE  the hidden tests' rubric\n"
         "  --seed S              secret seed of the hidden tests, a number (default: $CLOCKWORK_HIDDEN_SEED, else random)\n"
         "  --timeout S           time limit of each test run, in seconds (default: the rubric's)\n"
         "  --deadline S          time limit of the whole grading: builds and test runs are cut short and\n"
         "                        tests that cannot start are reported as not run, so that results.json\n"
         "                        is complete in time (default 2100 s, below a 40-minute platform limit)\n"
         "  --source ROOT         the solution tree the framework is copied from (default: the one this\n"
         "                        grader was built from)\n"
         "  --untracked           with a git checkout as ROOT, also take files git does not track\n"
         "  --work DIR            build folder, reused by later gradings (default: a temporary one)\n"
         "  --framework-build DIR a build of ROOT whose framework objects are reused, so that only the\n"
         "                        student files compile (default: the build this grader belongs to)\n"
         "  --no-framework-build  compile the whole framework in the work folder instead\n"
         "  --backend B           auto (GPU when there is one), sim or cuda\n"
         "  --jobs N              parallel compile jobs (default: one per CPU)\n"
         "  --student-user NAME   when run as root, the unprivileged user that builds and runs the\n"
         "                        submission, created when missing (default: clockwork-student)\n"
         "  --cmake PATH, --ctest PATH, --no-ccache, --build-timeout S\n";
  return 2;
}

bool parse_number(const std::string& s, double& v) {
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && v > 0;
}

}  // namespace

int main(int argc, char** argv) {
  clockwork::grading::GradeOptions o;
  o.source = CLOCKWORK_DEFAULT_SOURCE;
  o.framework_build = CLOCKWORK_DEFAULT_FRAMEWORK_BUILD;
  o.deadline_s = 2100;
  fs::path out;
  if (const char* s = std::getenv("CLOCKWORK_HIDDEN_SEED")) o.seed = s;
  // No child inherits it (nor a test seed the grader was started with): builds and test runs
  // execute student code, which could read their environment. The hidden tests get the seed
  // through a pipe instead (grader.cpp, SeedPipe).
  for (const char* v : {"CLOCKWORK_HIDDEN_SEED", "CLOCKWORK_SEED", "CLOCKWORK_SEED_FD"}) unsetenv(v);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : std::string(); };
    double number = 0;
    if (a == "--submission") {
      o.submission = value();
    } else if (a == "--out") {
      out = value();
    } else if (a == "--rubric") {
      o.rubric = value();
    } else if (a == "--hidden-rubric") {
      o.hidden_rubric = value();
    } else if (a == "--hidden") {
      o.hidden = true;
    } else if (a == "--seed") {
      o.seed = value();
    } else if (a == "--timeout") {
      if (!parse_number(value(), number)) return usage("--timeout needs a positive number of seconds");
      o.timeout_s = number;
    } else if (a == "--deadline") {
      if (!parse_number(value(), number)) return usage("--deadline needs a positive number of seconds");
      o.deadline_s = number;
    } else if (a == "--build-timeout") {
      if (!parse_number(value(), number)) return usage("--build-timeout needs a positive number of seconds");
      o.build_timeout_s = number;
    } else if (a == "--source") {
      o.source = value();
    } else if (a == "--untracked") {
      o.untracked = true;
    } else if (a == "--work") {
      o.work = value();
    } else if (a == "--framework-build") {
      o.framework_build = value();
      if (o.framework_build.empty()) return usage("--framework-build needs a folder");
    } else if (a == "--no-framework-build") {
      o.framework_build.clear();
    } else if (a == "--backend") {
      o.backend = value();
    } else if (a == "--jobs") {
      if (!parse_number(value(), number)) return usage("--jobs needs a positive number");
      o.jobs = static_cast<int>(number);
    } else if (a == "--cmake") {
      o.cmake = value();
    } else if (a == "--ctest") {
      o.ctest = value();
    } else if (a == "--student-user") {
      o.student_user = value();
      if (o.student_user.empty()) return usage("--student-user needs a user name");
    } else if (a == "--no-ccache") {
      o.ccache = false;
    } else if (a == "--help" || a == "-h") {
      usage("");
      return 0;
    } else {
      return usage("unknown argument: " + a);
    }
  }
  if (out.empty()) return usage("--out is required");
  if (o.submission.empty()) return usage("--submission is required");
  // A complete results.json after every step, replaced atomically: if the platform kills the
  // grader, the student still sees what was graded until then.
  o.on_progress = [&out](const nlohmann::json& partial) {
    try {
      clockwork::handout::write_file_atomically(out, clockwork::grading::dump_results(partial));
    } catch (const std::exception& e) {
      std::cerr << "clockwork-grade: cannot write " << out.string() << ": " << e.what() << "\n";
    }
  };

  int status = 0;
  nlohmann::json results;
  try {
    results = clockwork::grading::grade(o, status);
  } catch (const std::exception& e) {
    status = 2;
    results = clockwork::grading::make_failed_results(nullptr, std::string("The autograder failed: ") + e.what(),
                                                      "", 0);
  }
  try {
    clockwork::handout::write_file_atomically(out, clockwork::grading::dump_results(results));
  } catch (const std::exception& e) {
    std::cerr << "clockwork-grade: cannot write " << out.string() << ": " << e.what() << "\n";
    return 3;
  }
  std::cout << "clockwork-grade: score " << results.value("score", 0.0) << " written to " << out.string() << "\n";
  if (status != 0) std::cerr << results.value("output", std::string()) << "\n";
  return status;
}
