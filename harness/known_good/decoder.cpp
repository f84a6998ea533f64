// Known-good decoder layer, layer loop and output head (milestones/milestone3/decoder.cpp's
// steps), on the host.
#include "harness/known_good/layer.h"

namespace clockwork {

void decoder_layer(const ModelConfig& config, const LayerWeights& w, const RopeTablesView& rope, float* x,
                   const LayerBuffers& b, int s, cudaStream_t stream) {
  if (s <= 0) return;
  const known_good::Shapes sh(config);
  known_good::wait_for(stream);
  const size_t rows = static_cast<size_t>(s);
  std::vector<float> xs = known_good::download(x, rows * sh.d);
  const size_t table = rows * (sh.h_d / 2);
  const known_good::Qkv a = known_good::rotated_qkv_rows(sh, w, xs, known_good::download(rope.cos, table),
                                                         known_good::download(rope.sin, table), s);
  const std::vector<float> attn = known_good::causal_attention(a.q, a.k, a.v, s, sh.h, sh.h_k, sh.h_d);
  const known_good::AfterAttention f = known_good::after_attention(sh, w, attn, xs, s);
  known_good::upload_layer(x, xs, b, a, attn, f);
}

void run_layers(const ModelConfig& config, const std::vector<LayerWeights>& layers, const RopeTablesView& rope,
                float* x, const LayerBuffers& b, int s, cudaStream_t stream, const AfterLayer& after_layer) {
  for (size_t i = 0; i < layers.size(); ++i) {
    decoder_layer(config, layers[i], rope, x, b, s, stream);
    if (after_layer) after_layer(static_cast<int>(i));
  }
}

void output_logits(const ModelConfig& config, const float* x, int s, const __nv_bfloat16* norm,
                   const __nv_bfloat16* lm_head, float* x_last_norm, float* logits, cudaStream_t stream) {
  const known_good::Shapes sh(config);
  const int vocab = static_cast<int>(config.vocab_size);
  known_good::wait_for(stream);
  const std::vector<float> last = known_good::download(x + static_cast<size_t>(s - 1) * sh.d, static_cast<size_t>(sh.d));
  const std::vector<float> normed =
      known_good::rmsnorm_rows(last, known_good::download_bf16(norm, static_cast<size_t>(sh.d)), 1, sh.d, sh.eps);
  known_good::upload(x_last_norm, normed);
  known_good::upload(logits, known_good::matmul_xwt(
                                 normed, known_good::download_bf16(lm_head, static_cast<size_t>(vocab) * sh.d), 1,
                                 vocab, sh.d));
}

}  // namespace clockwork
