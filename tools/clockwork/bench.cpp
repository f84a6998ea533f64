// `clockwork bench`: the command line, the registry of groups, the table and the JSON file.
// The groups themselves live in bench_kernels.cpp (one per launcher of kernels.h) and in any
// other bench_*.cpp that registers one; timing and device peaks are in bench_backend.cpp.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/clockwork/bench.h"
#include "tools/clockwork/bench_backend.h"
#include "tools/clockwork/bench_plot.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"

namespace clockwork::cli {

namespace bench {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

std::vector<Group>& registry() {
  static std::vector<Group> groups;  // a function-local static: safe during static initialisation
  return groups;
}

// ---- shapes -----------------------------------------------------------------------------------

Shape llama3_8b(const std::string& name, int s) {
  Shape shape;  // the defaults of Shape are Llama-3-8B's widths
  shape.name = name;
  shape.s = s;
  return shape;
}

// Llama-3-8B with every width divided by 16 (GQA groups of 4 kept, h_d halved): what the CPU
// backend can simulate in seconds rather than minutes.
Shape narrowed(const std::string& name, int s) {
  Shape shape;
  shape.name = name;
  shape.s = s;
  shape.d = 256;
  shape.n_heads = 4;
  shape.n_kv_heads = 1;
  shape.head_dim = 64;
  shape.d_ff = 896;
  shape.vocab = 8016;
  return shape;
}

struct Preset {
  const char* name;
  Shape shape;
  const char* about;
};

const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {"decode", llama3_8b("decode", 1), "Llama-3-8B, one token (s=1): the GEMV regime"},
      {"prefill", llama3_8b("prefill", 128), "Llama-3-8B, a 128-token prompt (s=128)"},
      {"sim-decode", narrowed("sim-decode", 1),
       "Llama-3-8B narrowed 16x (d=256, h=4, h_k=1, d_ff=896, V=8016), s=1"},
      {"sim-prefill", narrowed("sim-prefill", 16), "the same narrowed model, s=16"},
  };
  return list;
}

const char* const kShapeKeys = "s, d, h, h_d, h_k, d_ff, V";

std::string shape_grammar() {
  std::string names;
  for (const Preset& p : presets()) names += std::string(names.empty() ? "" : ", ") + p.name;
  return "presets " + names + "; or key=value with keys " + kShapeKeys;
}

