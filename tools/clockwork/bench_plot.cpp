// `clockwork bench --plot FILE.svg`: a gnuplot script from the benchmark's rows (see bench_plot.h).
#include "tools/clockwork/bench_plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tools/clockwork/cli.h"

namespace clockwork::cli::bench {

namespace {

namespace fs = std::filesystem;

// A number as gnuplot reads it, whatever the C locale says.
std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A double-quoted gnuplot string.
std::string gp_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// A single-quoted word for /bin/sh.
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool is_generation(const Row& r) {
  return r.op == "decode" && r.plot_x > 0;
}

bool on_roofline(const PlotPoint& p) {
  return p.row->flops > 0 && p.row->bytes > 0 && p.row->time.median_ms > 0;
}

const char* cache_title(const std::string& variant) {
  if (variant == "none") return "no KV cache (every step re-runs the sequence)";
  if (variant == "contiguous") return "contiguous KV cache";
  if (variant == "paged") return "paged KV cache";
  if (variant == "contiguous+graphs") return "contiguous KV cache, CUDA graphs";
  if (variant == "paged+graphs") return "paged KV cache, CUDA graphs";
  return nullptr;
}

std::string roofline_panel(const std::vector<PlotPoint>& points, const PlotDevice& device,
                           std::string& data) {
  // One series per (op, variant), in the order the rows came.
  std::vector<std::string> order;
  std::map<std::string, std::vector<const PlotPoint*>> series;
  double lo = 1e300, hi = 0;
  for (const PlotPoint& p : points) {
    if (!on_roofline(p)) continue;
    const std::string key = p.row->op + " " + p.row->variant;
    if (!series.count(key)) order.push_back(key);
    series[key].push_back(&p);
    const double intensity = p.row->flops / p.row->bytes;
    lo = std::min(lo, intensity);
    hi = std::max(hi, intensity);
  }
  // The simulation's rates are small: MFLOP/s keep them readable; a GPU's are TFLOP/s.
  const double scale = device.simulation ? 1e6 : 1.0;
  const bool roofs = !device.simulation && device.bandwidth_gbps > 0;
  if (roofs) {
    for (double peak : {device.fp32_tflops, device.bf16_tflops}) {
      if (peak > 0) {
        const double ridge = peak * 1e3 / device.bandwidth_gbps;  // FLOP per byte
        lo = std::min(lo, ridge / 10);
        hi = std::max(hi, ridge * 10);
      }
    }
  }
  lo /= 3;
  hi *= 3;
  // The y range holds every point and, on a GPU, the roofs over the whole x range.
  double ylo = 1e300, yhi = 0;
  for (const PlotPoint& p : points) {
    if (!on_roofline(p)) continue;
    ylo = std::min(ylo, p.tflops * scale);
    yhi = std::max(yhi, p.tflops * scale);
  }
  if (roofs) {
    const double top = std::max(device.fp32_tflops, device.bf16_tflops);
    yhi = std::max(yhi, top);
    ylo = std::min(ylo, std::min(lo * device.bandwidth_gbps / 1e3, top));
  }
  ylo /= 3;
  yhi *= 3;

  std::ostringstream s;
  s << "set title " << gp_string(device.prediction
                                  ? "Predicted roofline position from the CPU backend's counts (not a measurement)"
                                  : device.simulation
                                  ? "Roofline view of the CPU simulation: simulated MFLOP/s "
                                    "against arithmetic intensity (no GPU peaks apply)"
                                  : "Roofline: achieved TFLOP/s against arithmetic intensity")
    << "\n";
  s << "set logscale xy 10\n";
  s << "set xrange [" << num(lo) << ":" << num(hi) << "]\n";
  s << "set yrange [" << num(ylo) << ":" << num(yhi) << "]\n";
  s << "set xlabel "
    << gp_string(device.prediction ? "arithmetic intensity (FLOP per counted byte moved)"
                                   : "arithmetic intensity (FLOP per byte of compulsory traffic)")
    << "\n";
  s << "set ylabel "
    << gp_string(device.prediction   ? "predicted TFLOP/s (at best)"
                 : device.simulation ? "simulated MFLOP/s (CPU simulation)"
                                     : "achieved TFLOP/s")
    << "\n";
  s << "set key inside top left Left reverse box opaque\n";  // above the roof: never a point
  s << "set grid xtics ytics mxtics mytics lc rgb '#dddddd'\n";

  std::vector<std::string> plots;
  if (roofs) {
    const std::string bw = num(device.bandwidth_gbps / 1e3);  // TFLOP/s per FLOP/byte
    if (device.fp32_tflops > 0) {
      plots.push_back("(x*" + bw + " < " + num(device.fp32_tflops) + " ? x*" + bw + " : " +
                      num(device.fp32_tflops) + ") with lines lw 2 lc rgb '#333333' title " +
                      gp_string("roofline, fp32 CUDA cores (" + num(device.fp32_tflops) +
                             " TFLOP/s, " + num(device.bandwidth_gbps) + " GB/s)"));
    }
    if (device.bf16_tflops > 0) {
      plots.push_back("(x*" + bw + " < " + num(device.bf16_tflops) + " ? x*" + bw + " : " +
                      num(device.bf16_tflops) + ") with lines lw 2 dt 2 lc rgb '#888888' title " +
                      gp_string("roofline, bf16 tensor cores (" + num(device.bf16_tflops) +
                             " TFLOP/s)"));
    }
  }
  int i = 0;
  for (const std::string& key : order) {
    const std::string block = "$roof" + std::to_string(i);
    data += block + " << EOD\n";
    for (const PlotPoint* p : series[key]) {
      data += num(p->row->flops / p->row->bytes) + " " + num(p->tflops * scale) + "\n";
    }
    data += "EOD\n";
    plots.push_back(block + " using 1:2 with points pt " + std::to_string(5 + 2 * (i % 4)) +
                    " ps 1.3 lc " + std::to_string(i + 1) + " title " + gp_string(key));
    ++i;
  }
  s << "plot [" << num(lo) << ":" << num(hi) << "] ";
  for (size_t k = 0; k < plots.size(); ++k) s << (k ? ", \\\n     " : "") << plots[k];
  s << "\n";
  return s.str();
}

std::string decode_panel(const std::vector<PlotPoint>& points, const PlotDevice& device,
                         std::string& data) {
  std::vector<std::string> order;
  std::map<std::string, std::vector<const Row*>> series;
  for (const PlotPoint& p : points) {
    if (!is_generation(*p.row) || !cache_title(p.row->variant)) continue;
    if (!series.count(p.row->variant)) order.push_back(p.row->variant);
    series[p.row->variant].push_back(p.row);
  }
  std::ostringstream s;
  s << "set title "
    << gp_string(std::string("Decoding: ms per new token against the prompt length") +
              (device.simulation ? " (CPU simulation, not GPU time)" : ""))
    << "\n";
  s << "unset logscale\n";
  s << "set logscale x 2\n";
  s << "set autoscale\n";
  s << "set yrange [0:*]\n";
  s << "set offsets 0, 0, graph 0.3, 0\n";  // room for the key above the curves
  s << "set xlabel " << gp_string("prompt length (tokens)") << "\n";
  s << "set ylabel "
    << gp_string(device.simulation ? "ms per new token (CPU simulation)" : "ms per new token") << "\n";
  s << "set key inside top left Left reverse box opaque\n";
  s << "set grid xtics ytics lc rgb '#dddddd'\n";
  s << "plot ";
  int i = 0;
  for (const std::string& variant : order) {
    std::vector<const Row*> rows = series[variant];
    std::sort(rows.begin(), rows.end(), [](const Row* a, const Row* b) { return a->plot_x < b->plot_x; });
    const std::string block = "$decode" + std::to_string(i);
    data += block + " << EOD\n";
    for (const Row* r : rows) data += num(r->plot_x) + " " + num(r->time.median_ms) + "\n";
    data += "EOD\n";
    s << (i ? ", \\\n     " : "") << block << " using 1:2 with linespoints lw 2 pt 7 ps 1.2 title "
      << gp_string(cache_title(variant));
    ++i;
  }
  s << "\n";
  return s.str();
}

}  // namespace

std::string gnuplot_program() {
  const char* env = std::getenv("CLOCKWORK_GNUPLOT");
  return env && *env ? env : "gnuplot";
}

void check_plot_target(const fs::path& file) {
  std::string ext = file.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  if (ext != ".svg") {
    throw UsageError("--plot " + file.string() + ": the plot is written as SVG; name the file *.svg");
  }
  const fs::path dir = file.parent_path().empty() ? fs::path(".") : file.parent_path();
  if (!fs::is_directory(dir)) {
    throw UsageError("--plot " + file.string() + ": the directory " + dir.string() +
                     " does not exist");
  }
  if (fs::is_directory(file)) {
    throw UsageError("--plot " + file.string() + " is a directory; give a file name");
  }
  const std::string probe = "exec " + shell_word(gnuplot_program()) + " --version >/dev/null 2>&1";
  const int status = std::system(probe.c_str());
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw UsageError("--plot " + file.string() + ": gnuplot draws the plot, and '" +
                     gnuplot_program() +
                     "' could not be run; install it (Debian: apt-get install gnuplot-nox)");
  }
}

