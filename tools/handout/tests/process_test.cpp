// The process runner the autograder relies on: exit statuses, crashes, time limits that stop a
// whole process group, bounded output, and the environment it passes.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>

#include "tools/handout/process.h"

namespace clockwork::handout {
namespace {

RunResult sh(const std::string& script, double timeout_s = 30) {
  RunOptions o;
  o.argv = {"sh", "-c", script};
  o.timeout_s = timeout_s;
  return run_process(o);
}

TEST(Process, ExitStatusAndOutput) {
  const RunResult ok = sh("echo out; echo err >&2; exit 0");
  EXPECT_TRUE(ok.succeeded());
  EXPECT_EQ(ok.output, "out\nerr\n");
  const RunResult bad = sh("exit 3");
  EXPECT_FALSE(bad.succeeded());
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_EQ(bad.describe(), "exit status 3");
}

TEST(Process, CrashIsReportedWithItsSignal) {
  const RunResult r = sh("kill -SEGV $$");
  EXPECT_EQ(r.signal, SIGSEGV);
  EXPECT_EQ(r.exit_code, -1);
  EXPECT_NE(r.describe().find("signal 11"), std::string::npos) << r.describe();
  EXPECT_EQ(sh("kill -ABRT $$").signal, SIGABRT);
}

TEST(Process, TimeoutStopsTheWholeGroup) {
  // The shell starts a background child that would outlive it; the time limit must stop both,
  // and quickly, not after the children's 100 s.
  const auto start = std::chrono::steady_clock::now();
  const RunResult r = sh("sleep 100 & sleep 100; echo never", 1);
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(r.timed_out);
  EXPECT_FALSE(r.succeeded());
  EXPECT_LT(elapsed, 20);
  EXPECT_NE(r.describe().find("time limit"), std::string::npos);
  // No process of the group is left: pgrep would find the sleeps by their unusual argument.
  const RunResult left = sh("sleep 100.5 & sleep 100.5", 1);
  EXPECT_TRUE(left.timed_out);
  EXPECT_FALSE(sh("pgrep -f 'sleep 100[.]5'").succeeded());
}

TEST(Process, LongOutputKeepsBothEnds) {
  RunOptions o;
  o.argv = {"sh", "-c", "echo FIRST; i=0; while [ $i -lt 20000 ]; do echo 0123456789; i=$((i+1)); done; echo LAST"};
  o.max_output = 1000;
  const RunResult r = run_process(o);
  ASSERT_TRUE(r.succeeded());
  EXPECT_LE(r.output.size(), 1100u);
  EXPECT_GT(r.output_bytes, 200000u);
  EXPECT_EQ(r.output.rfind("FIRST", 0), 0u);
  EXPECT_NE(r.output.find("LAST"), std::string::npos);
  EXPECT_NE(r.output.find("left out"), std::string::npos);
}

TEST(Process, FileSizeLimitStopsARunawayPrinter) {
  RunOptions o;
  o.argv = {"sh", "-c", "yes 0123456789"};
  o.max_file_bytes = 1 << 20;
  o.timeout_s = 60;
  const RunResult r = run_process(o);
  EXPECT_FALSE(r.succeeded());
  EXPECT_FALSE(r.timed_out);
  EXPECT_LE(r.output_bytes, 1u << 20);
}

TEST(Process, EnvironmentAndWorkingDirectory) {
  setenv("CLOCKWORK_PROCESS_TEST_UNSET", "visible", 1);
  RunOptions o;
  o.argv = {"sh", "-c", "echo \"$CLOCKWORK_PROCESS_TEST_SET:${CLOCKWORK_PROCESS_TEST_UNSET:-none}:$(pwd)\""};
  o.env["CLOCKWORK_PROCESS_TEST_SET"] = "42";
  o.env["CLOCKWORK_PROCESS_TEST_UNSET"] = std::nullopt;
  o.cwd = "/";
  const RunResult r = run_process(o);
  EXPECT_EQ(r.output, "42:none:/\n");
}

TEST(Process, MissingProgram) {
  RunOptions o;
  o.argv = {"clockwork-no-such-program"};
  const RunResult r = run_process(o);
  EXPECT_FALSE(r.started);
  EXPECT_FALSE(r.succeeded());
  EXPECT_NE(r.describe().find("not found"), std::string::npos);
}

TEST(Process, ShortenRespectsCharacters) {
  const std::string text = std::string(100, 'a') + "é" + std::string(100, 'b') + "ü" + std::string(100, 'c');
  for (size_t max : {60u, 80u, 101u, 150u, 250u}) {
    const std::string s = shorten(text, max);
    EXPECT_LE(s.size(), max);
    // Every byte sequence stays valid UTF-8: no lone continuation byte at a seam.
    for (size_t i = 0; i < s.size(); ++i) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0xC0) {
        ASSERT_LT(i + 1, s.size());
        EXPECT_EQ(static_cast<unsigned char>(s[i + 1]) & 0xC0, 0x80);
      }
      if ((c & 0xC0) == 0x80) {
        ASSERT_GT(i, 0u);
        EXPECT_GE(static_cast<unsigned char>(s[i - 1]), 0xC0);
      }
    }
  }
  EXPECT_EQ(shorten("short", 100), "short");
}

}  // namespace
}  // namespace clockwork::handout