// h_d is d / h unless the shape sets it (Gemma 3 has h·h_d != d).
void finish_shape(Shape& shape, const std::string& text, bool head_dim_given) {
  if (head_dim_given) {
    if (shape.head_dim % 2 != 0) {
      throw UsageError("--shape '" + text + "': h_d=" + std::to_string(shape.head_dim) +
                       " must be even (RoPE pairs its halves)");
    }
  } else {
    if (shape.d % shape.n_heads != 0) {
      throw UsageError("--shape '" + text + "': d=" + std::to_string(shape.d) +
                       " is not a multiple of h=" + std::to_string(shape.n_heads) +
                       " (or set h_d)");
    }
    shape.head_dim = shape.d / shape.n_heads;
    if (shape.head_dim % 2 != 0) {
      throw UsageError("--shape '" + text + "': the head dimension d/h=" +
                       std::to_string(shape.head_dim) + " must be even (RoPE pairs its halves)");
    }
  }
  if (shape.n_heads % shape.n_kv_heads != 0) {
    throw UsageError("--shape '" + text + "': h=" + std::to_string(shape.n_heads) +
                     " is not a multiple of h_k=" + std::to_string(shape.n_kv_heads));
  }
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

double safe_rate(double amount, double ms, double unit) {
  return ms > 0 ? amount / (ms * 1e-3) / unit : 0;
}

// ---- the context handed to the groups ----------------------------------------------------------

struct LeaderboardEntry {
  std::string name;
  double value;
  Order order;
};

class RunContext final : public Context {
 public:
  RunContext(Options options, Backend& backend) : options_(std::move(options)), backend_(backend) {}

  const Options& options() const override { return options_; }
  bool simulation() const override { return backend_.info().simulation; }

  Timing time(const std::function<void()>& launch, const TimeOptions& opts) override {
    const int warmup = opts.warmup >= 0 ? opts.warmup : options_.warmup;
    const int reps = opts.repetitions > 0 ? opts.repetitions : options_.repetitions;
    return backend_.time(launch, opts.flush_l2, warmup, reps);
  }

  Blas* blas() override { return backend_.blas(); }

  void add(Row row) override {
    counted_.push_back(backend_.counted_line(row));
    counted_bytes_.push_back(backend_.counted_bytes());
    rows_.push_back(std::move(row));
  }
  void note(const std::string& text) override { notes_.push_back(text); }
  void leaderboard(const std::string& name, double value, Order order) override {
    std::string shown = name;
    if (simulation()) {
      // "x (gate_proj, decode)" becomes "x (gate_proj, decode, CPU simulation)".
      if (!shown.empty() && shown.back() == ')') {
        shown.insert(shown.size() - 1, ", CPU simulation");
      } else {
        shown += " (CPU simulation)";
      }
    }
    entries_.push_back({shown, value, order});
  }

  const std::vector<Row>& rows() const { return rows_; }
  const std::vector<std::string>& notes() const { return notes_; }
  const std::vector<LeaderboardEntry>& entries() const { return entries_; }
  const std::vector<std::string>& counted() const { return counted_; }
  const std::vector<double>& counted_bytes() const { return counted_bytes_; }

 private:
  Options options_;
  Backend& backend_;
  std::vector<Row> rows_;
  std::vector<std::string> notes_;
  std::vector<LeaderboardEntry> entries_;
  std::vector<std::string> counted_;  // per row: its counting-mode line (clockwork-profile)
  std::vector<double> counted_bytes_;  // per row: bytes moved per launch, counted
};

// ---- derived figures ---------------------------------------------------------------------------

// Everything the table and the JSON print about one row, computed once.
struct Figures {
  double gbps = 0, tflops = 0;
  std::optional<double> pct_bandwidth, pct_compute, pct_reference;
};

std::string row_key(const Row& r) {
  return r.op + "\n" + r.case_name + "\n" + r.shape;
}

std::vector<Figures> derive(const std::vector<Row>& rows, const DeviceInfo& info) {
  std::map<std::string, double> reference_ms;
  for (const Row& r : rows) {
    if (r.reference) reference_ms[row_key(r)] = r.time.median_ms;
  }
  std::vector<Figures> out;
  for (const Row& r : rows) {
    Figures f;
    f.gbps = safe_rate(r.bytes, r.time.median_ms, 1e9);
    f.tflops = safe_rate(r.flops, r.time.median_ms, 1e12);
    // A simulation has no peaks: percentages are for GPUs only.
    if (!info.simulation && r.time.median_ms > 0) {
      if (info.bandwidth_gbps.value > 0 && r.bytes > 0) {
        f.pct_bandwidth = 100 * f.gbps / info.bandwidth_gbps.value;
      }
      const double peak = r.peak == Peak::Fp32         ? info.fp32_tflops.value
                          : r.peak == Peak::Bf16Tensor ? info.bf16_tflops.value
                                                       : 0;
      if (peak > 0 && r.flops > 0) f.pct_compute = 100 * f.tflops / peak;
      if (auto it = reference_ms.find(row_key(r)); it != reference_ms.end() && !r.reference) {
        f.pct_reference = 100 * it->second / r.time.median_ms;
      }
    }
    out.push_back(f);
  }
  return out;
}

// ---- the table ---------------------------------------------------------------------------------

std::string fixed(double v, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Three or four significant digits for times from microseconds to seconds.
std::string ms_text(double ms) {
  return fixed(ms, ms < 0.01 ? 4 : ms < 1 ? 3 : ms < 100 ? 2 : 1);
}

std::string opt_text(const std::optional<double>& v) {
  return v ? fixed(*v, 1) : "-";
}

void print_header(const DeviceInfo& info, const Options& options) {
  std::printf("clockwork bench on %s (%s), backend %s\n", info.name.c_str(), info.detail.c_str(),
              info.backend.c_str());
  if (info.simulation) {
    std::printf(
        "  CPU simulation: every time below is how long the CPU backend took to simulate the\n"
        "  kernel. It says nothing about the speed of a GPU: compare variants with each other\n"
        "  (naive vs tiled), never with GPU figures. \"sim MB/s\" and \"sim MFLOP/s\" are\n"
        "  rates of the simulation; no percentages of a peak are given.\n");
  } else {
    auto peak = [](const char* what, const PeakFigure& p, const char* unit, const char* option) {
      if (p.value > 0) {
        std::printf("  peak %-22s %8.1f %-7s (%s)\n", what, p.value, unit, p.source.c_str());
      } else {
        std::printf("  peak %-22s %8s %-7s (unknown for this device: give it with %s)\n", what, "-",
                    unit, option);
      }
    };
    peak("DRAM bandwidth", info.bandwidth_gbps, "GB/s", "--peak-gbps");
    peak("fp32, CUDA cores", info.fp32_tflops, "TFLOP/s", "--peak-tflops");
    peak("bf16, tensor cores", info.bf16_tflops, "TFLOP/s", "--peak-tensor-tflops");
  }
  std::printf("  timing: median of %d runs after %d warm-up run%s; %s", options.repetitions,
              options.warmup, options.warmup == 1 ? "" : "s", info.timer.c_str());
  if (info.l2_flush_bytes > 0) {
    std::printf(" (%s written)", human_bytes(info.l2_flush_bytes).c_str());
  }
  std::printf("\n\n");
}

void print_table(const std::vector<Row>& rows, const std::vector<Figures>& figures,
                 const DeviceInfo& info) {
  std::vector<std::string> head = {"op",   "case",      "variant", "shape",
                                   "dims", "median ms", "p10 ms",  "p90 ms"};
  if (info.simulation) {
    head.insert(head.end(), {"sim MB/s", "sim MFLOP/s"});
  } else {
    head.insert(head.end(), {"GB/s", "TFLOP/s", "BW%", "FLOP%", "cuBLAS%"});
  }
  const bool extra =
      std::any_of(rows.begin(), rows.end(), [](const Row& r) { return !r.extra_name.empty(); });
  if (extra) head.push_back("other");
  const size_t text_columns = 5;  // left-aligned; the figures are right-aligned

  std::vector<std::vector<std::string>> cells;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const Figures& f = figures[i];
    std::vector<std::string> c = {r.op,
                                  r.case_name,
                                  r.variant,
                                  r.shape,
                                  r.dims,
                                  ms_text(r.time.median_ms),
                                  ms_text(r.time.p10_ms),
                                  ms_text(r.time.p90_ms)};
    const std::string gb = r.bytes > 0 ? fixed(f.gbps, 1) : "-";
    if (info.simulation) {
      // Simulated rates are small: MB/s and MFLOP/s keep their digits visible.
      c.insert(c.end(), {r.bytes > 0 ? fixed(f.gbps * 1e3, 1) : "-",
                         r.flops > 0 ? fixed(f.tflops * 1e6, 1) : "-"});
    } else {
      std::string pct_compute = opt_text(f.pct_compute);
      if (f.pct_compute && r.peak == Peak::Bf16Tensor) pct_compute += "*";
      c.insert(c.end(), {gb, r.flops > 0 ? fixed(f.tflops, 2) : "-", opt_text(f.pct_bandwidth),
                         pct_compute, r.reference ? "ref" : opt_text(f.pct_reference)});
    }
    if (extra) {
      c.push_back(r.extra_name.empty() ? "" : fixed(r.extra_value, 1) + " " + r.extra_name);
    }
    cells.push_back(std::move(c));
  }

  std::vector<size_t> width(head.size());
  for (size_t j = 0; j < head.size(); ++j) width[j] = head[j].size();
  for (const auto& c : cells) {
    for (size_t j = 0; j < c.size(); ++j) width[j] = std::max(width[j], c[j].size());
  }
  auto line = [&](const std::vector<std::string>& c) {
    std::string out;
    for (size_t j = 0; j < c.size(); ++j) {
      const std::string pad(width[j] - c[j].size(), ' ');
      out += j == 0 ? "" : "  ";
      const bool left = j < text_columns || (extra && j + 1 == c.size());
      out += left ? c[j] + pad : pad + c[j];
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    std::printf("%s\n", out.c_str());
  };
  line(head);
  for (const auto& c : cells) line(c);

  std::printf("\n");
  std::printf(
      "  Bytes count each operand read once and each output written once; FLOPs count\n"
      "  2 per multiply-add. dims of matmul and lm_head: m x n x k (y[m,n] = x[m,k] w[n,k]^T).\n");
  if (!info.simulation) {
    std::printf(
        "  FLOP%% is of the fp32 CUDA-core peak (the course's kernels widen bf16 to fp32);\n"
        "  * marks rows measured against the bf16 tensor-core peak. cuBLAS%% is cuBLAS's\n"
        "  time divided by this row's, for the same op, case and shape.\n");
  }
}

// ---- the JSON file -----------------------------------------------------------------------------

json optional_number(const std::optional<double>& v) {
  return v ? json(*v) : json(nullptr);
}

json peak_json(const PeakFigure& p) {
  if (p.value <= 0) return nullptr;
  return {{"value", p.value}, {"source", p.source}};
}

const char* peak_name(Peak p) {
  switch (p) {
    case Peak::Fp32:
      return "fp32";
    case Peak::Bf16Tensor:
      return "bf16_tensor";
    case Peak::None:
      break;
  }
  return nullptr;
}

json make_json(const RunContext& ctx, const std::vector<Figures>& figures, const DeviceInfo& info) {
  const Options& o = ctx.options();
  json j;
  j["tool"] = "clockwork bench";
  j["backend"] = info.backend;
  j["device"] = info.name;
  j["simulation"] = info.simulation;
  j["timing"] = {{"method", info.timer},
                 {"warmup", o.warmup},
                 {"repetitions", o.repetitions},
                 {"l2_flush_bytes", info.l2_flush_bytes}};
  j["peaks"] = {
      {"memory_gbps", info.simulation ? json(nullptr) : peak_json(info.bandwidth_gbps)},
      {"fp32_tflops", info.simulation ? json(nullptr) : peak_json(info.fp32_tflops)},
      {"bf16_tensor_tflops", info.simulation ? json(nullptr) : peak_json(info.bf16_tflops)}};
  json shapes = json::array();
  for (const Shape& s : o.shapes) {
    shapes.push_back({{"name", s.name},
                      {"s", s.s},
                      {"d", s.d},
                      {"h", s.n_heads},
                      {"h_k", s.n_kv_heads},
                      {"h_d", s.head_dim},
                      {"d_ff", s.d_ff},
                      {"V", s.vocab}});
  }
  j["shapes"] = shapes;
  json rows = json::array();
  for (size_t i = 0; i < ctx.rows().size(); ++i) {
    const Row& r = ctx.rows()[i];
    const Figures& f = figures[i];
    json row = {{"op", r.op},
                {"case", r.case_name},
                {"variant", r.variant},
                {"shape", r.shape},
                {"dims", r.dims},
                {"bytes", r.bytes},
                {"flops", r.flops},
                {"median_ms", r.time.median_ms},
                {"min_ms", r.time.min_ms},
                {"max_ms", r.time.max_ms},
                {"p10_ms", r.time.p10_ms},
                {"p90_ms", r.time.p90_ms},
                {"repetitions", r.time.repetitions},
                {"gbps", r.bytes > 0 ? json(f.gbps) : json(nullptr)},
                {"tflops", r.flops > 0 ? json(f.tflops) : json(nullptr)},
                {"compute_peak", peak_name(r.peak) ? json(peak_name(r.peak)) : json(nullptr)},
                {"pct_peak_bandwidth", optional_number(f.pct_bandwidth)},
                {"pct_peak_compute", optional_number(f.pct_compute)},
                {"reference", r.reference},
                {"pct_of_cublas", optional_number(f.pct_reference)},
                {"simulation", info.simulation}};
    if (!r.extra_name.empty()) row[r.extra_name] = r.extra_value;
    rows.push_back(std::move(row));
  }
  j["rows"] = rows;
  j["notes"] = ctx.notes();
  // Gradescope's leaderboard entries, ready to copy into results.json.
  json board = json::array();
  for (const LeaderboardEntry& e : ctx.entries()) {
    board.push_back({{"name", e.name},
                     {"value", e.value},
                     {"order", e.order == Order::Ascending ? "asc" : "desc"}});
  }
  j["leaderboard"] = board;
  return j;
}

void check_json_target(const fs::path& file) {
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  if (!fs::is_directory(dir)) {
    throw UsageError("--json " + file.string() + ": the directory " + dir.string() +
                     " does not exist");
  }
  if (fs::is_directory(file)) {
    throw UsageError("--json " + file.string() + " is a directory; give a file name");
  }
}

// Written to a temporary file beside the target and renamed, so a reader never sees half a file.
void write_json(const fs::path& file, const json& j) {
  fs::path tmp = file;
  tmp += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw std::runtime_error("--json " + file.string() + ": cannot write " + tmp.string());
    }
  }
  std::error_code ec;
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("--json " + file.string() + ": cannot replace it (" + ec.message() +
                             ")");
  }
}

