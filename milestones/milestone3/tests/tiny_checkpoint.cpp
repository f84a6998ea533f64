// Random checkpoints on disk for the model tests (see tiny_checkpoint.h).
#include "milestones/milestone3/tests/tiny_checkpoint.h"

#include <fstream>
#include <vector>

#include "harness/model/safetensors.h"
#include "reference/ops.h"

namespace clockwork {

void write_checkpoint(const std::filesystem::path& dir, const ModelConfig& config,
                      const Weights& weights, bool sharded) {
  std::ofstream(dir / "config.json") << config.to_json();
  std::vector<TensorData> tensors;
  for (const ref::WeightSpec& spec : ref::weight_specs(config)) {
    const auto it = weights.find(spec.name);
    if (it != weights.end()) tensors.push_back(ref::to_tensor_data(spec.name, it->second));
  }
  if (sharded) {
    write_sharded(dir, tensors, ShardingOptions{.num_shards = 3});
  } else {
    write_safetensors(dir / "model.safetensors", tensors);
  }
}

TinyCheckpoint::TinyCheckpoint(const ModelConfig& c, uint64_t seed)
    : config(c),
      weights(ref::random_weights(config, seed)),
      reference(config, ref::lookup_from_map(weights)) {
  write_checkpoint(dir.path(), config, weights);
}

}  // namespace clockwork
