// Known-good lm_head GEMV and argmax (kernels/lm_head.cu's launchers), on the host.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void lm_head(const float* x_last, const __nv_bfloat16* w, float* logits, int vocab, int d, cudaStream_t stream) {
  known_good::require(vocab >= 0 && d > 0, "lm_head",
                      "need vocab >= 0 and d > 0 (got vocab=" + std::to_string(vocab) + ", d=" + std::to_string(d) + ")");
  if (vocab == 0) return;
  known_good::wait_for(stream);
  const std::vector<float> x = known_good::download(x_last, static_cast<size_t>(d));
  known_good::upload(logits, known_good::matmul_xwt(x, known_good::download_bf16(w, static_cast<size_t>(vocab) * d),
                                                    1, vocab, d));
}

void argmax(const float* values, int n, int32_t* index, cudaStream_t stream) {
  known_good::require(n > 0, "argmax", "n must be positive (got " + std::to_string(n) + ")");
  known_good::require(index != nullptr, "argmax", "index must be a device pointer");
  known_good::wait_for(stream);
  const std::vector<float> v = known_good::download(values, static_cast<size_t>(n));
  int32_t best = n;  // every value NaN: n
  for (int i = 0; i < n; ++i) {
    if (std::isnan(v[i])) continue;
    if (best == n || v[i] > v[best]) best = i;  // strictly greater: ties keep the lowest index
  }
  known_good::upload(index, std::vector<int32_t>{best});
}

}  // namespace clockwork::kernels