// ---- the command line --------------------------------------------------------------------------

CommandSpec make_spec() {
  CommandSpec spec{
      "bench",
      "[--op NAMES] [--shape SPEC] [--json FILE] [options]",
      "Times the course's kernels on Llama-3-8B shapes: every variant (naive and tiled matmul,\n"
      "and cuBLAS on the GPU), after warm-up runs, with the L2 cache flushed before each timed\n"
      "run on the GPU, and reports the median with achieved GB/s, TFLOP/s, the percentage of the\n"
      "device's peaks and, for matmuls, of cuBLAS. On the CPU backend (clockwork) the times are\n"
      "those of the simulation, labelled so, and the shapes are narrowed by default.",
      {
          {"op", "NAMES", "ops to run, comma-separated (default: all; see --list)"},
          {"shape", "SPEC",
           "shapes to run at, comma-separated: a preset (decode, prefill, sim-decode, "
           "sim-prefill) starts a shape, key=value changes it (keys s, d, h, h_d, h_k, d_ff, "
           "V; h_d is d/h unless given; alone they change Llama-3-8B at s=1). Default: decode,prefill on the GPU, "
           "sim-decode,sim-prefill on the CPU backend"},
          {"variant", "NAMES", "only these variants, comma-separated (e.g. tiled, or naive,tiled)"},
          {"repetitions", "N", "timed runs per measurement (default 20 on the GPU, 5 on the CPU)"},
          {"warmup", "N", "untimed runs first (default 3 on the GPU, 1 on the CPU)"},
          {"json", "FILE", "also write the results, device and leaderboard as JSON"},
          {"plot", "FILE.svg",
           "also draw the results with gnuplot: a roofline with every kernel's point, and (with "
           "--op decode --model DIR) ms per token against the prompt length with and without the "
           "KV cache"},
          {"list", "", "list the ops, their variants and the shape presets, then exit"},
          {"peak-gbps", "X", "use X GB/s as the DRAM bandwidth peak"},
          {"peak-tflops", "X", "use X TFLOP/s as the fp32 CUDA-core peak"},
          {"peak-tensor-tflops", "X", "use X TFLOP/s as the bf16 tensor-core peak"},
          {"profile", "",
           "CPU backend: also count each kernel's memory traffic as Nsight Compute would (sectors "
           "per request, shared-memory wavefronts, bytes) and predict its roofline position; runs "
           "clockwork-profile, with 1 repetition and no warm-up unless given"},
          {"gpu", "NAME", "with --profile: the GPU of the prediction, h100 (default), a100, rtx4090 or t4"},
      },
      "",
      "examples:\n"
      "  clockwork bench --op matmul,rmsnorm\n"
      "  clockwork-cuda bench --op matmul --shape prefill,s=512 --json bench.json\n"
      "  clockwork-cuda bench --op matmul,rmsnorm,decode --model DIR --plot bench.svg\n"
      "  clockwork bench --op matmul --shape s=4,d=128,h=2,h_k=1,d_ff=256,V=512 --repetitions 2\n"
      "  clockwork bench --profile --op matmul --gpu a100"};
  std::set<std::string> seen;
  for (const Option& o : spec.options) seen.insert(o.name);
  for (const Group& g : groups()) {
    for (const Option& o : g.options) {
      if (!seen.insert(o.name).second) {
        throw std::logic_error("bench group '" + g.name + "' adds option --" + o.name +
                               ", which is already taken");
      }
      spec.options.push_back(o);
    }
  }
  return spec;
}