std::string plot_script(const std::vector<PlotPoint>& points, const PlotDevice& device,
                        const fs::path& output) {
  const bool roofline =
      std::any_of(points.begin(), points.end(), [](const PlotPoint& p) { return on_roofline(p); });
  const bool decode = std::any_of(points.begin(), points.end(), [](const PlotPoint& p) {
    return is_generation(*p.row) && cache_title(p.row->variant);
  });
  if (!roofline && !decode) {
    throw std::runtime_error(
        "--plot: nothing to draw: no row has both FLOPs and bytes for the roofline, and there are "
        "no decode rows (run --op decode with --model DIR for those)");
  }
  const int panels = (roofline ? 1 : 0) + (decode ? 1 : 0);
  std::string data;
  std::string body;
  if (roofline) body += roofline_panel(points, device, data);
  if (decode) body += decode_panel(points, device, data);

  std::ostringstream s;
  s << "# Written by clockwork bench --plot.\n";
  s << "set encoding utf8\n";
  s << "set terminal svg size 1000," << 50 + 520 * panels
    << " dynamic noenhanced font 'DejaVu Sans,12' background rgb '#ffffff'\n";
  s << "set output " << gp_string(output.string()) << "\n";
  s << data;
  std::string title = device.prediction ? "clockwork bench --profile: " + device.name
                                          : "clockwork bench on " + device.name;
  if (device.simulation) {
    title += "\nCPU simulation: these are the CPU backend's times, not a GPU's";
  }
  s << "set multiplot layout " << panels << ",1 title " << gp_string(title) << " font ',14'\n";
  s << body;
  s << "unset multiplot\n";
  s << "set output\n";
  return s.str();
}

