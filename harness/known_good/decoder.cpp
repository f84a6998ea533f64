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
  known_good::Qkv a = known_good::qkv_rows(sh, {w.input_layernorm, w.q_proj, w.k_proj, w.v_proj}, xs, s);
  const size_t table = rows * (sh.h_d / 2);
  const std::vector<float> cos_t = known_good::download(rope.cos, table), sin_t = known_good::download(rope.sin, table);
  known_good::rope_rows(a.q, cos_t, sin_t, s, sh.h, sh.h_d);
  known_good::rope_rows(a.k, cos_t, sin_t, s, sh.h_k, sh.h_d);
  const std::vector<float> attn = known_good::causal_attention(a.q, a.k, a.v, s, sh.h, sh.h_k, sh.h_d);
  const known_good::AfterAttention f = known_good::after_attention(sh, w, attn, xs, s);
  known_good::upload(x, xs);
  known_good::upload_if(b.attn_norm, a.x_norm);
  known_good::upload_if(b.q, a.q);
  known_good::upload_if(b.k, a.k);
  known_good::upload_if(b.v, a.v);
  known_good::upload_if(b.attn, attn);
  known_good::upload_if(b.attn_out, f.attn_out);
  known_good::upload_if(b.ffn_norm, f.ffn_norm);
  known_good::upload_if(b.gate, f.gate);
  known_good::upload_if(b.up, f.up);
  known_good::upload_if(b.ffn_hidden, f.ffn_hidden);
  known_good::upload_if(b.ffn_out, f.ffn_out);
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