void print_list(bool simulation) {
  std::printf("ops (--op):\n");
  for (const Group& g : groups()) {
    std::printf("  %-10s %s\n", g.name.c_str(), g.description.c_str());
    if (!g.variants.empty()) {
      std::string v;
      for (const std::string& name : g.variants) v += (v.empty() ? "" : ", ") + name;
      std::printf("  %-10s variants: %s\n", "", v.c_str());
    }
  }
  std::printf("\nshape presets (--shape):\n");
  for (const Preset& p : presets()) std::printf("  %-12s %s\n", p.name, p.about);
  std::printf("\ndefault shapes here: ");
  std::string names;
  for (const Shape& s : default_shapes(simulation)) names += (names.empty() ? "" : ",") + s.name;
  std::printf("%s\n", names.c_str());
}

std::vector<const Group*> select_groups(const std::optional<std::string>& text) {
  std::vector<const Group*> chosen;
  if (!text) {
    for (const Group& g : groups()) chosen.push_back(&g);
    return chosen;
  }
  std::string names;
  for (const Group& g : groups()) names += (names.empty() ? "" : ", ") + g.name;
  for (const std::string& name : split(*text, ',')) {
    if (name.empty()) throw UsageError("--op '" + *text + "' has an empty name");
    const Group* found = nullptr;
    for (const Group& g : groups()) {
      if (g.name == name) found = &g;
    }
    if (!found) throw UsageError("unknown op '" + name + "' in --op (ops: " + names + ")");
    if (std::find(chosen.begin(), chosen.end(), found) == chosen.end()) chosen.push_back(found);
  }
  return chosen;
}

