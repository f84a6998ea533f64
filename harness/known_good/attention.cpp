// Known-good causal softmax and prompt attention (kernels/attention.cu's launchers), on the host.
#include <algorithm>

#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void causal_softmax(float* scores, int rows, int cols, float scale, cudaStream_t stream) {
  known_good::require(rows >= 0 && cols >= rows, "causal_softmax",
                      "need 0 <= rows <= cols (got rows=" + std::to_string(rows) + ", cols=" + std::to_string(cols) + ")");
  known_good::require(scale > 0.f, "causal_softmax", "scale must be positive");
  if (rows == 0) return;
  known_good::wait_for(stream);
  std::vector<float> p = known_good::download(scores, static_cast<size_t>(rows) * cols);
  std::vector<double> e(static_cast<size_t>(cols));
  for (int r = 0; r < rows; ++r) {
    float* row = p.data() + static_cast<size_t>(r) * cols;
    const int visible = cols - rows + r + 1;
    double top = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < visible; ++j) top = std::max(top, static_cast<double>(scale) * row[j]);
    double sum = 0;
    for (int j = 0; j < visible; ++j) sum += (e[j] = std::exp(static_cast<double>(scale) * row[j] - top));
    for (int j = 0; j < cols; ++j) row[j] = j < visible ? static_cast<float>(e[j] / sum) : 0.f;
  }
  known_good::upload(scores, p);
}

void attention(const float* q, const float* k, const float* v, float* out, float* scores, int s, int n_heads,
               int n_kv_heads, int head_dim, cudaStream_t stream) {
  known_good::require_attention_shapes("attention", s, n_heads, n_kv_heads, head_dim);
  known_good::require(out != q && out != k && out != v && scores != out, "attention",
                      "out and scores must not alias the inputs or each other");
  known_good::causal_attention_on_device(q, k, v, out, s, n_heads, n_kv_heads, head_dim, stream);
}

}  // namespace clockwork::kernels
