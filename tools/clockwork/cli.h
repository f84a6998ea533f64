// Command-line plumbing shared by the `clockwork` subcommands: option parsing with --help, the
// error types that decide the exit code, and small output helpers.
//
// Error policy: a subcommand throws; main() prints exactly one line
//   clockwork <command>: error: <what went wrong, naming the file, tensor or option>
// and exits with 2 for a UsageError (the command line itself is wrong) or 1 for anything else
// (a missing directory, a malformed file, a failed check).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace clockwork::cli {

/// The command line is wrong: unknown option, missing value, value of the wrong kind. Exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One option a subcommand accepts.
struct Option {
  std::string name;        ///< without the dashes: "max-new-tokens"
  std::string value_name;  ///< "N", "DIR"; empty for a flag that takes no value
  std::string help;        ///< one sentence for --help
};

/// What a subcommand accepts, and the text of its --help.
struct CommandSpec {
  std::string name;             ///< "generate"
  std::string synopsis;         ///< "--model DIR --prompt TEXT [options]"
  std::string description;      ///< a paragraph printed under the synopsis
  std::vector<Option> options;  ///< --help is added automatically
  std::string positional_name;  ///< e.g. "ID"; empty when positional arguments are refused
  std::string epilogue;         ///< printed after the options (examples), may be empty
};

/// A parsed command line.
class Args {
 public:
  bool help = false;  ///< --help or -h was given

  bool has(const std::string& name) const { return values_.count(name) > 0; }
  /// Value of an option that takes one; nullopt when absent.
  std::optional<std::string> get(const std::string& name) const;
  /// Value of a required option; UsageError "missing --NAME VALUE" when absent.
  std::string require(const std::string& name) const;
  /// Integer value in [lo, hi]; `fallback` when absent. UsageError naming the option otherwise.
  int64_t get_int(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const;
  /// Floating-point value in [lo, hi]; `fallback` when absent.
  double get_double(const std::string& name, double fallback, double lo, double hi) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  friend Args parse_args(const CommandSpec&, const std::vector<std::string>&);
  const CommandSpec* spec_ = nullptr;
  std::map<std::string, std::string> values_;  // flags map to ""
  std::vector<std::string> positional_;
};

/// Parses `argv` (the arguments after the subcommand name). Accepts `--name value` and
/// `--name=value`. Throws UsageError on anything the spec does not allow.
Args parse_args(const CommandSpec& spec, const std::vector<std::string>& argv);

/// Runs `command` (the subcommand called `name`) with `args` and turns whatever it throws into
/// the one error line on stderr and the exit code (2 for UsageError, 1 otherwise).
int run_command(const std::string& name, int (*command)(const std::vector<std::string>&),
                const std::vector<std::string>& args);

/// The --help text of a subcommand.
std::string help_text(const CommandSpec& spec);

/// Parses a whole decimal integer ("12", "-3"); nullopt for anything else ("1.5", "12abc", "").
std::optional<int64_t> parse_int(std::string_view text);

/// Makes a possibly multi-line message fit on one line: each line break and the indentation
/// after it become "; ".
std::string one_line(std::string_view message);

/// A token's bytes shown readably: quoted, with \n, \t, \r, \\, \" and \xNN for bytes that are
/// not printable ASCII and not part of a valid UTF-8 character.
std::string quote_bytes(std::string_view bytes);

/// "1,2,3" -> {1, 2, 3} for an option that gives a prompt as token ids: each id an integer in
/// [0, vocab); anything else is a UsageError naming the element and `option`.
std::vector<int32_t> parse_id_list(const std::string& text, int64_t vocab, const std::string& option);

/// "1,234,567".
std::string group_digits(uint64_t value);

/// "15.0 GB", "240.1 KB", "512 B" (decimal units, as disk sizes are quoted).
std::string human_bytes(uint64_t bytes);

/// A progress bar on stderr, drawn only when stderr is a terminal (logs and tests stay clean).
class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();
  /// Redraws when the shown percentage changes.
  void update(uint64_t done, uint64_t total, const std::string& detail);
  /// Clears the bar's line.
  void finish();

 private:
  std::string label_;
  bool enabled_;
  int last_permille_ = -1;
  bool drawn_ = false;
};

}  // namespace clockwork::cli