// A variant that no selected group has is an error before anything runs, when the groups say
// which variants they have.
void check_variants(const std::vector<std::string>& wanted,
                    const std::vector<const Group*>& chosen) {
  std::set<std::string> known;
  for (const Group* g : chosen) {
    if (g->variants.empty()) return;  // a group that does not say: cannot check
    known.insert(g->variants.begin(), g->variants.end());
  }
  for (const std::string& v : wanted) {
    if (known.count(v)) continue;
    std::string names;
    for (const std::string& k : known) names += (names.empty() ? "" : ", ") + k;
    throw UsageError("unknown variant '" + v + "' in --variant (the selected ops have: " + names +
                     ")");
  }
}

}  // namespace

bool Options::wants(const std::string& variant) const {
  return variants.empty() || std::find(variants.begin(), variants.end(), variant) != variants.end();
}

bool register_group(Group group) {
  registry().push_back(std::move(group));
  return true;
}

const std::vector<Group>& groups() {
  return registry();
}

std::vector<Shape> parse_shapes(const std::string& text) {
  std::vector<Shape> shapes;
  std::vector<std::string> tokens;  // of the shape being built, for its name
  std::set<std::string> keys;
  auto close = [&] {
    if (shapes.empty()) return;
    std::string name;
    for (const std::string& t : tokens) name += (name.empty() ? "" : ",") + t;
    shapes.back().name = name;
    finish_shape(shapes.back(), name, keys.count("h_d") > 0);
  };
  for (const std::string& token : split(text, ',')) {
    if (token.empty()) throw UsageError("--shape '" + text + "' has an empty part");
    const size_t eq = token.find('=');
    if (eq == std::string::npos) {
      const Preset* preset = nullptr;
      for (const Preset& p : presets()) {
        if (token == p.name) preset = &p;
      }
      if (!preset) {
        throw UsageError("unknown shape '" + token + "' in --shape (" + shape_grammar() + ")");
      }
      close();
      shapes.push_back(preset->shape);
      tokens = {token};
      keys.clear();
      continue;
    }
    if (shapes.empty()) {
      shapes.push_back(llama3_8b("", 1));
      tokens.clear();
      keys.clear();
    }
    const std::string key = token.substr(0, eq), value_text = token.substr(eq + 1);
    Shape& shape = shapes.back();
    // Limits keep every index within the int arguments of the launchers.
    struct Key {
      const char* name;
      int* field;
      int max;
    };
    const Key table[] = {{"s", &shape.s, 8192},        {"d", &shape.d, 16384},
                         {"h", &shape.n_heads, 256},   {"h_d", &shape.head_dim, 1024},
                         {"h_k", &shape.n_kv_heads, 256},
                         {"d_ff", &shape.d_ff, 65536}, {"V", &shape.vocab, 262144}};
    const Key* k = nullptr;
    for (const Key& candidate : table) {
      if (key == candidate.name) k = &candidate;
    }
    if (!k) {
      throw UsageError("unknown key '" + key + "' in --shape '" + text + "' (keys: " + kShapeKeys +
                       ")");
    }
    if (!keys.insert(key).second) {
      throw UsageError("--shape '" + text + "' sets " + key + " twice for one shape");
    }
    const auto value = parse_int(value_text);
    if (!value || *value < 1 || *value > k->max) {
      throw UsageError("--shape '" + text + "': " + key + "=" + value_text +
                       " is not a whole number from 1 to " + std::to_string(k->max));
    }
    *k->field = static_cast<int>(*value);
    tokens.push_back(token);
  }
  close();
  if (shapes.empty()) throw UsageError("--shape is empty (" + shape_grammar() + ")");
  return shapes;
}

