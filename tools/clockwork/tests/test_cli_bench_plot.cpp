// Tests of `clockwork bench --plot FILE.svg`, run as a user runs it: gnuplot draws a roofline with
// one series per (op, variant) and, with decode rows, ms per token against the prompt length for
// each cache; on the CPU backend the plot says it shows a simulation; a wrong file name or a
// missing gnuplot ends in one error line before anything is timed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "harness/testing/cli_runner.h"
#include "harness/check/temp_dir.h"

namespace clockwork::cli_test {
namespace {

namespace fs = std::filesystem;

// The same small Llama-shaped model as the table's tests: seconds on the CPU backend.
const char* const kSmall = "s=4,d=128,h=2,h_k=1,d_ff=256,V=512";

class CliBenchPlot : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = make_temp_dir("cli-bench-plot"); }
  void TearDown() override {
    unsetenv("CLOCKWORK_GNUPLOT");
    remove_tree(dir_);
  }
  const fs::path& dir() const { return dir_; }

  static bool backend_missing(const RunResult& r) {
    if (!model_backend_missing(r)) return false;
    std::printf("CLOCKWORK-SKIP: %s", r.err.c_str());
    return true;
  }

  // make deps installs gnuplot; a machine without it (a bare GPU box) cannot test the drawing.
  static bool gnuplot_missing(const RunResult& r) {
    return r.err.find("'gnuplot' could not be run") != std::string::npos;
  }

 private:
  fs::path dir_;
};

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

size_t count(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST_F(CliBenchPlot, RooflineAndDecodeCurvesAreDrawnByGnuplot) {
  const fs::path model = dir() / "tiny";
  const RunResult made = run_cli({"tiny-model", "--out", model.string()});
  ASSERT_EQ(made.code, 0) << made.err << made.out;

  const fs::path plot = dir() / "bench.svg";
  const RunResult r = run_cli({"bench", "--op", "rmsnorm,matmul,decode", "--shape", kSmall,
                               "--repetitions", "1", "--warmup", "0", "--model", model.string(),
                               "--decode-lengths", "4,8,16", "--decode-tokens", "2", "--plot",
                               plot.string()});
  if (backend_missing(r)) return;
  if (gnuplot_missing(r)) GTEST_SKIP() << r.err;
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_NE(r.out.find("wrote " + plot.string()), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(plot)) << r.out;

  const std::string svg = read_text(plot);
  // A whole SVG document, as gnuplot's svg terminal writes it.
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << svg.substr(0, 200);
  ASSERT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("</svg>", svg.size() - 20), std::string::npos) << "the SVG is cut short";
  EXPECT_EQ(count(svg, "<svg"), count(svg, "</svg>"));

  // The roofline panel: one series per (op, variant) measured, named once in the key.
  EXPECT_NE(svg.find("Roofline"), std::string::npos);
  EXPECT_NE(svg.find("arithmetic intensity"), std::string::npos);
  for (const char* series : {"<text>matmul naive</text>", "<text>matmul tiled</text>",
                             "<text>rmsnorm kernel</text>",
                             "<text>decode_attention one-pass</text>"}) {
    EXPECT_EQ(count(svg, series), 1u) << series;
  }
  // The decode panel: ms per token against the prompt length, one curve per cache.
  EXPECT_NE(svg.find("prompt length (tokens)"), std::string::npos);
  for (const char* series : {"<text>no KV cache (every step re-runs the sequence)</text>",
                             "<text>contiguous KV cache</text>", "<text>paged KV cache</text>"}) {
    EXPECT_EQ(count(svg, series), 1u) << series;
  }

  const bool sim = r.out.find("backend sim") != std::string::npos;
  if (sim) {
    // Nothing on the CPU backend may pass for GPU performance.
    EXPECT_GE(count(svg, "CPU simulation"), 3u) << "title, roofline and decode panels";
    EXPECT_EQ(svg.find("roofline, fp32"), std::string::npos) << "no GPU peaks in a simulation";
    EXPECT_NE(svg.find("simulated MFLOP/s"), std::string::npos);
  } else {
    EXPECT_EQ(svg.find("CPU simulation"), std::string::npos);
    EXPECT_NE(svg.find("achieved TFLOP/s"), std::string::npos);
  }

  // Written through a temporary file (and gnuplot's messages to another): both are gone.
  for (const auto& entry : fs::directory_iterator(dir())) {
    EXPECT_TRUE(entry.path() == plot || entry.path() == model) << entry.path();
  }
}

