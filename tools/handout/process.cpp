#include "tools/handout/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace clockwork::handout {
namespace {

namespace fs = std::filesystem;

// Moves `pos` back to the start of a UTF-8 character.
size_t utf8_floor(const std::string& s, size_t pos) {
  while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) --pos;
  return pos;
}

// Moves `pos` forward to the start of a UTF-8 character.
size_t utf8_ceil(const std::string& s, size_t pos) {
  while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
  return pos;
}

std::string read_shortened(const fs::path& file, size_t max, size_t& total) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  total = static_cast<size_t>(in.tellg());
  in.seekg(0);
  if (total <= max) {
    std::string s(total, '\0');
    in.read(s.data(), static_cast<std::streamsize>(total));
    return s;
  }
  // Read only both ends: the output of a runaway program can be far larger than memory allows.
  const size_t half = max / 2;
  std::string head(half, '\0'), tail(half, '\0');
  in.read(head.data(), static_cast<std::streamsize>(half));
  in.seekg(static_cast<std::streamoff>(total - half));
  in.read(tail.data(), static_cast<std::streamsize>(half));
  head.resize(utf8_floor(head, head.size()));
  tail = tail.substr(utf8_ceil(tail, 0));
  return head + "\n[... " + std::to_string(total - head.size() - tail.size()) + " bytes of output left out ...]\n" +
         tail;
}

std::vector<std::string> build_environment(const std::map<std::string, std::optional<std::string>>& changes) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    const std::string name = entry.substr(0, entry.find('='));
    if (changes.count(name) == 0) env.push_back(entry);
  }
  for (const auto& [name, value] : changes) {
    if (value) env.push_back(name + "=" + *value);
  }
  return env;
}

}  // namespace

std::string RunResult::describe() const {
  if (!started) return "could not be started: " + error;
  if (timed_out) {
    std::ostringstream s;
    s << "stopped after " << static_cast<long>(seconds + 0.5) << " s (time limit)";
    return s.str();
  }
  if (signal != 0) {
    const char* name = strsignal(signal);
    return "killed by signal " + std::to_string(signal) + " (" + (name ? name : "unknown") + ")";
  }
  return "exit status " + std::to_string(exit_code);
}

std::string shorten(const std::string& text, size_t max, double head_fraction) {
  if (text.size() <= max) return text;
  const std::string note_template = "\n[... 0000000000 bytes left out ...]\n";
  if (max <= note_template.size() + 8) return text.substr(0, utf8_floor(text, max));
  const size_t budget = max - note_template.size();
  const size_t head_len = utf8_floor(text, static_cast<size_t>(static_cast<double>(budget) * head_fraction));
  const size_t tail_start = utf8_ceil(text, text.size() - (budget - head_len));
  return text.substr(0, head_len) + "\n[... " + std::to_string(tail_start - head_len) + " bytes left out ...]\n" +
         text.substr(tail_start);
}

std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : std::string();
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/" + name;
    struct stat st{};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return {};
}

RunResult run_process(const RunOptions& options) {
  RunResult result;
  if (options.argv.empty()) {
    result.error = "no program given";
    return result;
  }
  const std::string program = find_program(options.argv[0]);
  if (program.empty()) {
    result.error = "program not found: " + options.argv[0];
    return result;
  }

  fs::path output = options.output_file;
  bool temporary = false;
  if (output.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "clockwork-run-XXXXXX").string();
    const int fd = mkstemp(tmpl.data());
    if (fd < 0) {
      result.error = std::string("cannot create a temporary file: ") + std::strerror(errno);
      return result;
    }
    close(fd);
    output = tmpl;
    temporary = true;
  }
  const int out_fd = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out_fd < 0) {
    result.error = "cannot write " + output.string() + ": " + std::strerror(errno);
    return result;
  }

  // Everything the child needs is prepared before fork(): after it only async-signal-safe calls.
  std::vector<std::string> env_strings = build_environment(options.env);
  std::vector<char*> envp, argv;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = options.argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string cwd = options.cwd.string();

  int status_pipe[2];  // the child reports a failed exec through it; a successful exec closes it
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    close(out_fd);
    result.error = std::string("pipe: ") + std::strerror(errno);
    return result;
  }

  const auto start = std::chrono::steady_clock::now();
  const pid_t caller = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    result.error = std::string("fork: ") + std::strerror(errno);
    close(out_fd);
    close(status_pipe[0]);
    close(status_pipe[1]);
    return result;
  }
  if (pid == 0) {
    setpgid(0, 0);
    // The program ends with its caller: one stopped from outside (a signal, Ctrl-C, a
    // container's time limit) leaves nothing it started running. The setting survives execve
    // (not a change of user: see grading/sandbox.cpp for the programs run as another one).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != caller) _exit(127);  // the caller was gone before the setting was made
    const int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
    dup2(out_fd, STDOUT_FILENO);
    dup2(out_fd, STDERR_FILENO);
    struct rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // a crashing test should not leave a core file behind
    if (options.max_file_bytes > 0) {
      struct rlimit fsize{options.max_file_bytes, options.max_file_bytes};
      setrlimit(RLIMIT_FSIZE, &fsize);
    }
    signal(SIGPIPE, SIG_DFL);
    for (const int fd : options.keep_fds) fcntl(fd, F_SETFD, 0);
    int err = 0;
    if (!cwd.empty() && chdir(cwd.c_str()) != 0) {
      err = errno;
    } else {
      execve(program.c_str(), argv.data(), envp.data());
      err = errno;
    }
    ssize_t ignored = write(status_pipe[1], &err, sizeof err);
    (void)ignored;
    _exit(127);
  }
  setpgid(pid, pid);  // also from the parent, so that a timeout right away still finds the group
  close(status_pipe[1]);
  close(out_fd);
  int child_errno = 0;
  const ssize_t n = read(status_pipe[0], &child_errno, sizeof child_errno);
  close(status_pipe[0]);

  int status = 0;
  auto sleep_for = std::chrono::milliseconds(5);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) break;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (options.timeout_s > 0 && elapsed >= options.timeout_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(sleep_for);
    sleep_for = std::min(sleep_for * 2, std::chrono::milliseconds(100));
  }
  // Whatever the program left running in its group (a background job, a stuck death-test child)
  // goes with it.
  kill(-pid, SIGKILL);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    result.error = "cannot run " + program + ": " + std::strerror(child_errno);
  } else {
    result.started = true;
    if (!result.timed_out) {
      if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    }
  }
  result.output = read_shortened(output, options.max_output, result.output_bytes);
  if (temporary) {
    std::error_code ec;
    fs::remove(output, ec);
  }
  return result;
}

}  // namespace clockwork::handout
