// A model directory as the subcommands see it: config.json, the safetensors checkpoint and the
// tokenizer, each opened with a check that names the file when something is missing or wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/model_config.h"
#include "harness/model/safetensors.h"
#include "harness/model/tokenizer.h"

namespace clockwork {

/// `path` must be an existing directory; throws std::runtime_error naming it otherwise.
std::filesystem::path require_model_dir(const std::string& path);

/// Reads and validates DIR/config.json (an error names the file when it is absent).
ModelConfig load_config(const std::filesystem::path& dir);

/// Opens DIR/tokenizer.json, or DIR/original/tokenizer.model when there is no tokenizer.json.
/// The file says which kind it is (Tokenizer::style()).
Tokenizer load_tokenizer(const std::filesystem::path& dir);

/// Same, and checks that the tokenizer is the kind `family` uses (Llama: byte-level; Gemma 3:
/// SentencePiece-style); throws std::runtime_error naming the folder and both otherwise.
Tokenizer load_tokenizer(const std::filesystem::path& dir, ModelFamily family);

/// One tensor a Llama checkpoint of a configuration must hold.
struct ExpectedTensor {
  std::string name;
  std::vector<int64_t> shape;
};

/// The tensors of a Llama checkpoint in HuggingFace order: embed_tokens, each layer's nine
/// tensors, model.norm, then lm_head unless the embeddings are tied.
std::vector<ExpectedTensor> expected_tensors(const ModelConfig& config);

/// Checks that every expected tensor is present with its shape and a dtype the model reads (bf16
/// unless `any_float` allows F16 and F32 too). Throws CheckpointError naming the first problem.
void check_tensors(const Checkpoint& checkpoint, const ModelConfig& config, bool any_float);

/// The tokenizer must fit the model: every token id must be a row of the embedding table.
void check_tokenizer_fits(const Tokenizer& tokenizer, const ModelConfig& config);

/// The ids generation stops on: config.json's eos_token_id list plus the tokenizer's end of
/// text and end of turn (<|end_of_text|> and <|eot_id|>, or `<eos>` and `<end_of_turn>`) when it has
/// them.
std::vector<int32_t> stop_ids(const ModelConfig& config, const Tokenizer& tokenizer);

/// The prompt as ids: the chat template of the tokenizer's family around a user message (and an
/// optional system message, which Gemma folds into the user turn) with `chat`, otherwise
/// bos_id() (<|begin_of_text|> or `<bos>`) followed by the plain text.
std::vector<int32_t> encode_prompt(const Tokenizer& tokenizer, const std::string& prompt, bool chat,
                                   const std::string& system);

/// Throws std::runtime_error when a prompt of this many tokens leaves no room in the context for
/// one new token.
void check_prompt_fits(size_t prompt_tokens, const ModelConfig& config);

}  // namespace clockwork