std::vector<Shape> default_shapes(bool simulation) {
  return simulation ? parse_shapes("sim-decode,sim-prefill") : parse_shapes("decode,prefill");
}

Timing summarize(std::vector<double> samples_ms) {
  Timing t;
  t.repetitions = static_cast<int>(samples_ms.size());
  if (samples_ms.empty()) return t;
  std::sort(samples_ms.begin(), samples_ms.end());
  // Linear interpolation between the order statistics (the median of an even count is the mean
  // of the middle two).
  auto quantile = [&](double q) {
    const double pos = q * static_cast<double>(samples_ms.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, samples_ms.size() - 1);
    return samples_ms[lo] + (pos - static_cast<double>(lo)) * (samples_ms[hi] - samples_ms[lo]);
  };
  t.min_ms = samples_ms.front();
  t.max_ms = samples_ms.back();
  t.median_ms = quantile(0.5);
  t.p10_ms = quantile(0.1);
  t.p90_ms = quantile(0.9);
  return t;
}

}  // namespace bench

namespace bench {
namespace {
// `clockwork bench --profile`: the same command in clockwork-profile, the CPU backend with the
// kernels built for counting, next to this program.
int run_counting_binary(const std::vector<std::string>& argv, const std::string& gpu) {
  std::error_code ec;
  const std::filesystem::path helper = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "clockwork-profile";
  if (ec || !std::filesystem::exists(helper, ec)) {
    throw std::runtime_error("clockwork-profile was not found next to this program; it is built when the compiler "
                             "can build kernels for checking (CUDASIM_CAN_CHECK)");
  }
  std::vector<std::string> words{"clockwork-profile", "bench"};
  words.insert(words.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (std::string& w : words) args.push_back(w.data());
  args.push_back(nullptr);
  setenv("CUDASIM_PROFILE", "1", 1);
  setenv("CUDASIM_GPU", gpu.c_str(), 1);
  std::fflush(stdout);
  std::fflush(stderr);
  execv(helper.c_str(), args.data());
  throw std::runtime_error("cannot run " + helper.string() + ": " + std::strerror(errno));
}
}  // namespace
}  // namespace bench

int cmd_bench(const std::vector<std::string>& argv) {
  using namespace bench;
  {
    // Two groups with one name would make --op ambiguous: a mistake in the code, not the user's.
    std::set<std::string> names;
    for (const Group& g : groups()) {
      if (!names.insert(g.name).second) {
        throw std::logic_error("two bench groups are registered as '" + g.name + "'");
      }
    }
  }
  const CommandSpec spec = make_spec();
  const Args args = parse_args(spec, argv);
  if (args.help) {
    std::cout << help_text(spec);
    return 0;
  }
  const bool simulation = std::string(backend_name()) == "sim";
  const bool profile = args.has("profile");
  if (args.has("gpu") && !profile) throw UsageError("--gpu goes with --profile (the GPU of its prediction)");
  if (profile) {
    const std::string gpu = args.get("gpu").value_or("h100");
    const std::vector<std::string> gpus = counting_gpus();
    if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) {
      throw UsageError("--gpu '" + gpu + "': expected h100, a100, rtx4090 or t4");
    }
    if (!simulation) {
      throw UsageError("--profile counts memory traffic on the CPU backend: run `clockwork bench --profile` "
                       "(no GPU needed), and Nsight Compute (tools/profile/ncu-kernel.sh) on the GPU");
    }
    if (!counting_build()) return run_counting_binary(argv, gpu);
  }
  if (args.has("list")) {
    print_list(simulation);
    return 0;
  }

