// `clockwork bench --plot FILE.svg`: the benchmark's rows drawn by gnuplot.
//
//   * a roofline: every row with FLOPs and bytes as a point at its arithmetic intensity and
//     achieved FLOP/s, under the device's bandwidth slope and compute peaks;
//   * when the run has `decode` generation rows (--op decode --model DIR): ms per new token
//     against the prompt length, without the KV cache and with each cache.
//
// gnuplot (Debian: gnuplot-nox) draws the file from a script written here; on the CPU backend
// every panel says that its figures are of the CPU simulation and no peaks are drawn.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tools/clockwork/bench.h"

namespace clockwork::cli::bench {

/// One row as the plot needs it.
struct PlotPoint {
  const Row* row;        ///< the row (op, variant, case, shape, plot_x, time)
  double gbps = 0;       ///< achieved bandwidth
  double tflops = 0;     ///< achieved FLOP rate
};

/// What the plot shows besides the points.
struct PlotDevice {
  std::string name;          ///< device name for the title
  bool simulation = false;   ///< CPU backend: label as simulation, draw no roofs
  double bandwidth_gbps = 0; ///< peaks (0: unknown, not drawn)
  double fp32_tflops = 0;
  double bf16_tflops = 0;
  /// `bench --profile`: the points are predictions from the CPU backend's counts (bytes moved
  /// as counted, time as the roofline's floor), drawn under the named GPU's roofs.
  bool prediction = false;
};

/// The gnuplot program to run: $CLOCKWORK_GNUPLOT when set, else "gnuplot" on the PATH.
std::string gnuplot_program();

/// Throws UsageError, naming --plot, when `file` cannot be written as asked (not .svg, missing
/// directory) or gnuplot cannot be run; called before anything is timed.
void check_plot_target(const std::filesystem::path& file);

/// The gnuplot script that draws `points` into `output` (an SVG file). Exposed for tests.
std::string plot_script(const std::vector<PlotPoint>& points, const PlotDevice& device,
                        const std::filesystem::path& output);

/// Draws the plot with gnuplot into a temporary file beside `file`, then renames it, so a reader
/// never sees half a file. Throws std::runtime_error with gnuplot's message when it fails.
void write_plot(const std::filesystem::path& file, const std::vector<PlotPoint>& points,
                const PlotDevice& device);

}  // namespace clockwork::cli::bench
