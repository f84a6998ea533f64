// Fuzz target: model.safetensors.index.json, opened as a sharded checkpoint next to two fixed
// shards (model-00001-of-00002.safetensors holds "a" and "b", model-00002-of-00002 holds "c"),
// so the index is checked against real files. The folder is made once under TMPDIR and removed
// at exit.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "harness/model/fuzz/fuzz_common.h"

namespace {

namespace fs = std::filesystem;

fs::path& folder() {
  static fs::path path;
  return path;
}

void remove_folder() {
  std::error_code ignored;
  fs::remove_all(folder(), ignored);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  using namespace clockwork;
  std::string pattern = (fs::temp_directory_path() / "clockwork-fuzz-index-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) fuzz::crash("cannot make a folder under TMPDIR");
  folder() = pattern;
  std::atexit(remove_folder);
  write_safetensors(folder() / "model-00001-of-00002.safetensors",
                    {TensorData::from_floats("a", DType::F32, {2}, {1.0f, 2.0f}),
                     TensorData::from_floats("b", DType::BF16, {1, 2}, {3.0f, 4.0f})});
  write_safetensors(folder() / "model-00002-of-00002.safetensors",
                    {TensorData::from_floats("c", DType::F16, {}, {5.0f})});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clockwork;
  {
    std::ofstream out(folder() / kIndexFileName, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  std::size_t tensors = 0;
  if (fuzz::loads(folder().string() + "/", [&] { tensors = Checkpoint::open(folder()).size(); }) &&
      tensors != 3) {
    fuzz::crash("an accepted index gives " + std::to_string(tensors) + " tensors, not 3");
  }
  return 0;
}
