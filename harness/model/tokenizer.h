// The tokenizers of the course's two model families, read from HuggingFace `tokenizer.json`:
//
// Llama 3: byte-level BPE with tiktoken-style ranks (Tokenizer::Style::kByteLevel).
//   text ──► special tokens cut out literally (only when allowed)
//        ──► pre-tokenizer regex splits the rest into pieces        (split_pieces, milestone 1)
//        ──► each piece's UTF-8 bytes merged by lowest rank (BPE)  (merge_piece, milestone 1)
//        ──► token ids
//   ids  ──► token bytes ──► UTF-8 text                              (Tokenizer::decode)
//
// Gemma 3: SentencePiece-style BPE (Tokenizer::Style::kSentencePiece).
//   text ──► added tokens cut out literally (special ones only when allowed)
//        ──► ' ' replaced by U+2581 '▁' (the normalizer); no pre-tokenizer: each stretch between
//            added tokens is one piece
//        ──► BPE over the piece's characters, by lowest merge rank  (merge_piece, milestone 1)
//        ──► a character with no token of its own becomes its bytes' <0xNN> tokens (byte fallback)
//   ids  ──► '▁' back to ' ', <0xNN> to the byte NN ──► UTF-8 text
//
// Two file formats are read, and written for Llama 3:
//   * HuggingFace `tokenizer.json`. Llama 3's: `model.vocab` maps byte-level strings (the GPT-2
//     byte-to-unicode alphabet) to ids, `model.merges` lists merges in rank order, and
//     `added_tokens` holds the special tokens (ids 128000..128255). Gemma 3's: `model.vocab` maps
//     the pieces themselves (UTF-8 with '▁' for a space, "<0x41>" for a byte) to ids, the
//     normalizer is Replace(' ', '▁'), `model.byte_fallback` is true, the decoder is
//     Replace('▁', ' '), ByteFallback, Fuse, and `added_tokens` lists tokens that are also in
//     model.vocab (<bos> is id 2, <start_of_turn> 105) besides some after it.
//   * Meta's `original/tokenizer.model`: one `base64(token bytes) rank` line per token, id = rank.
//     The file has no special tokens; Llama 3's 256 are appended after the last rank.
//
// Error policy: every failure is a clockwork::TokenizerError whose message names what was wrong
// (file and line or JSON path, byte offset of invalid UTF-8, out-of-range id). Nothing here aborts
// on malformed input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace clockwork {

/// Any problem loading, writing or using a tokenizer.
class TokenizerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Text given to encode() is not valid UTF-8. byte_offset() is the offset, in the text passed
/// to encode(), of the first byte of the offending sequence.
class InvalidUtf8Error : public TokenizerError {
 public:
  InvalidUtf8Error(size_t byte_offset, const std::string& problem);
  size_t byte_offset() const { return byte_offset_; }

 private:
  size_t byte_offset_;
};

/// Llama 3's pre-tokenizer (the same as OpenAI's cl100k): contractions, letter runs with at most
/// one leading non-letter, numbers in groups of up to three digits, punctuation runs, whitespace.
inline constexpr std::string_view kLlama3SplitPattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// Id of the first special token in the released Llama 3 files (the base vocabulary size).
inline constexpr int32_t kLlama3SpecialBase = 128000;
inline constexpr int32_t kLlama3NumSpecialTokens = 256;

/// Llama 3's 256 special tokens in id order: <|begin_of_text|>, <|end_of_text|>,
/// <|reserved_special_token_0|>..3, <|start_header_id|>, <|end_header_id|>,
/// <|reserved_special_token_4|>, <|eot_id|>, <|reserved_special_token_5|>..250.
std::vector<std::string> llama3_special_tokens();

/// Splits valid UTF-8 text into pre-tokenizer pieces (concatenated, they give back the text).
/// Throws InvalidUtf8Error on invalid UTF-8.
///
/// \s and \S mean Unicode's White_Space property, as in the regex engines behind tiktoken and
/// HuggingFace (PCRE2's own \s would also take U+180E). \p{L} and \p{N} are the linked PCRE2's
/// tables plus the letters and numbers added in Unicode 15.0 to 16.0, so that the split is the
/// same with a PCRE2 that knows only Unicode 14 (Debian 12's 10.42) as with tiktoken and
/// HuggingFace. The pieces come from the student's split_pieces (kernels/tokenizer_steps.h).
std::vector<std::string> pre_tokenize(std::string_view text);

