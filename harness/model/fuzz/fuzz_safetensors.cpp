// Fuzz target: a whole safetensors file (length field, JSON header, data area) as the reader
// validates it. An accepted file must describe tensors that lie inside it.
#include <cstddef>
#include <cstdint>
#include <span>

#include "harness/model/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clockwork;
  const std::span<const std::byte> file(reinterpret_cast<const std::byte*>(data), size);
  std::vector<TensorInfo> tensors;
  if (!fuzz::loads("model.safetensors: ",
                   [&] { tensors = parse_safetensors_bytes(file, "model.safetensors"); })) {
    return 0;
  }
  for (const TensorInfo& t : tensors) {
    if (t.data < file.data() || t.nbytes > static_cast<size_t>(file.data() + size - t.data) ||
        t.nbytes != static_cast<size_t>(t.numel()) * dtype_size(t.dtype)) {
      fuzz::crash("tensor '" + t.name + "' is accepted but does not lie inside the file");
    }
    // Touch every byte: AddressSanitizer reports a read outside the input.
    volatile float sink = 0;
    for (float v : to_float32(t)) sink = sink + v;
  }
  return 0;
}