TEST_F(CliBenchPlot, WrongPlotArgumentsAreNamedBeforeAnythingRuns) {
  EXPECT_EQ(check_error(run_cli({"bench", "--op", "rmsnorm", "--shape", kSmall, "--plot",
                                 (dir() / "bench.png").string()}),
                        "bench", 2, {"--plot", "*.svg"}),
            "");
  EXPECT_EQ(check_error(run_cli({"bench", "--op", "rmsnorm", "--shape", kSmall, "--plot",
                                 (dir() / "missing" / "bench.svg").string()}),
                        "bench", 2, {"--plot", "does not exist"}),
            "");
  fs::create_directory(dir() / "folder.svg");
  EXPECT_EQ(check_error(run_cli({"bench", "--op", "rmsnorm", "--shape", kSmall, "--plot",
                                 (dir() / "folder.svg").string()}),
                        "bench", 2, {"--plot", "is a directory"}),
            "");

  // Without gnuplot: one line saying what to install, and no benchmark run first.
  setenv("CLOCKWORK_GNUPLOT", (dir() / "no-gnuplot-here").c_str(), 1);
  const RunResult r = run_cli({"bench", "--op", "rmsnorm", "--shape", kSmall, "--plot",
                               (dir() / "bench.svg").string()});
  EXPECT_EQ(check_error(r, "bench", 2, {"gnuplot", "apt-get install gnuplot-nox"}), "");
  EXPECT_EQ(r.out.find("rmsnorm"), std::string::npos) << "nothing is timed first\n" << r.out;
  EXPECT_FALSE(fs::exists(dir() / "bench.svg"));
}

TEST_F(CliBenchPlot, NothingToDrawIsAnError) {
  // argmax has no FLOP count (no roofline point) and there are no decode rows.
  const RunResult r = run_cli({"bench", "--op", "argmax", "--shape", kSmall, "--repetitions", "1",
                               "--plot", (dir() / "bench.svg").string()});
  if (backend_missing(r)) return;
  if (gnuplot_missing(r)) GTEST_SKIP() << r.err;
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.err.find("nothing to draw"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir() / "bench.svg"));
}

// `--profile --plot`: the rows at their counted bytes and predicted time, under the chosen GPU's
// roof, labelled as a prediction.
TEST_F(CliBenchPlot, ProfileDrawsThePredictedRooflineOfTheChosenGpu) {
  const fs::path plot = dir() / "predicted.svg";
  const RunResult r = run_cli({"bench", "--profile", "--gpu", "t4", "--op", "matmul", "--shape", kSmall,
                               "--plot", plot.string()});
  if (r.code != 0 && r.err.find("counts memory traffic on the CPU backend") != std::string::npos) return;  // GPU build
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const std::string svg = read_text(plot);
  EXPECT_NE(svg.find("Predicted roofline position"), std::string::npos);
  EXPECT_NE(svg.find("prediction for t4"), std::string::npos);
  EXPECT_NE(svg.find("8.1 TFLOP/s, 320 GB/s"), std::string::npos) << "the T4's roof";
  EXPECT_NE(svg.find("matmul naive"), std::string::npos);
  EXPECT_NE(svg.find("matmul tiled"), std::string::npos);
}

}  // namespace
}  // namespace clockwork::cli_test
