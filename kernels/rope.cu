/// @file rope.cu
/// Milestone 3: rotary position embedding (RoPE), applied in place to Q and K.
///
/// Three steps, each small:
/// 1. rope_inv_freq (host, double): θ_i = rope_theta^(−2i/h_d), rescaled when the checkpoint
///    has a llama3 `rope_scaling`. Computed once per model.
/// 2. rope_tables_kernel: cos and sin of the angle p·θ_i for every position p and pair i, a
///    [s, h_d/2] table each. The angle is as large as p radians (θ_0 = 1), and an fp32 angle of
///    1000 radians is only good to about 6e-5, so the angle and its cos/sin are computed in
///    double and rounded once. The tables are tiny, so double costs nothing here.
/// 3. rope_apply_kernel: one block per row; each thread rotates pairs (x_i, x_{i+h_d/2}) of the
///    row's heads, first half with second half (Llama's layout, not even/odd neighbours).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {
namespace {

constexpr int kThreads = 256;

// positions [s], inv_freq [half] double, cos_table/sin_table [s, half]. One thread per entry.
__global__ void rope_tables_kernel(const int32_t* positions, const double* inv_freq,
                                   float* cos_table, float* sin_table, int s, int half) {
  // BEGIN SOLUTION(m3): One thread per table entry (r, i) of the [s, half] tables: the angle is
  // positions[r] · inv_freq[i]. Form it and take its cos and sin in double, then round each to
  // float: in fp32 an angle of p radians carries an error of a few ulp of p, which is already
  // 1e-4 at p = 1000. Use cos() and sin(), not std:: (device code) and not __cosf/__sinf (only
  // accurate for angles up to π).
  const size_t idx = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<size_t>(s) * half) return;
  const int r = static_cast<int>(idx / half), i = static_cast<int>(idx % half);
  const double angle = static_cast<double>(positions[r]) * inv_freq[i];
  cos_table[idx] = static_cast<float>(cos(angle));
  sin_table[idx] = static_cast<float>(sin(angle));
  // STUB: (void)positions; (void)inv_freq; (void)cos_table; (void)sin_table; (void)s; (void)half;
  // END SOLUTION
}

// x [s, n_heads·head_dim] rotated in place; cos_table/sin_table [s, head_dim/2]. One block per row.
__global__ void rope_apply_kernel(float* x, const float* cos_table, const float* sin_table,
                                  int n_heads, int head_dim) {
  // BEGIN SOLUTION(m3): Block r rotates row r. Its n_heads·h_d/2 pairs are shared out among the
  // threads with a strided loop; pair t belongs to head t / (h_d/2) and has index
  // i = t % (h_d/2) inside the head. Pair element i with element i + h_d/2 of the SAME head
  // (first half with second half, not 2i with 2i+1), read cos and sin from row r, column i of
  // the tables, and write both results back:
  //   x'_i = x_i·cos − x_{i+h_d/2}·sin,   x'_{i+h_d/2} = x_i·sin + x_{i+h_d/2}·cos.
  const int half = head_dim / 2;
  const int row = blockIdx.x;
  float* xr = x + static_cast<size_t>(row) * n_heads * head_dim;
  const float* c = cos_table + static_cast<size_t>(row) * half;
  const float* sn = sin_table + static_cast<size_t>(row) * half;
  for (int t = threadIdx.x; t < n_heads * half; t += blockDim.x) {
    const int head = t / half, i = t % half;
    float* xh = xr + head * head_dim;
    const float x1 = xh[i], x2 = xh[i + half];
    xh[i] = x1 * c[i] - x2 * sn[i];
    xh[i + half] = x1 * sn[i] + x2 * c[i];
  }
  // STUB: (void)x; (void)cos_table; (void)sin_table; (void)n_heads; (void)head_dim;
  // END SOLUTION
}

