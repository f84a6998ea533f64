// Known-good fused prefill attention (kernels/flash_attention.cu's functions), on the host: the
// same result as attention(), without its score workspace.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

size_t flash_attention_shared_bytes(int n_heads, int n_kv_heads, int head_dim) {
  if (n_heads <= 0 || n_kv_heads <= 0 || head_dim <= 0 || n_heads % n_kv_heads != 0) return 0;
  // The kernel's tiles: the group's query rows, one K/V tile (Kᵀ's rows padded by 4 floats) and
  // the tile's probabilities, with h_d rounded up to its threads' share (lanes·dims) and the tile
  // halved where a block of the full tile would need more than 512 threads or 99 KB; the figure
  // belongs to the interface, so it is the kernel's own.
  const size_t group = static_cast<size_t>(n_heads / n_kv_heads);
  const size_t lanes = head_dim > 128 ? 16 : 8;
  const size_t padded = head_dim > 128  ? (head_dim + 63) / 64 * 64
                        : head_dim > 64 ? 128
                        : head_dim > 32 ? 64
                                        : 32;
  const auto floats = [&](size_t tile) {
    return group * tile * padded + (tile + 4) * padded + tile * group * tile;
  };
  const auto fits = [&](size_t tile) {
    return group * tile / 4 * lanes <= 512 && floats(tile) * sizeof(float) <= 99 * 1024;
  };
  const size_t tile =
      head_dim <= 256 && fits(kFlashAttentionTile) ? kFlashAttentionTile : kFlashAttentionTile / 2;
  return floats(tile) * sizeof(float);
}

void flash_attention(const float* q, const float* k, const float* v, float* out, int s, int n_heads, int n_kv_heads,
                     int head_dim, cudaStream_t stream) {
  known_good::require_attention_shapes("flash_attention", s, n_heads, n_kv_heads, head_dim);
  known_good::require(out != q && out != k && out != v, "flash_attention", "out must not alias q, k or v");
  known_good::causal_attention_on_device(q, k, v, out, s, n_heads, n_kv_heads, head_dim, stream);
}

}  // namespace clockwork::kernels