void write_plot(const fs::path& file, const std::vector<PlotPoint>& points,
                const PlotDevice& device) {
  fs::path tmp = file;
  tmp += ".tmp" + std::to_string(getpid());
  fs::path err = file;
  err += ".err" + std::to_string(getpid());
  const std::string script = plot_script(points, device, tmp);
  const std::string command =
      "exec " + shell_word(gnuplot_program()) + " 2>" + shell_word(err.string());
  FILE* pipe = popen(command.c_str(), "w");
  if (!pipe) throw std::runtime_error("--plot: cannot run " + gnuplot_program());
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int status = pclose(pipe);

  std::string message;
  {
    std::ifstream in(err);
    std::ostringstream text;
    text << in.rdbuf();
    message = text.str();
  }
  std::error_code ec;
  fs::remove(err, ec);
  // gnuplot reports most script errors on stderr and carries on: any message is a failure.
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !message.empty() ||
      !fs::exists(tmp) || fs::file_size(tmp) == 0) {
    fs::remove(tmp, ec);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    throw std::runtime_error("--plot " + file.string() + ": gnuplot failed" +
                             (message.empty() ? std::string() : ":\n" + message));
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw std::runtime_error("--plot " + file.string() + ": cannot replace it (" + ec.message() + ")");
  }
}

}  // namespace clockwork::cli::bench