// Threads for a block that loops over `work` items: a multiple of a warp, at most kThreads, so
// short rows do not start threads that have nothing to do.
int block_for(int work) {
  return std::min(kThreads, std::max(32, (work + 31) / 32 * 32));
}

}  // namespace

std::vector<double> rope_inv_freq(int head_dim, double theta, const RopeScalingParams* scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) {
    throw std::invalid_argument("rope_inv_freq: head_dim must be positive and even (got " +
                                std::to_string(head_dim) + ")");
  }
  if (!(theta > 0)) throw std::invalid_argument("rope_inv_freq: theta must be positive");
  if (scaling &&
      !(scaling->factor > 0 && scaling->original_max_position_embeddings > 0 &&
        scaling->low_freq_factor > 0 && scaling->high_freq_factor > scaling->low_freq_factor)) {
    throw std::invalid_argument(
        "rope_inv_freq: scaling needs factor > 0, original_max_position_embeddings > 0 and "
        "high_freq_factor > low_freq_factor > 0");
  }
  std::vector<double> inv(static_cast<size_t>(head_dim / 2), 0.0);
  // BEGIN SOLUTION(m3): θ_i = theta^(−2i/h_d) for i < h_d/2, in double. With `scaling` (llama3),
  // compare each wavelength 2π/θ_i with low = original/low_freq_factor and
  // high = original/high_freq_factor: above low divide θ_i by factor; below high keep it; in
  // between blend (1 − a)·θ_i/factor + a·θ_i with a = (original/wavelength − low_freq_factor) /
  // (high_freq_factor − low_freq_factor).
  const double pi = 3.14159265358979323846;
  for (int i = 0; i < head_dim / 2; ++i) {
    inv[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  if (scaling) {
    const double original = scaling->original_max_position_embeddings;
    const double low_freq_wavelen = original / scaling->low_freq_factor;
    const double high_freq_wavelen = original / scaling->high_freq_factor;
    for (double& f : inv) {
      const double wavelen = 2.0 * pi / f;
      if (wavelen > low_freq_wavelen) {
        f = f / scaling->factor;
      } else if (wavelen >= high_freq_wavelen) {
        const double a = (original / wavelen - scaling->low_freq_factor) /
                         (scaling->high_freq_factor - scaling->low_freq_factor);
        f = (1.0 - a) * f / scaling->factor + a * f;
      }
    }
  }
  // STUB: (void)theta;
  // END SOLUTION
  return inv;
}

void rope_tables(const int32_t* positions, const double* inv_freq, float* cos_table,
                 float* sin_table, int s, int half, cudaStream_t stream) {
  if (s < 0 || half <= 0) {
    throw std::invalid_argument("rope_tables: need s >= 0 and half > 0 (got s=" +
                                std::to_string(s) + ", half=" + std::to_string(half) + ")");
  }
  if (cos_table == sin_table)
    throw std::invalid_argument("rope_tables: cos_table and sin_table must differ");
  if (s == 0) return;
  const size_t n = static_cast<size_t>(s) * half;
  rope_tables_kernel<<<static_cast<unsigned>((n + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      positions, inv_freq, cos_table, sin_table, s, half);
  CUDA_CHECK(cudaGetLastError());
}

void rope_apply(float* x, const float* cos_table, const float* sin_table, int s, int n_heads,
                int head_dim, cudaStream_t stream) {
  if (s < 0 || n_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0) {
    throw std::invalid_argument(
        "rope_apply: need s >= 0, n_heads > 0 and an even head_dim > 0 (got s=" +
        std::to_string(s) + ", n_heads=" + std::to_string(n_heads) +
        ", head_dim=" + std::to_string(head_dim) + ")");
  }
  if (s == 0) return;
  rope_apply_kernel<<<s, block_for(n_heads * head_dim / 2), 0, stream>>>(x, cos_table, sin_table,
                                                                         n_heads, head_dim);
  CUDA_CHECK(cudaGetLastError());
}

}  // namespace clockwork::kernels
