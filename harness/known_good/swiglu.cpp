// Known-good SwiGLU (kernels/swiglu.cu's launcher), on the host.
#include "harness/known_good/host.h"
#include "kernels/kernels.h"

namespace clockwork::kernels {

void swiglu(const float* gate, const float* up, float* out, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  known_good::require(gate && up && out, "swiglu", "gate, up and out must be device pointers");
  known_good::wait_for(stream);
  known_good::upload(out, known_good::swiglu(known_good::download(gate, n), known_good::download(up, n)));
}

}  // namespace clockwork::kernels