/// One turn of a chat.
struct ChatMessage {
  std::string role;  ///< "system", "user" or "assistant"
  /// The message text; leading and trailing whitespace is trimmed, as Llama 3's template does.
  std::string content;
};

/// Llama 3 Instruct's chat template as text:
///   <|begin_of_text|> then, per message,
///   <|start_header_id|>{role}<|end_header_id|>\n\n{trimmed content}<|eot_id|>
///   and, if add_generation_prompt, <|start_header_id|>assistant<|end_header_id|>\n\n.
/// Like the official template, <|begin_of_text|> comes with the first message (none if empty),
/// and content is trimmed of leading and trailing Unicode whitespace (Jinja's `trim`).
std::string format_chat(const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt = true);

/// Gemma 3 instruction-tuned models' chat template as text, as their tokenizer_config.json
/// writes it:
///   `<bos>` then, per message, `<start_of_turn>`{role}\n{trimmed content}`<end_of_turn>`\n
///   and, if add_generation_prompt, `<start_of_turn>`model\n.
/// The role "assistant" is written "model". Gemma has no system turn: a first message with role
/// "system" is folded into the first user turn as its content followed by "\n\n" (not trimmed),
/// before the trimmed user text. After it, roles must alternate user, assistant, user, ...;
/// anything else throws TokenizerError naming the message. `<bos>` is there even with no messages.
std::string format_gemma_chat(const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt = true);

class Tokenizer {
 public:
  /// The kind of tokenizer a file describes; it decides the encoding and the chat template.
  enum class Style {
    kByteLevel,      ///< Llama 3: byte-level BPE after a pre-tokenizer regex
    kSentencePiece,  ///< Gemma 3: BPE over characters with '▁' for spaces and byte fallback
  };

  /// How a pair of adjacent tokens may merge during BPE.
  enum class MergeRule {
    kMergeList,   ///< tokenizer.json: only listed merges; rank = position in model.merges
    kTokenRanks,  ///< tokenizer.model: any pair whose concatenation is a token; rank = its id
  };

  /// Loads `tokenizer.json` or `tokenizer.model`, chosen by extension and then by content (a
  /// file starting with '{' is JSON). A tokenizer.json with the normalizer Replace(' ', '▁') or
  /// byte fallback is read as kSentencePiece (Gemma 3), any other as kByteLevel (Llama 3). A directory is searched for `tokenizer.json`, then
  /// `original/tokenizer.model`.
  static Tokenizer from_file(const std::filesystem::path& path);
  static Tokenizer from_tokenizer_json(const std::filesystem::path& path);
  /// `special_tokens` are given ids base, base+1, ... where base = number of rank lines.
  static Tokenizer from_tokenizer_model(
      const std::filesystem::path& path,
      const std::vector<std::string>& special_tokens = llama3_special_tokens());
  /// The same from text in memory; `origin` names the source in error messages.
  static Tokenizer from_tokenizer_json_text(std::string_view text, std::string_view origin);
  static Tokenizer from_tokenizer_model_text(
      std::string_view text, std::string_view origin,
      const std::vector<std::string>& special_tokens = llama3_special_tokens());

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  /// Text → ids. With allow_special, special token strings in the text (e.g. "<|eot_id|>")
  /// become their ids; without it they are encoded as ordinary text. With bos, the ids start
  /// with bos_id(). A kSentencePiece tokenizer cuts out the added tokens that are not special
  /// (Gemma's "`<unused0>`", say) in either case, as HuggingFace does. Throws InvalidUtf8Error if `text` is not valid UTF-8 (overlong
  /// forms and surrogates included).
  std::vector<int32_t> encode(std::string_view text, bool allow_special = false,
                              bool bos = false) const;

