// Known-good embedding lookup (kernels/embedding.cu's launcher), on the host.
#include <climits>

#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void embedding(const int32_t* ids, const __nv_bfloat16* table, float* x, int s, int d, int vocab,
               cudaStream_t stream) {
  known_good::require(s >= 0 && d > 0 && vocab > 0, "embedding",
                      "need s >= 0, d > 0, vocab > 0 (got s=" + std::to_string(s) + ", d=" + std::to_string(d) +
                          ", vocab=" + std::to_string(vocab) + ")");
  if (s == 0) return;
  known_good::wait_for(stream);
  const std::vector<int32_t> id = known_good::download(ids, static_cast<size_t>(s));
  for (int i = 0; i < s; ++i) {
    if (id[i] < 0 || id[i] >= vocab) {
      throw std::out_of_range("embedding: token id " + std::to_string(id[i]) + " at position " + std::to_string(i) +
                              " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
    }
  }
  std::vector<float> out(static_cast<size_t>(s) * d);
  for (int i = 0; i < s; ++i) {
    const std::vector<float> row = known_good::download_bf16(table + static_cast<size_t>(id[i]) * d, static_cast<size_t>(d));
    std::copy(row.begin(), row.end(), out.begin() + static_cast<size_t>(i) * d);
  }
  known_good::upload(x, out);
}

}  // namespace clockwork::kernels
