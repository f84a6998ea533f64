// Known-good RoPE (kernels/rope.cu: the inverse frequencies, the tables and the rotation), on
// the host.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

std::vector<double> rope_inv_freq(int head_dim, double theta, const RopeScalingParams* scaling) {
  known_good::require(head_dim > 0 && head_dim % 2 == 0, "rope_inv_freq",
                      "head_dim must be positive and even (got " + std::to_string(head_dim) + ")");
  known_good::require(theta > 0, "rope_inv_freq", "theta must be positive");
  known_good::require(!scaling || (scaling->factor > 0 && scaling->original_max_position_embeddings > 0 &&
                                   scaling->low_freq_factor > 0 &&
                                   scaling->high_freq_factor > scaling->low_freq_factor),
                      "rope_inv_freq",
                      "scaling needs factor > 0, original_max_position_embeddings > 0 and "
                      "high_freq_factor > low_freq_factor > 0");
  const double two_pi = 6.283185307179586476925;
  std::vector<double> inv;
  for (int i = 0; i < head_dim / 2; ++i) {
    double f = std::pow(theta, -2.0 * i / head_dim);
    if (scaling) {
      // llama3: long wavelengths slowed down by `factor`, short ones kept, the band between blended.
      const double wavelength = two_pi / f;
      const double low = scaling->original_max_position_embeddings / scaling->low_freq_factor;
      const double high = scaling->original_max_position_embeddings / scaling->high_freq_factor;
      if (wavelength > low) {
        f /= scaling->factor;
      } else if (wavelength >= high) {
        const double blend = (scaling->original_max_position_embeddings / wavelength - scaling->low_freq_factor) /
                             (scaling->high_freq_factor - scaling->low_freq_factor);
        f = (1.0 - blend) * f / scaling->factor + blend * f;
      }
    }
    inv.push_back(f);
  }
  return inv;
}

void rope_tables(const int32_t* positions, const double* inv_freq, float* cos_table, float* sin_table, int s,
                 int half, cudaStream_t stream) {
  known_good::require(s >= 0 && half > 0, "rope_tables",
                      "need s >= 0 and half > 0 (got s=" + std::to_string(s) + ", half=" + std::to_string(half) + ")");
  known_good::require(cos_table != sin_table, "rope_tables", "cos_table and sin_table must differ");
  if (s == 0) return;
  known_good::wait_for(stream);
  const std::vector<int32_t> pos = known_good::download(positions, static_cast<size_t>(s));
  const std::vector<double> inv = known_good::download(inv_freq, static_cast<size_t>(half));
  std::vector<float> c(static_cast<size_t>(s) * half), sn(c.size());
  for (int r = 0; r < s; ++r) {
    for (int i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos[r]) * inv[i];
      c[static_cast<size_t>(r) * half + i] = static_cast<float>(std::cos(angle));
      sn[static_cast<size_t>(r) * half + i] = static_cast<float>(std::sin(angle));
    }
  }
  known_good::upload(cos_table, c);
  known_good::upload(sin_table, sn);
}

void rope_apply(float* x, const float* cos_table, const float* sin_table, int s, int n_heads, int head_dim,
                cudaStream_t stream) {
  known_good::require(s >= 0 && n_heads > 0 && head_dim > 0 && head_dim % 2 == 0, "rope_apply",
                      "need s >= 0, n_heads > 0 and an even head_dim > 0 (got s=" + std::to_string(s) +
                          ", n_heads=" + std::to_string(n_heads) + ", head_dim=" + std::to_string(head_dim) + ")");
  if (s == 0) return;
  known_good::wait_for(stream);
  const size_t table = static_cast<size_t>(s) * (head_dim / 2);
  std::vector<float> xs = known_good::download(x, static_cast<size_t>(s) * n_heads * head_dim);
  known_good::rope_rows(xs, known_good::download(cos_table, table), known_good::download(sin_table, table), s,
                        n_heads, head_dim);
  known_good::upload(x, xs);
}

}  // namespace clockwork::kernels