  /// Ids of the chat template of this tokenizer's family: format_chat(messages,
  /// add_generation_prompt) for kByteLevel, format_gemma_chat for kSentencePiece. Role and
  /// content are encoded as plain text, so a special token string typed inside a message cannot
  /// act as a control token.
  std::vector<int32_t> encode_chat(const std::vector<ChatMessage>& messages,
                                   bool add_generation_prompt = true) const;

  /// Ids → text. Byte sequences that are not valid UTF-8 (e.g. a character cut in half at the
  /// end) become U+FFFD, one per maximal invalid subpart (the Unicode-recommended practice,
  /// as in Python's errors="replace"). Throws if an id is out of range.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;
  /// Ids → the raw concatenated token bytes, without any UTF-8 repair.
  std::string decode_bytes(std::span<const int32_t> ids) const;
  /// The bytes of one token (a special token's bytes are its text). Throws if out of range.
  const std::string& token_bytes(int32_t id) const;

  int32_t vocab_size() const;          ///< base vocabulary + special tokens (128256 for Llama 3)
  /// Base vocabulary size (model.vocab's entries): for kByteLevel the id of the first special
  /// token; for kSentencePiece the special tokens lie inside the base vocabulary too.
  int32_t special_base() const;
  int32_t num_special_tokens() const;  ///< tokens at special_base() .. vocab_size()-1
  /// A special token: for kByteLevel every token from special_base() on, for kSentencePiece the
  /// added tokens marked "special": true (`<bos>`, `<eos>`, `<start_of_turn>`, ...).
  bool is_special(int32_t id) const;
  MergeRule merge_rule() const;
  Style style() const;

  /// Id of a special token by its text, e.g. "<|eot_id|>".
  std::optional<int32_t> find_special(std::string_view text) const;
  /// Same, throwing TokenizerError if this tokenizer has no such token.
  int32_t special_id(std::string_view text) const;
  /// Id of a base-vocabulary token by its bytes (kSentencePiece: the piece whose text, with '▁'
  /// read as a space, is `bytes`; a `<0xNN>` token is found by its name, not by its byte).
  std::optional<int32_t> find_token(std::string_view bytes) const;

  /// <|begin_of_text|> (Llama 3) or `<bos>` (Gemma 3).
  int32_t bos_id() const;
  /// <|end_of_text|> or `<eos>`.
  int32_t eos_id() const;
  /// The end of a chat turn: <|eot_id|> or `<end_of_turn>`.
  int32_t eot_id() const;

  /// Writes HuggingFace `tokenizer.json` (kByteLevel only). For a kTokenRanks tokenizer the merges are derived
  /// from the ranks: every split of a token into two tokens, ordered by the token's rank.
  /// Written to a temporary file in the same folder and renamed into place.
  void write_tokenizer_json(const std::filesystem::path& path) const;
  /// Writes Meta's rank file (base vocabulary only). Throws if the special tokens are not
  /// Llama 3's list, since that format cannot store them.
  void write_tokenizer_model(const std::filesystem::path& path) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  friend Tokenizer make_tokenizer(std::unique_ptr<Impl> impl, std::string_view origin);
  std::unique_ptr<Impl> impl_;
};

/// Learns a small byte-level BPE vocabulary from `corpus` (pre-tokenized with Llama 3's regex):
/// ids 0..255 are the single bytes (id = byte value), then one token per learned merge, most
/// frequent pair first (ties: smallest pair of ids), then Llama 3's 256 special tokens at
/// special_base() = 256 + merges. Stops early when no pair occurs twice. Merge rule kTokenRanks,
/// so the in-memory tokenizer and both written files encode identically.
Tokenizer train_small_bpe(std::string_view corpus, int num_merges);

/// Decodes a stream of ids one at a time, emitting only complete UTF-8 characters: bytes of a
/// character split across tokens are held until the character is complete. Bytes that can
/// never form a valid character are emitted as U+FFFD right away (one per maximal invalid
/// subpart, the same policy as Tokenizer::decode).
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  /// Appends one token; returns the text that became complete (possibly empty).
  std::string push(int32_t id);
  /// Appends raw bytes; returns the text that became complete.
  std::string push_bytes(std::string_view bytes);
  /// Ends the stream: an incomplete character still held becomes U+FFFD.
  std::string flush();
  /// Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace clockwork
