// Known-good fused prefill attention (kernels/flash_attention.cu's functions), on the host: the
// same result as attention(), without its score workspace.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

size_t flash_attention_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  // The kernel's tiles: the group's query rows, one K tile (padded by a column), their scores, and
  // three numbers per row; the figure belongs to the interface, so it is the kernel's own.
  const size_t rows = static_cast<size_t>(n_heads / n_kv_heads) * kFlashAttentionTile;
  return (rows * head_dim + static_cast<size_t>(kFlashAttentionTile) * (head_dim + 1) + rows * kFlashAttentionTile +
          3 * rows) *
         sizeof(float);
}

void flash_attention(const float* q, const float* k, const float* v, float* out, int s, int n_heads, int n_kv_heads,
                     int head_dim, cudaStream_t stream) {
  known_good::require_attention_shapes("flash_attention", s, n_heads, n_kv_heads, head_dim);
  known_good::require(out != q && out != k && out != v, "flash_attention", "out must not alias q, k or v");
  known_good::causal_attention_on_device(q, k, v, out, s, n_heads, n_kv_heads, head_dim, stream);
}

}  // namespace clockwork::kernels
