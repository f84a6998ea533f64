// Known-good Q/K/V step (milestones/milestone2/qkv.cpp's step), on the host.
#include "harness/known_good/layer.h"

namespace clockwork {

void qkv_projection(const ModelConfig& config, const QkvWeights& w, const float* x, float* x_norm, float* q, float* k,
                    float* v, int s, cudaStream_t stream) {
  if (s <= 0) return;
  const known_good::Shapes sh(config);
  known_good::wait_for(stream);
  const known_good::Qkv r = known_good::qkv_rows(sh, w, known_good::download(x, static_cast<size_t>(s) * sh.d), s);
  known_good::upload(x_norm, r.x_norm);
  known_good::upload(q, r.q);
  known_good::upload(k, r.k);
  known_good::upload(v, r.v);
}

}  // namespace clockwork
