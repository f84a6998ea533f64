// Known-good bf16-weight projection (kernels/matmul.cu's launcher), on the host. Both variants
// compute the same product.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void matmul(const float* x, const __nv_bfloat16* w, float* y, int m, int n, int k, cudaStream_t stream,
            MatmulVariant variant) {
  known_good::require(m >= 0 && n >= 0 && k >= 0, "matmul",
                      "need m, n, k >= 0 (got m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                          ", k=" + std::to_string(k) + ")");
  known_good::require(variant == MatmulVariant::Naive || variant == MatmulVariant::Tiled, "matmul",
                      "unknown variant " + std::to_string(static_cast<int>(variant)));
  if (m == 0 || n == 0) return;
  known_good::wait_for(stream);
  const std::vector<float> xs = known_good::download(x, static_cast<size_t>(m) * k);
  const std::vector<float> ws = known_good::download_bf16(w, static_cast<size_t>(n) * k);
  known_good::upload(y, known_good::matmul_xwt(xs, ws, m, n, k));
}

}  // namespace clockwork::kernels