  // Everything the command line can get wrong is checked before the device is touched.
  Options options;
  options.args = &args;
  const std::vector<const Group*> chosen = select_groups(args.get("op"));
  options.shapes =
      args.has("shape") ? parse_shapes(*args.get("shape")) : default_shapes(simulation);
  // Counting needs one launch per measurement: the counts do not vary between runs.
  options.repetitions =
      static_cast<int>(args.get_int("repetitions", profile ? 1 : simulation ? 5 : 20, 1, 10000));
  options.warmup = static_cast<int>(args.get_int("warmup", profile ? 0 : simulation ? 1 : 3, 0, 10000));
  if (auto v = args.get("variant")) {
    for (const std::string& name : split(*v, ',')) {
      if (name.empty()) throw UsageError("--variant '" + *v + "' has an empty name");
      options.variants.push_back(name);
    }
    check_variants(options.variants, chosen);
  }
  PeakOverrides overrides;
  overrides.gbps = args.get_double("peak-gbps", 0, 0, 1e6);
  overrides.fp32_tflops = args.get_double("peak-tflops", 0, 0, 1e6);
  overrides.bf16_tflops = args.get_double("peak-tensor-tflops", 0, 0, 1e6);
  std::optional<std::filesystem::path> json_file;
  if (auto j = args.get("json")) {
    json_file = *j;
    check_json_target(*json_file);
  }
  std::optional<std::filesystem::path> plot_file;
  if (auto p = args.get("plot")) {
    plot_file = *p;
    check_plot_target(*plot_file);
  }

