// Fuzz target: config.json. An accepted config must survive writing and reading back unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "harness/model/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace clockwork;
  const std::string text(reinterpret_cast<const char*>(data), size);
  ModelConfig config;
  if (!fuzz::loads("config.json: ",
                   [&] { config = ModelConfig::from_json_text(text, "config.json"); })) {
    return 0;
  }
  ModelConfig again;
  if (!fuzz::loads("written: ",
                   [&] { again = ModelConfig::from_json_text(config.to_json(), "written"); }) ||
      !(again == config)) {
    fuzz::crash("an accepted config.json does not read back the same after to_json():\n" +
                config.to_json());
  }
  return 0;
}
