// Known-good RMSNorm (kernels/rmsnorm.cu's launcher), on the host.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void rmsnorm(const float* x, const __nv_bfloat16* gamma, float* y, int rows, int d, float eps, cudaStream_t stream) {
  known_good::require(rows >= 0 && d > 0, "rmsnorm",
                      "need rows >= 0 and d > 0 (got rows=" + std::to_string(rows) + ", d=" + std::to_string(d) + ")");
  known_good::require(eps > 0.f, "rmsnorm", "eps must be positive (got " + std::to_string(eps) + ")");
  known_good::require(x != y, "rmsnorm", "y must not alias x");
  if (rows == 0) return;
  known_good::wait_for(stream);
  const std::vector<float> xs = known_good::download(x, static_cast<size_t>(rows) * d);
  const std::vector<float> g = known_good::download_bf16(gamma, static_cast<size_t>(d));
  known_good::upload(y, known_good::rmsnorm_rows(xs, g, rows, d, eps));
}

}  // namespace clockwork::kernels
