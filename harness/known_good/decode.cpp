// Known-good prefill and decode steps of one layer (milestones/milestone4/decode.cpp's steps),
// on the host.
#include "harness/known_good/kv_slots.h"
#include "harness/known_good/layer.h"

namespace clockwork {
namespace {

// Rows of K and V into their slots, as kv_cache_append() writes them.
void store(const kernels::KvCacheView& cache, const std::vector<float>& k, const std::vector<float>& v, int first_pos,
           int n) {
  const int end = first_pos + n;
  if (end > kernels::kv_cache_capacity(cache)) {
    throw std::out_of_range("KV cache: positions " + std::to_string(first_pos) + " .. " + std::to_string(end - 1) +
                            " do not fit in its " + std::to_string(kernels::kv_cache_capacity(cache)) + " positions");
  }
  const known_good::KvSlots slots(cache);
  const size_t width = slots.width();
  for (int i = 0; i < n; ++i) {
    const size_t slot = slots.of(first_pos + i);
    CUDA_CHECK(cudaMemcpy(cache.k + slot * width, k.data() + i * width, width * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cache.v + slot * width, v.data() + i * width, width * sizeof(float), cudaMemcpyHostToDevice));
  }
  CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace

void prefill_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                   const kernels::KvCacheView& cache, float* x, const LayerBuffers& b, int s, cudaStream_t stream) {
  if (s <= 0) return;
  kernels::check_kv_cache_view(cache, "prefill_layer");
  const known_good::Shapes sh(config);
  known_good::wait_for(stream);
  const size_t rows = static_cast<size_t>(s);
  std::vector<float> xs = known_good::download(x, rows * sh.d);
  const size_t table = rows * (sh.h_d / 2);
  const known_good::Qkv a = known_good::rotated_qkv_rows(sh, w, xs, known_good::download(rope.cos, table),
                                                         known_good::download(rope.sin, table), s);
  store(cache, a.k, a.v, 0, s);
  const std::vector<float> attn = known_good::causal_attention(a.q, a.k, a.v, s, sh.h, sh.h_k, sh.h_d);
  const known_good::AfterAttention f = known_good::after_attention(sh, w, attn, xs, s);
  known_good::upload_layer(x, xs, b, a, attn, f);
}

void decode_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope,
                  const kernels::KvCacheView& cache, int pos, int split_size, float* x, const DecodeBuffers& b,
                  cudaStream_t stream) {
  (void)split_size;  // one pass or chunks: the same attention, computed exactly here
  kernels::check_kv_cache_view(cache, "decode_layer");
  const known_good::Shapes sh(config);
  known_good::wait_for(stream);
  std::vector<float> xs = known_good::download(x, static_cast<size_t>(sh.d));
  const size_t half = static_cast<size_t>(sh.h_d / 2), row = static_cast<size_t>(pos) * half;
  const known_good::Qkv a = known_good::rotated_qkv_rows(sh, w, xs, known_good::download(rope.cos + row, half),
                                                         known_good::download(rope.sin + row, half), 1);
  store(cache, a.k, a.v, pos, 1);
  // The cached K and V of positions 0 .. pos, then attention of the new row as the last of them.
  const known_good::KvSlots slots(cache);
  const size_t width = slots.width();
  std::vector<float> ks, vs;
  for (int p = 0; p <= pos; ++p) {
    const std::vector<float> k = known_good::download(cache.k + slots.of(p) * width, width);
    const std::vector<float> v = known_good::download(cache.v + slots.of(p) * width, width);
    ks.insert(ks.end(), k.begin(), k.end());
    vs.insert(vs.end(), v.begin(), v.end());
  }
  // causal_attention() over pos + 1 rows gives the last row the whole cache; only that row is
  // needed, so the queries of the earlier rows are zeros.
  std::vector<float> qs(static_cast<size_t>(pos) * sh.h * sh.h_d, 0.f);
  qs.insert(qs.end(), a.q.begin(), a.q.end());
  const std::vector<float> all = known_good::causal_attention(qs, ks, vs, pos + 1, sh.h, sh.h_k, sh.h_d);
  const std::vector<float> attn(all.end() - static_cast<std::ptrdiff_t>(sh.h) * sh.h_d, all.end());
  const known_good::AfterAttention f = known_good::after_attention(sh, w, attn, xs, 1);
  known_good::upload_layer(x, xs, b, a, attn, f);
}

}  // namespace clockwork