  const std::unique_ptr<Backend> backend = make_backend(overrides);
  const DeviceInfo& info = backend->info();
  RunContext ctx(options, *backend);
  if (info.simulation) {
    if (overrides.gbps > 0 || overrides.fp32_tflops > 0 || overrides.bf16_tflops > 0) {
      ctx.note("--peak-* options are ignored on the CPU backend: a simulation has no peaks");
    }
    for (const Shape& s : options.shapes) {
      if (s.d >= 1024) {
        std::fprintf(stderr,
                     "clockwork bench: note: shape %s has Llama-3-8B widths; simulating it on the "
                     "CPU takes minutes (the sim-decode and sim-prefill presets take seconds)\n",
                     s.name.c_str());
      }
    }
  }

  const bool progress = isatty(STDERR_FILENO) == 1;
  for (const Group* g : chosen) {
    if (progress) std::fprintf(stderr, "\r\033[Kbench: %s ...", g->name.c_str());
    g->run(ctx);
  }
  if (progress) std::fprintf(stderr, "\r\033[K");

  const std::vector<Figures> figures = derive(ctx.rows(), info);
  print_header(info, options);
  if (ctx.rows().empty()) {
    std::printf("(no results: the selected ops and variants ran nothing at these shapes)\n");
  } else {
    print_table(ctx.rows(), figures, info);
  }
  if (!ctx.rows().empty() && !backend->counted_header().empty()) {
    std::printf("\ncounted on the CPU backend, per launch (global loads and stores: 32-byte sectors per request and "
                "the ideal; shared memory: wavefronts per request and the ideal, which is 1 for 4-byte accesses and 4 "
                "for float4 ones, served a quarter warp at a time: more is bank conflicts; worst source lines: "
                "build the kernel with cudasim-cc --profile, see handouts/profiling.md):\n");
    std::printf("%s", backend->counted_header().c_str());
    for (const std::string& line : ctx.counted()) std::printf("%s", line.c_str());
  }
  if (!ctx.notes().empty()) {
    std::printf("\nnotes:\n");
    for (const std::string& n : ctx.notes()) std::printf("  %s\n", n.c_str());
  }
  if (json_file) {
    write_json(*json_file, make_json(ctx, figures, info));
    std::printf("\nwrote %s\n", json_file->string().c_str());
  }
  if (plot_file) {
    std::vector<PlotPoint> points;
    PlotDevice device{info.name, info.simulation, info.bandwidth_gbps.value,
                      info.fp32_tflops.value, info.bf16_tflops.value};
    std::string gpu;
    double gpu_bw = 0, gpu_flops = 0;
    std::vector<Row> predicted;  // --profile: each row at its counted bytes and predicted time
    if (backend->counted_gpu(gpu, gpu_bw, gpu_flops)) {
      device = PlotDevice{"prediction for " + gpu + " from counts on the CPU backend", false, gpu_bw / 1e9,
                          gpu_flops / 1e12, 0, true};
      predicted = ctx.rows();
      for (size_t i = 0; i < predicted.size(); ++i) {
        Row& r = predicted[i];
        r.bytes = ctx.counted_bytes()[i];
        const double t = std::max(r.bytes / gpu_bw, r.flops / gpu_flops);
        r.time.median_ms = t * 1e3;
      }
      for (const Row& r : predicted) {
        const double t = r.time.median_ms / 1e3;
        points.push_back({&r, t > 0 ? r.bytes / t / 1e9 : 0, t > 0 ? r.flops / t / 1e12 : 0});
      }
    } else {
      for (size_t i = 0; i < ctx.rows().size(); ++i) {
        points.push_back({&ctx.rows()[i], figures[i].gbps, figures[i].tflops});
      }
    }
    write_plot(*plot_file, points, device);
    std::printf("%swrote %s\n", json_file ? "" : "\n", plot_file->string().c_str());
  }
  return 0;
}

}  // namespace clockwork::cli
