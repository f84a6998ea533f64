// Known-good fp32 matmul with strides (kernels/matmul_f32.cu's launcher), on the host.
#include <algorithm>

#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void matmul_f32(const float* a, const float* b, float* c, int m, int n, int k, bool transpose_b,
                cudaStream_t stream, int lda, int ldb, int ldc) {
  known_good::require(m >= 0 && n >= 0 && k >= 0, "matmul_f32",
                      "need m, n, k >= 0 (got m=" + std::to_string(m) + ", n=" + std::to_string(n) +
                          ", k=" + std::to_string(k) + ")");
  if (lda == 0) lda = k;
  if (ldb == 0) ldb = transpose_b ? k : n;
  if (ldc == 0) ldc = n;
  known_good::require(lda >= k && ldb >= (transpose_b ? k : n) && ldc >= n, "matmul_f32",
                      "a row stride is shorter than its row (lda=" + std::to_string(lda) + ", ldb=" +
                          std::to_string(ldb) + ", ldc=" + std::to_string(ldc) + ")");
  if (m == 0 || n == 0) return;
  known_good::wait_for(stream);
  // The strided regions, read and written whole rows at a time so that the columns between
  // the rows (another head's) are kept as they are.
  const size_t b_rows = transpose_b ? static_cast<size_t>(n) : static_cast<size_t>(k);
  std::vector<float> as, bs;
  if (k > 0) {  // k = 0: the sums are empty and a and b may hold nothing
    as = known_good::download(a, static_cast<size_t>(m - 1) * lda + k);
    bs = known_good::download(b, (b_rows - 1) * ldb + (transpose_b ? k : n));
  }
  std::vector<float> cs = known_good::download(c, static_cast<size_t>(m - 1) * ldc + n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int t = 0; t < k; ++t) {
        const float bv = transpose_b ? bs[static_cast<size_t>(j) * ldb + t] : bs[static_cast<size_t>(t) * ldb + j];
        sum += static_cast<double>(as[static_cast<size_t>(i) * lda + t]) * bv;
      }
      cs[static_cast<size_t>(i) * ldc + j] = static_cast<float>(sum);
    }
  }
  known_good::upload(c, cs);
}

}  // namespace clockwork::kernels
