/// @file host.h
/// What the known-good implementations share: moving a device buffer to the host and back, and
/// the operators of the forward pass as plain loops on the host. Sums are taken in double and
/// rounded to fp32 once, so each result is the exact answer to within one fp32 rounding, closer
/// than any kernel's; every test tolerance that accepts a correct kernel accepts it too.
/// Kernels never include this header, nor does any test: only harness/known_good/*.cpp do.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/check/cuda_check.h"

namespace clockwork::known_good {

/// Waits for the work queued on `stream` (the inputs may still be being written there).
inline void wait_for(cudaStream_t stream) { CUDA_CHECK(cudaStreamSynchronize(stream)); }

/// n elements of device memory, copied to the host.
template <typename T>
std::vector<T> download(const T* device, size_t n) {
  std::vector<T> host(n);
  if (n != 0) CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// Copies `host` to the device at `device`, and waits until the copy has landed (a copy from
/// pageable memory may return before it has; the next kernel may run on any stream).
template <typename T>
void upload(T* device, const std::vector<T>& host) {
  if (!host.empty()) {
    CUDA_CHECK(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize());
  }
}

/// bf16 to fp32 by its bits (a bf16 is the top half of an fp32), the same on every toolkit.
inline float widen(__nv_bfloat16 b) {
  uint16_t raw;
  std::memcpy(&raw, &b, sizeof raw);
  const uint32_t bits = static_cast<uint32_t>(raw) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// n bf16 values of device memory, widened to fp32 on the host.
inline std::vector<float> download_bf16(const __nv_bfloat16* device, size_t n) {
  const std::vector<__nv_bfloat16> raw = download(device, n);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = widen(raw[i]);
  return out;
}

/// y[m, n] = x[m, k]·w[n, k]ᵀ.
inline std::vector<float> matmul_xwt(const std::vector<float>& x, const std::vector<float>& w, int m,
                                     int n, int k) {
  std::vector<float> y(static_cast<size_t>(m) * n);
  for (int j = 0; j < n; ++j) {
    const float* wj = w.data() + static_cast<size_t>(j) * k;
    for (int i = 0; i < m; ++i) {
      const float* xi = x.data() + static_cast<size_t>(i) * k;
      double sum = 0;
      for (int t = 0; t < k; ++t) sum += static_cast<double>(xi[t]) * wj[t];
      y[static_cast<size_t>(i) * n + j] = static_cast<float>(sum);
    }
  }
  return y;
}

/// RMSNorm of each of `rows` rows of length d.
inline std::vector<float> rmsnorm_rows(const std::vector<float>& x, const std::vector<float>& gamma,
                                       int rows, int d, float eps) {
  std::vector<float> y(static_cast<size_t>(rows) * d);
  for (int r = 0; r < rows; ++r) {
    const float* xr = x.data() + static_cast<size_t>(r) * d;
    double squares = 0;
    for (int i = 0; i < d; ++i) squares += static_cast<double>(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(squares / d + static_cast<double>(eps));
    for (int i = 0; i < d; ++i) y[static_cast<size_t>(r) * d + i] = static_cast<float>(xr[i] * inv * gamma[i]);
  }
  return y;
}

/// RoPE in place on `rows` rows of n_heads heads, row r rotated with table row r.
inline void rope_rows(std::vector<float>& x, const std::vector<float>& cos_t, const std::vector<float>& sin_t,
                      int rows, int n_heads, int head_dim) {
  const int half = head_dim / 2;
  for (int r = 0; r < rows; ++r) {
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x.data() + (static_cast<size_t>(r) * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        const double c = cos_t[static_cast<size_t>(r) * half + i], s = sin_t[static_cast<size_t>(r) * half + i];
        const double x1 = xh[i], x2 = xh[i + half];
        xh[i] = static_cast<float>(x1 * c - x2 * s);
        xh[i + half] = static_cast<float>(x1 * s + x2 * c);
      }
    }
  }
}

/// The softmax scale of attention, as the kernels form it.
inline double attention_scale(int head_dim) {
  return static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

/// Causal GQA attention of a prompt of s tokens: out [s, h·h_d].
inline std::vector<float> causal_attention(const std::vector<float>& q, const std::vector<float>& k,
                                           const std::vector<float>& v, int s, int n_heads, int n_kv_heads,
                                           int head_dim) {
  const int group = n_heads / n_kv_heads;
  const size_t q_stride = static_cast<size_t>(n_heads) * head_dim, kv_stride = static_cast<size_t>(n_kv_heads) * head_dim;
  const double scale = attention_scale(head_dim);
  std::vector<float> out(static_cast<size_t>(s) * q_stride);
  std::vector<double> p(static_cast<size_t>(s)), acc(static_cast<size_t>(head_dim));
  for (int h = 0; h < n_heads; ++h) {
    const int g = h / group;
    for (int r = 0; r < s; ++r) {
      const float* qr = q.data() + r * q_stride + static_cast<size_t>(h) * head_dim;
      double top = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= r; ++j) {
        const float* kj = k.data() + j * kv_stride + static_cast<size_t>(g) * head_dim;
        double dot = 0;
        for (int t = 0; t < head_dim; ++t) dot += static_cast<double>(qr[t]) * kj[t];
        p[j] = dot * scale;
        top = std::max(top, p[j]);
      }
      double sum = 0;
      for (int j = 0; j <= r; ++j) sum += (p[j] = std::exp(p[j] - top));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int j = 0; j <= r; ++j) {
        const float* vj = v.data() + j * kv_stride + static_cast<size_t>(g) * head_dim;
        for (int t = 0; t < head_dim; ++t) acc[t] += p[j] * vj[t];
      }
      float* o = out.data() + r * q_stride + static_cast<size_t>(h) * head_dim;
      for (int t = 0; t < head_dim; ++t) o[t] = static_cast<float>(acc[t] / sum);
    }
  }
  return out;
}

/// SiLU(gate) ⊙ up.
inline std::vector<float> swiglu(const std::vector<float>& gate, const std::vector<float>& up) {
  std::vector<float> out(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double z = gate[i];
    out[i] = static_cast<float>(z / (1.0 + std::exp(-z)) * up[i]);
  }
  return out;
}

/// x += y.
inline void add_in_place(std::vector<float>& x, const std::vector<float>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<double>(x[i]) + y[i]);
}

/// Throws std::invalid_argument("<who>: <what>") unless `ok`.
inline void require(bool ok, const char* who, const std::string& what) {
  if (!ok) throw std::invalid_argument(std::string(who) + ": " + what);
}

/// The shape checks every prompt-attention launcher makes, with its name in the message.
inline void require_attention_shapes(const char* who, int s, int n_heads, int n_kv_heads, int head_dim) {
  require(s >= 0 && n_heads > 0 && n_kv_heads > 0 && head_dim > 0, who,
          "need s >= 0 and positive n_heads, n_kv_heads, head_dim (got s=" + std::to_string(s) +
              ", n_heads=" + std::to_string(n_heads) + ", n_kv_heads=" + std::to_string(n_kv_heads) +
              ", head_dim=" + std::to_string(head_dim) + ")");
  require(n_heads % n_kv_heads == 0, who,
          "n_heads (" + std::to_string(n_heads) + ") must be a multiple of n_kv_heads (" +
              std::to_string(n_kv_heads) + ")");
}

/// Causal GQA attention of the device buffers q, k, v of a prompt of s tokens into `out`.
inline void causal_attention_on_device(const float* q, const float* k, const float* v, float* out, int s,
                                       int n_heads, int n_kv_heads, int head_dim, cudaStream_t stream) {
  if (s == 0) return;
  wait_for(stream);
  const size_t rows = static_cast<size_t>(s), kv = static_cast<size_t>(n_kv_heads) * head_dim;
  upload(out, causal_attention(download(q, rows * n_heads * head_dim), download(k, rows * kv),
                               download(v, rows * kv), s, n_heads, n_kv_heads, head_dim));
}

}  // namespace clockwork::known_good
