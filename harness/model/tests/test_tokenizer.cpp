// Tests of the Llama 3 tokenizer (milestone 1).
//
// Most tests use a small vocabulary trained here from an inline corpus, written to a temporary
// folder as tokenizer.json and tokenizer.model and loaded back: all three (in memory, JSON,
// rank file) must give the same ids. The pre-tokenizer regex, the chat template and the byte-level
// alphabet are checked against known answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/model/tokenizer.h"
#include "harness/check/temp_dir.h"

namespace clockwork {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

// Shows a string with control characters escaped, for failure messages.
std::string show(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '"':
        out += "\\\"";
        break;
      default:
        out += c;
    }
  }
  return out + "\"";
}

std::string show(const std::vector<std::string>& pieces) {
  std::string out = "[";
  for (size_t i = 0; i < pieces.size(); ++i) out += (i ? ", " : "") + show(pieces[i]);
  return out + "]";
}

std::string show(const std::vector<int32_t>& ids) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < ids.size(); ++i) out << (i ? ", " : "") << ids[i];
  out << "]";
  return out.str();
}

// Runs `f`, which must throw clockwork::TokenizerError whose message mentions every part.
template <typename F>
::testing::AssertionResult throws_tokenizer_error(F&& f, std::vector<std::string> parts) {
  try {
    f();
  } catch (const TokenizerError& e) {
    const std::string what = e.what();
    for (const std::string& part : parts) {
      if (what.find(part) == std::string::npos) {
        return ::testing::AssertionFailure()
               << "the error message does not mention " << show(part) << ":\n  " << what;
      }
    }
    return ::testing::AssertionSuccess();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure()
           << "expected clockwork::TokenizerError, got another exception: " << e.what();
  }
  return ::testing::AssertionFailure() << "expected clockwork::TokenizerError, nothing was thrown";
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}


// Independent implementations of the two encodings the file formats use, so the tests do not
// just check the library against itself.
std::string base64(std::string_view bytes) {
  static const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int shift : {18, 12, 6, 0}) out += chars[(v >> shift) & 63];
  }
  if (bytes.size() - i == 1) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += chars[(v >> 18) & 63];
    out += chars[(v >> 12) & 63];
    out += "==";
  } else if (bytes.size() - i == 2) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += chars[(v >> 18) & 63];
    out += chars[(v >> 12) & 63];
    out += chars[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | (cp >> 18));
    s += char(0x80 | ((cp >> 12) & 0x3F));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the 68 others take
// U+0100, U+0101, ... in byte order.
std::string gpt2_key(std::string_view bytes) {
  std::string key;
  for (char c : bytes) {
    const int b = uint8_t(c);
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (printable) {
      key += utf8_of(uint32_t(b));
      continue;
    }
    uint32_t index = 0;
    for (int o = 0; o < b; ++o) {
      const bool p = (o >= 0x21 && o <= 0x7E) || (o >= 0xA1 && o <= 0xAC) || o >= 0xAE;
      if (!p) ++index;
    }
    key += utf8_of(0x100 + index);
  }
  return key;
}

// A rank file: the 256 single bytes (id = byte value), then `extra` tokens.
std::string rank_file(const std::vector<std::string>& extra) {
  std::string out;
  int32_t rank = 0;
  for (int b = 0; b < 256; ++b)
    out += base64(std::string(1, char(b))) + " " + std::to_string(rank++) + "\n";
  for (const std::string& t : extra) out += base64(t) + " " + std::to_string(rank++) + "\n";
  return out;
}

// The slow, obvious BPE with tiktoken ranks, written from the definition: whole-token pieces map
// directly; otherwise merge the lowest-ranked adjacent pair (leftmost on ties) until none is a
// token.
std::vector<int32_t> reference_bpe(const Tokenizer& tok, const std::string& piece) {
  if (auto id = tok.find_token(piece)) return {*id};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    size_t best = parts.size();
    int32_t best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      auto id = tok.find_token(parts[i] + parts[i + 1]);
      if (id && *id < best_rank) {
        best_rank = *id;
        best = i;
      }
    }
    if (best == parts.size()) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + long(best) + 1);
  }
  std::vector<int32_t> ids;
  for (const std::string& p : parts) ids.push_back(*tok.find_token(p));
  return ids;
}

// Random valid UTF-8 mixing ASCII (letters, digits, punctuation, whitespace), 2-, 3- and 4-byte
// characters; surrogates are never produced.
std::string random_utf8(std::mt19937& rng, size_t max_chars) {
  static const std::string ascii =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
      ".,;:!?'\"()[]{}<>|-_+=*/\\#$%&@^`~";
  static const std::string spaces = " \n\t\r";
  std::uniform_int_distribution<size_t> length(0, max_chars);
  std::uniform_int_distribution<int> kind(0, 99);
  std::string s;
  for (size_t n = length(rng), i = 0; i < n; ++i) {
    const int k = kind(rng);
    if (k < 40) {
      s += ascii[std::uniform_int_distribution<size_t>(0, ascii.size() - 1)(rng)];
    } else if (k < 50) {
      s += spaces[std::uniform_int_distribution<size_t>(0, spaces.size() - 1)(rng)];
    } else if (k < 65) {
      s += utf8_of(std::uniform_int_distribution<uint32_t>(0x80, 0x7FF)(rng));
    } else if (k < 85) {
      uint32_t cp = std::uniform_int_distribution<uint32_t>(0x800, 0xFFFF - 0x800)(rng);
      if (cp >= 0xD800) cp += 0x800;  // skip the surrogate block
      s += utf8_of(cp);
    } else {
      s += utf8_of(std::uniform_int_distribution<uint32_t>(0x10000, 0x10FFFF)(rng));
    }
  }
  return s;
}

const char* kCorpus =
    R"(The quick brown fox jumps over the lazy dog. The dog didn't move; it's lazy.
We'll train a tiny tokenizer on this text, and they're going to test it. I'm sure you've seen
BPE before: it merges the most frequent pair of symbols, again and again, until it's done.

Numbers: 1, 12, 123, 1234, 12345, 2024-06-01, 3.14159, 100%, $42.00, #7.
    Indented code: for (int i = 0; i < n; ++i) { sum += x[i] * y[i]; }
    return sum;

Caf\u00e9 cr\u00e8me, na\u00efve r\u00e9sum\u00e9, \u00fcber gr\u00f6\u00dfer. The caf\u00e9 is open.
\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002 \u4e2d\u6587\u3002 Emoji: \U0001F642 \U0001F680!
The end. The end. The end.
)";

// The corpus with its \u escapes written as real UTF-8 (raw strings do not expand them).
std::string corpus_text() {
  std::string out;
  const std::string_view raw = kCorpus;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\\' && i + 1 < raw.size() && (raw[i + 1] == 'u' || raw[i + 1] == 'U')) {
      const size_t digits = raw[i + 1] == 'u' ? 4 : 8;
      out += utf8_of(uint32_t(std::stoul(std::string(raw.substr(i + 2, digits)), nullptr, 16)));
      i += 1 + digits;
    } else {
      out += raw[i];
    }
  }
  return out;
}

constexpr int kMerges = 300;

// One trained tokenizer, its two files, and the tokenizers loaded from them.
class TrainedTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("clockwork-tokenizer");
    corpus_ = new std::string(corpus_text() + corpus_text());
    trained_ = new Tokenizer(train_small_bpe(*corpus_, kMerges));
    trained_->write_tokenizer_json(dir_->path() / "tokenizer.json");
    trained_->write_tokenizer_model(dir_->path() / "tokenizer.model");
    from_json_ = new Tokenizer(Tokenizer::from_file(dir_->path() / "tokenizer.json"));
    from_model_ = new Tokenizer(Tokenizer::from_file(dir_->path() / "tokenizer.model"));
  }
  static void TearDownTestSuite() {
    delete from_model_;
    delete from_json_;
    delete trained_;
    delete corpus_;
    delete dir_;
  }

  // Encodes with all three and checks they agree and round-trip.
  static void expect_consistent(const std::string& text, bool allow_special = false) {
    const std::vector<int32_t> ids = trained_->encode(text, allow_special);
    EXPECT_EQ(show(from_json_->encode(text, allow_special)), show(ids))
        << "tokenizer.json disagrees with the trained tokenizer on " << show(text);
    EXPECT_EQ(show(from_model_->encode(text, allow_special)), show(ids))
        << "tokenizer.model disagrees with the trained tokenizer on " << show(text);
    EXPECT_EQ(show(trained_->decode(ids)), show(text)) << "decode(encode(text)) != text";
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string* corpus_ = nullptr;
  static inline Tokenizer* trained_ = nullptr;
  static inline Tokenizer* from_json_ = nullptr;
  static inline Tokenizer* from_model_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer regex: exact piece lists
// ---------------------------------------------------------------------------------------------
struct SplitCase {
  const char* name;
  std::string text;
  std::vector<std::string> pieces;
};

TEST(PreTokenizer, KnownAnswers) {
  const std::vector<SplitCase> cases = {
      {"contractions",
       "I'm here, they're fine and it's OK",
       {"I", "'m", " here", ",", " they", "'re", " fine", " and", " it", "'s", " OK"}},
      {"uppercase contractions (case-insensitive group)",
       "IT'S WE'LL YOU'VE I'D",
       {"IT", "'S", " WE", "'LL", " YOU", "'VE", " I", "'D"}},
      {"apostrophe not followed by a contraction",
       "'hello' rock'n'roll",
       {"'hello", "'", " rock", "'n", "'roll"}},
      {"digits in groups of three", "12345", {"123", "45"}},
      {"seven digits", "1234567", {"123", "456", "7"}},
      {"letters then digits", "abc123def", {"abc", "123", "def"}},
      {"a space before digits stays separate", "x 42", {"x", " ", "42"}},
      {"one leading punctuation char joins a word",
       "$hello (word) hello-world",
       {"$hello", " (", "word", ")", " hello", "-world"}},
      {"punctuation run before a word", "...and", {"...", "and"}},
      {"punctuation run keeps its newlines", "Hello!!!\n\nBye", {"Hello", "!!!\n\n", "Bye"}},
      {"whitespace run before a word", "a   b", {"a", "  ", " b"}},
      {"double newline", "one\n\ntwo", {"one", "\n\n", "two"}},
      {"spaces around a newline", "x  \n  y", {"x", "  \n", " ", " y"}},
      {"trailing spaces", "end   ", {"end", "   "}},
      {"only whitespace", " \t\n", {" \t\n"}},
      {"carriage returns", "a\r\nb", {"a", "\r\n", "b"}},
      {"accented letters are letters", "caf\xC3\xA9 au lait", {"caf\xC3\xA9", " au", " lait"}},
      {"CJK is one letter run",
       "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE",
       {"\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE"}},
      {"emoji are symbols, not letters", "I \xF0\x9F\x99\x82!", {"I", " \xF0\x9F\x99\x82!"}},
      {"a combining mark is not a letter", "cafe\xCC\x81 ok", {"cafe", "\xCC\x81", " ok"}},
      {"non-ASCII digits count as numbers",
       "\xD9\xA3\xD9\xA4\xD9\xA5\xD9\xA6",
       {"\xD9\xA3\xD9\xA4\xD9\xA5", "\xD9\xA6"}},
      {"U+3000 IDEOGRAPHIC SPACE is whitespace",
       "a\xE3\x80\x80\xE3\x80\x80"
       "b",
       {"a", "\xE3\x80\x80",
        "\xE3\x80\x80"
        "b"}},
      // Not whitespace since Unicode 6.3 (PCRE2's own \s still matches it; tiktoken's does not).
      {"U+180E MONGOLIAN VOWEL SEPARATOR is not whitespace",
       "a\xE1\xA0\x8E\xE1\xA0\x8E"
       "b's",
       {"a", "\xE1\xA0\x8E\xE1\xA0\x8E", "b", "'s"}},
      {"empty text", "", {}},
  };
  for (const SplitCase& c : cases) {
    EXPECT_EQ(show(pre_tokenize(c.text)), show(c.pieces)) << "case: " << c.name;
  }
}

// Letters and digits assigned in Unicode 15.0-16.0 split as tiktoken and HuggingFace split them,
// whatever Unicode tables the linked PCRE2 has (10.42 has 14.0, where they are unassigned and
// would count as punctuation). Expected pieces follow from the regex: a letter run takes at most
// one leading non-letter (so a space joins it), a space before digits stays alone, digits go in
// groups of up to three, and unassigned code points would instead join a punctuation run.
TEST(PreTokenizer, LettersAndDigitsAddedAfterUnicode14) {
  auto u = [](std::initializer_list<uint32_t> cps) {
    std::string s;
    for (uint32_t cp : cps) s += cp < 0x80 ? std::string(1, char(cp)) : utf8_of(cp);
    return s;
  };
  const std::vector<SplitCase> cases = {
      // Nag Mundari (Unicode 15.0): letters U+1E4D0.., digits U+1E4F0..U+1E4F9.
      {"Nag Mundari letters continue a Latin word",
       u({'H', 'i', 0x1E4D0, 0x1E4D1, ' ', 'y', 'o'}),
       {u({'H', 'i', 0x1E4D0, 0x1E4D1}), " yo"}},
      {"a space joins a Nag Mundari word, a full stop does not",
       u({' ', 0x1E4D0, 0x1E4D1, '.'}),
       {u({' ', 0x1E4D0, 0x1E4D1}), "."}},
      {"Nag Mundari digits in groups of three",
       u({0x1E4F0, 0x1E4F1, 0x1E4F2, 0x1E4F3}),
       {u({0x1E4F0, 0x1E4F1, 0x1E4F2}), u({0x1E4F3})}},
      // Kirat Rai digits (Unicode 16.0): U+16D70..U+16D79.
      {"a space before Kirat Rai digits stays alone",
       u({'x', ' ', 0x16D70, 0x16D71, 0x16D72, 0x16D73}),
       {"x", " ", u({0x16D70, 0x16D71, 0x16D72}), u({0x16D73})}},
      // Garay (Unicode 16.0): digits U+10D40..U+10D49, capital letters U+10D50...
      {"Garay digits after a space", u({' ', 0x10D40, 0x10D41}), {" ", u({0x10D40, 0x10D41})}},
      {"a Garay capital continues a word", u({'a', 0x10D50, '!'}), {u({'a', 0x10D50}), "!"}},
      // CJK Extension H (15.0) and I (15.1).
      {"CJK Extension H joins a CJK run", u({0x4E2D, 0x31350}), {u({0x4E2D, 0x31350})}},
      {"CJK Extension I after a space", u({' ', 0x2EBF0, '!'}), {u({' ', 0x2EBF0}), "!"}},
      // Kaktovik numerals (15.0) are numbers (No), not symbols.
      {"Kaktovik numerals", u({'n', ' ', 0x1D2C0, 0x1D2C1, 0x1D2C2, 0x1D2C3}),
       {"n", " ", u({0x1D2C0, 0x1D2C1, 0x1D2C2}), u({0x1D2C3})}},
  };
  for (const SplitCase& c : cases) {
    EXPECT_EQ(show(pre_tokenize(c.text)), show(c.pieces)) << "case: " << c.name;
  }
}

TEST(PreTokenizer, PiecesConcatenateToTheText) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 300; ++i) {
    const std::string text = random_utf8(rng, 80);
    std::string joined;
    for (const std::string& p : pre_tokenize(text)) {
      EXPECT_FALSE(p.empty()) << "empty piece for " << show(text);
      joined += p;
    }
    ASSERT_EQ(show(joined), show(text)) << "the pieces lose or add bytes";
  }
}

TEST(PreTokenizer, LongRunsDoNotFail) {
  // Long runs stress the regex engine's backtracking (\s+(?!\S)) and stack.
  const std::string spaces(200000, ' ');
  const auto pieces = pre_tokenize(spaces + "x");
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].size(), spaces.size() - 1);
  EXPECT_EQ(pieces[1], " x");
  EXPECT_EQ(pre_tokenize(std::string(200000, 'a')).size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Special tokens and the byte-level alphabet
// ---------------------------------------------------------------------------------------------
TEST(SpecialTokens, Llama3Order) {
  const auto names = llama3_special_tokens();
  ASSERT_EQ(names.size(), 256u);
  const std::vector<std::string> first = {"<|begin_of_text|>",
                                          "<|end_of_text|>",
                                          "<|reserved_special_token_0|>",
                                          "<|reserved_special_token_1|>",
                                          "<|reserved_special_token_2|>",
                                          "<|reserved_special_token_3|>",
                                          "<|start_header_id|>",
                                          "<|end_header_id|>",
                                          "<|reserved_special_token_4|>",
                                          "<|eot_id|>",
                                          "<|reserved_special_token_5|>"};
  for (size_t i = 0; i < first.size(); ++i) {
    EXPECT_EQ(names[i], first[i]) << "special token " << 128000 + i;
  }
  EXPECT_EQ(names[255], "<|reserved_special_token_250|>") << "id 128255";
}

TEST(SpecialTokens, RealLlama3IdsFromARankFile) {
  // A rank file of 128000 lines gives the released ids: 128000, 128001, 128006, 128007, 128009.
  std::vector<std::string> extra;
  for (int i = 0; i < kLlama3SpecialBase - 256; ++i) extra.push_back("tok" + std::to_string(i));
  const Tokenizer tok = Tokenizer::from_tokenizer_model_text(rank_file(extra), "llama3-sized");
  EXPECT_EQ(tok.special_base(), 128000);
  EXPECT_EQ(tok.vocab_size(), 128256);
  EXPECT_EQ(tok.bos_id(), 128000);
  EXPECT_EQ(tok.eos_id(), 128001);
  EXPECT_EQ(tok.special_id("<|start_header_id|>"), 128006);
  EXPECT_EQ(tok.special_id("<|end_header_id|>"), 128007);
  EXPECT_EQ(tok.eot_id(), 128009);
  EXPECT_EQ(tok.special_id("<|reserved_special_token_250|>"), 128255);
}

TEST_F(TrainedTokenizer, SpecialTokensFollowTheBaseVocabulary) {
  for (const Tokenizer* tok : {trained_, from_json_, from_model_}) {
    const int32_t base = tok->special_base();
    EXPECT_EQ(base, trained_->special_base());
    EXPECT_EQ(tok->vocab_size(), base + 256);
    EXPECT_EQ(tok->bos_id(), base);
    EXPECT_EQ(tok->eos_id(), base + 1);
    EXPECT_EQ(tok->special_id("<|start_header_id|>"), base + 6);
    EXPECT_EQ(tok->special_id("<|end_header_id|>"), base + 7);
    EXPECT_EQ(tok->eot_id(), base + 9);
    EXPECT_TRUE(tok->is_special(base + 255));
    EXPECT_FALSE(tok->is_special(base - 1));
    EXPECT_EQ(tok->token_bytes(base + 9), "<|eot_id|>");
  }
}

TEST_F(TrainedTokenizer, JsonUsesTheGpt2ByteAlphabet) {
  const json root = json::parse(read_text(dir_->path() / "tokenizer.json"));
  const json& vocab = root.at("model").at("vocab");
  // Known stand-ins: space → Ġ (U+0120), newline → Ċ (U+010A), tab → ĉ (U+0109),
  // NUL → Ā (U+0100), DEL → ġ (U+0121), soft hyphen 0xAD → Ń (U+0143); 'A' and 'é' (0xE9) are
  // themselves.
  const std::vector<std::pair<std::string, int>> expected = {
      {"\xC4\xA0", 0x20}, {"\xC4\x8A", 0x0A}, {"\xC4\x89", 0x09}, {"\xC4\x80", 0x00},
      {"\xC4\xA1", 0x7F}, {"\xC5\x83", 0xAD}, {"A", 'A'},         {"\xC3\xA9", 0xE9}};
  for (const auto& [key, byte] : expected) {
    ASSERT_TRUE(vocab.contains(key)) << "model.vocab has no key " << show(key);
    EXPECT_EQ(vocab.at(key).get<int>(), byte) << "model.vocab[" << show(key) << "]";
  }
  for (int b = 0; b < 256; ++b) {
    const std::string key = gpt2_key(std::string(1, char(b)));
    EXPECT_TRUE(vocab.contains(key)) << "byte " << b << " should be written as " << show(key);
  }
  const json& added = root.at("added_tokens");
  ASSERT_EQ(added.size(), 256u);
  EXPECT_EQ(added[9].at("content"), "<|eot_id|>");
  EXPECT_EQ(added[9].at("id").get<int>(), trained_->special_base() + 9);
  EXPECT_EQ(added[9].at("special"), true);
  EXPECT_EQ(root.at("pre_tokenizer").at("pretokenizers").at(0).at("pattern").at("Regex"),
            std::string(kLlama3SplitPattern));
  EXPECT_EQ(root.at("decoder").at("type"), "ByteLevel");
}

// ---------------------------------------------------------------------------------------------
// Training
// ---------------------------------------------------------------------------------------------
TEST(Training, KnownMergesOnATinyCorpus) {
  // Pieces: "ab" x1, " ab" x2, " abc" x1. (a,b) occurs 4 times → "ab" = 256; then (" ", ab)
  // 3 times → " ab" = 257; then every pair occurs once, so training stops.
  const Tokenizer tok = train_small_bpe("ab ab ab abc", 10);
  ASSERT_EQ(tok.special_base(), 258) << "expected exactly two merges";
  EXPECT_EQ(tok.token_bytes(256), "ab");
  EXPECT_EQ(tok.token_bytes(257), " ab");
  for (int b = 0; b < 256; ++b) {
    ASSERT_EQ(tok.token_bytes(b), std::string(1, char(b))) << "ids 0..255 are the bytes";
  }
  EXPECT_EQ(show(tok.encode("ab ab abc")), show(std::vector<int32_t>{256, 257, 257, 'c'}));
  EXPECT_EQ(tok.bos_id(), 258);
}

TEST(Training, TiesGoToTheSmallestPairOfIds) {
  // In "abcd abcd", (a,b), (b,c) and (c,d) all occur twice; (a,b) has the smallest ids.
  const Tokenizer tok = train_small_bpe("abcd abcd", 1);
  ASSERT_EQ(tok.special_base(), 257);
  EXPECT_EQ(show(tok.token_bytes(256)), show("ab"));
}

TEST(Training, IsDeterministicAndRespectsTheMergeCount) {
  const std::string corpus = corpus_text();
  const Tokenizer a = train_small_bpe(corpus, 50);
  const Tokenizer b = train_small_bpe(corpus, 50);
  ASSERT_EQ(a.vocab_size(), b.vocab_size());
  EXPECT_EQ(a.special_base(), 256 + 50);
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    ASSERT_EQ(a.token_bytes(id), b.token_bytes(id)) << "token " << id << " differs between runs";
  }
  EXPECT_EQ(train_small_bpe(corpus, 0).special_base(), 256);
  EXPECT_TRUE(throws_tokenizer_error([&] { train_small_bpe(corpus, -1); }, {"num_merges"}));
}

TEST_F(TrainedTokenizer, LearnsFrequentWords) {
  EXPECT_GT(trained_->special_base(), 256 + kMerges / 2);
  EXPECT_LE(trained_->special_base(), 256 + kMerges);
  for (const char* word : {"The", " the", " end"}) {
    EXPECT_TRUE(trained_->find_token(word).has_value())
        << show(word) << " is frequent in the corpus and should be one token";
  }
  EXPECT_EQ(trained_->encode(" the").size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// BPE merge order
// ---------------------------------------------------------------------------------------------
TEST(Bpe, LowestRankMergesFirstNotLeftmost) {
  // "bc" has a lower rank than "ab", so "abc" becomes [a, bc]; merging left to right would
  // give [ab, c].
  const Tokenizer tok = Tokenizer::from_tokenizer_model_text(rank_file({"bc", "ab"}), "test");
  EXPECT_EQ(show(tok.encode("abc")), show(std::vector<int32_t>{'a', 256}));
  EXPECT_EQ(show(tok.encode("abab")), show(std::vector<int32_t>{257, 257}));
}

TEST(Bpe, RankRuleMergesAnySplitWhileMergeListRuleOnlyListedPairs) {
  // Vocabulary: bytes, 256 "bc", 257 "ab", 258 "abc". For "abcd": bc merges first → a, bc, d.
  //   tokenizer.model (ranks): "a"+"bc" = "abc" is a token → [abc, d].
  //   tokenizer.json listing only "b c" and "a b": "a bc" is not a merge → [a, bc, d].
  // A whole-token piece ("abc") maps directly under both rules.
  const Tokenizer ranks = Tokenizer::from_tokenizer_model_text(rank_file({"bc", "ab", "abc"}), "t");
  EXPECT_EQ(show(ranks.encode("abcd")), show(std::vector<int32_t>{258, 'd'}));

  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2_key(std::string(1, char(b)))] = b;
  vocab["bc"] = 256;
  vocab["ab"] = 257;
  vocab["abc"] = 258;
  const json merges = json::array({"b c", "a b"});
  const json root = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const Tokenizer list = Tokenizer::from_tokenizer_json_text(root.dump(), "t.json");
  EXPECT_EQ(list.merge_rule(), Tokenizer::MergeRule::kMergeList);
  EXPECT_EQ(show(list.encode("abcd")), show(std::vector<int32_t>{'a', 256, 'd'}));
  EXPECT_EQ(show(list.encode("abc")), show(std::vector<int32_t>{258}));
  EXPECT_EQ(list.special_base(), 259);
  EXPECT_EQ(list.num_special_tokens(), 0);
}

TEST(Bpe, MergesGivenAsPairsAreAccepted) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[gpt2_key(std::string(1, char(b)))] = b;
  vocab[gpt2_key(" a")] = 256;
  // [["Ġ", "a"]], spelled out: a braced list of pairs would become a JSON object.
  const json merges = json::array({json::array({gpt2_key(" "), "a"})});
  const json root = {{"model", {{"vocab", vocab}, {"merges", merges}}}};
  const Tokenizer tok = Tokenizer::from_tokenizer_json_text(root.dump(), "pairs.json");
  EXPECT_EQ(show(tok.encode(" ab")), show(std::vector<int32_t>{256, 'b'}));
}

TEST_F(TrainedTokenizer, MatchesAReferenceBpeOnEveryPiece) {
  std::mt19937 rng(99);
  std::vector<std::string> texts = {*corpus_};
  for (int i = 0; i < 200; ++i) texts.push_back(random_utf8(rng, 60));
  for (const std::string& text : texts) {
    std::vector<int32_t> expected;
    for (const std::string& piece : pre_tokenize(text)) {
      const auto ids = reference_bpe(*trained_, piece);
      expected.insert(expected.end(), ids.begin(), ids.end());
    }
    ASSERT_EQ(show(trained_->encode(text)), show(expected)) << "text " << show(text);
  }
}

TEST(Bpe, LongPieceIsFast) {
  // A 100 KB piece must not take quadratic time.
  const Tokenizer tok = train_small_bpe("aaaa aaaa aaaa aaaa bbbb bbbb", 8);
  const std::string text(100000, 'a');
  const auto ids = tok.encode(text);
  EXPECT_EQ(tok.decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 2);
}

// ---------------------------------------------------------------------------------------------
// Encoding and decoding with the trained tokenizer
// ---------------------------------------------------------------------------------------------
TEST_F(TrainedTokenizer, BothFormatsAgreeOnTheCorpus) {
  EXPECT_EQ(trained_->merge_rule(), Tokenizer::MergeRule::kTokenRanks);
  EXPECT_EQ(from_json_->merge_rule(), Tokenizer::MergeRule::kMergeList);
  EXPECT_EQ(from_model_->merge_rule(), Tokenizer::MergeRule::kTokenRanks);
  ASSERT_EQ(from_json_->vocab_size(), trained_->vocab_size());
  ASSERT_EQ(from_model_->vocab_size(), trained_->vocab_size());
  for (int32_t id = 0; id < trained_->vocab_size(); ++id) {
    ASSERT_EQ(from_json_->token_bytes(id), trained_->token_bytes(id)) << "token " << id;
    ASSERT_EQ(from_model_->token_bytes(id), trained_->token_bytes(id)) << "token " << id;
  }
  expect_consistent(*corpus_);
  const auto ids = trained_->encode(*corpus_);
  EXPECT_LT(ids.size(), corpus_->size() / 2) << "the learned merges should compress the corpus";
}

TEST_F(TrainedTokenizer, RoundTripsRandomUtf8) {
  std::mt19937 rng(20240601);
  for (int i = 0; i < 400; ++i) {
    const std::string text = random_utf8(rng, 60);
    SCOPED_TRACE("random string #" + std::to_string(i));
    expect_consistent(text);
    if (HasFailure()) return;  // one detailed failure is enough
  }
}

TEST_F(TrainedTokenizer, MultiByteCharacters) {
  for (const std::string text :
       {"caf\xC3\xA9", "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E", "I \xF0\x9F\x99\x82 it",
        "cafe\xCC\x81", "\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x92\xBB zwj"}) {
    expect_consistent(text);
  }
  // A character the corpus never saw is spelled with its single-byte tokens.
  const std::string rare = "\xF0\x90\x8D\x88";  // U+10348 GOTHIC LETTER HWAIR
  EXPECT_EQ(show(trained_->encode(rare)), show(std::vector<int32_t>{0xF0, 0x90, 0x8D, 0x88}));
}

TEST_F(TrainedTokenizer, BosFlagPrependsBeginOfText) {
  const auto plain = trained_->encode("Hello");
  const auto with_bos = trained_->encode("Hello", false, /*bos=*/true);
  ASSERT_EQ(with_bos.size(), plain.size() + 1);
  EXPECT_EQ(with_bos[0], trained_->bos_id());
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), with_bos.begin() + 1));
  EXPECT_EQ(show(trained_->encode("")), "[]");
  EXPECT_EQ(show(trained_->encode("", false, true)),
            show(std::vector<int32_t>{trained_->bos_id()}));
}

TEST_F(TrainedTokenizer, SpecialTokensInTextOnlyWhenAllowed) {
  const Tokenizer& tok = *trained_;
  const int32_t eot = tok.eot_id();
  EXPECT_EQ(show(tok.encode("<|eot_id|>", true)), show(std::vector<int32_t>{eot}));

  std::vector<int32_t> expected = tok.encode("Hi");
  expected.push_back(eot);
  expected.push_back(tok.bos_id());
  for (int32_t id : tok.encode(" there")) expected.push_back(id);
  EXPECT_EQ(show(tok.encode("Hi<|eot_id|><|begin_of_text|> there", true)), show(expected));

  // Not allowed: the same text is ordinary characters, and no special id appears.
  const std::string text = "Hi<|eot_id|> there <|begin_of_text|>";
  const auto plain = tok.encode(text, false);
  for (int32_t id : plain) {
    EXPECT_FALSE(tok.is_special(id)) << "special id " << id << " produced without allow_special";
  }
  EXPECT_EQ(tok.decode(plain), text);
  expect_consistent(text, true);
  expect_consistent(text, false);

  // Near misses stay text even when allowed.
  for (int32_t id : tok.encode("<|eot_id| <|notatoken|> <eot_id|>", true)) {
    EXPECT_FALSE(tok.is_special(id)) << "near miss matched as special id " << id;
  }
}

TEST_F(TrainedTokenizer, DecodeSkipsSpecialTokensOnRequest) {
  const auto ids = trained_->encode("<|begin_of_text|>Hi<|eot_id|>", true);
  EXPECT_EQ(trained_->decode(ids), "<|begin_of_text|>Hi<|eot_id|>");
  EXPECT_EQ(trained_->decode(ids, /*skip_special=*/true), "Hi");
}

// ---------------------------------------------------------------------------------------------
// Invalid input
// ---------------------------------------------------------------------------------------------
struct BadUtf8Case {
  const char* name;
  std::string text;
  size_t offset;
  const char* reason;  // a word the message must contain
};

TEST_F(TrainedTokenizer, InvalidUtf8IsRejectedWithItsOffset) {
  const std::vector<BadUtf8Case> cases = {
      {"lone continuation byte",
       std::string("ab\x80"
                   "cd"),
       2, "continuation"},
      {"truncated at the end", std::string("abc\xE6\x97"), 3, "truncated"},
      {"truncated by an ASCII byte",
       std::string("\xE6\x97"
                   "A"),
       0, "truncated"},
      {"overlong 2-byte", std::string("x\xC0\xAF"), 1, "overlong"},
      {"overlong 3-byte", std::string("\xE0\x80\xAF"), 0, "overlong"},
      {"overlong 4-byte", std::string("ok \xF0\x82\x82\xAC"), 3, "overlong"},
      {"surrogate", std::string("x\xED\xA0\x80"), 1, "surrogate"},
      {"above U+10FFFF", std::string("\xF4\x90\x80\x80"), 0, "10FFFF"},
      {"invalid byte 0xFF", std::string("abc\xFF"), 3, "0xFF"},
  };
  for (const BadUtf8Case& c : cases) {
    try {
      trained_->encode(c.text);
      ADD_FAILURE() << c.name << ": encode accepted invalid UTF-8";
    } catch (const InvalidUtf8Error& e) {
      EXPECT_EQ(e.byte_offset(), c.offset) << c.name << ": " << e.what();
      const std::string what = e.what();
      EXPECT_NE(what.find("offset " + std::to_string(c.offset)), std::string::npos)
          << c.name << ": message should give the offset: " << what;
      EXPECT_NE(what.find(c.reason), std::string::npos)
          << c.name << ": message should say " << show(c.reason) << ": " << what;
    }
  }
  // The offset counts from the start of the whole text, past special tokens too.
  try {
    trained_->encode("<|eot_id|>\x80", true);
    ADD_FAILURE() << "encode accepted invalid UTF-8 after a special token";
  } catch (const InvalidUtf8Error& e) {
    EXPECT_EQ(e.byte_offset(), 10u);
  }
}

TEST_F(TrainedTokenizer, OutOfRangeIdsAreErrors) {
  const int32_t v = trained_->vocab_size();
  const std::vector<int32_t> too_big = {'a', v};
  EXPECT_TRUE(throws_tokenizer_error([&] { trained_->decode(too_big); },
                                     {"token id " + std::to_string(v), "position 1"}));
  const std::vector<int32_t> negative = {-1};
  EXPECT_TRUE(throws_tokenizer_error([&] { trained_->decode(negative); }, {"token id -1"}));
  EXPECT_TRUE(throws_tokenizer_error([&] { trained_->token_bytes(v + 5); },
                                     {std::to_string(v + 5), "out of range"}));
  StreamDecoder stream(*trained_);
  EXPECT_TRUE(throws_tokenizer_error([&] { stream.push(v); }, {std::to_string(v)}));
}

// ---------------------------------------------------------------------------------------------
// Decoding partial characters
// ---------------------------------------------------------------------------------------------
TEST_F(TrainedTokenizer, StreamDecoderHoldsSplitCharacters) {
  // Ids 0..255 are single bytes, so each byte of the text can be its own token.
  const std::string text = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x99\x82z";  // a é 日 🙂 z
  StreamDecoder stream(*trained_);
  std::vector<std::string> out;
  for (unsigned char b : text) out.push_back(stream.push(b));
  const std::vector<std::string> expected = {
      "a", "", "\xC3\xA9", "", "", "\xE6\x97\xA5", "", "", "", "\xF0\x9F\x99\x82", "z"};
  EXPECT_EQ(show(out), show(expected)) << "text per pushed byte";
  EXPECT_EQ(stream.pending_bytes(), 0u);
  EXPECT_EQ(stream.flush(), "");

  // Real tokens that end mid-character decode the same way, one at a time.
  std::string joined;
  for (int32_t id : trained_->encode(*corpus_)) joined += stream.push(id);
  joined += stream.flush();
  EXPECT_EQ(joined, *corpus_);
}

TEST_F(TrainedTokenizer, InvalidBytesBecomeReplacementCharacters) {
  const std::string fffd = "\xEF\xBF\xBD";
  StreamDecoder stream(*trained_);
  EXPECT_EQ(stream.push(0x80), fffd) << "a lone continuation byte is invalid at once";
  EXPECT_EQ(stream.push(0xE6), "");
  EXPECT_EQ(stream.push('A'), fffd + "A") << "a sequence cut by ASCII is one U+FFFD";
  EXPECT_EQ(stream.push(0xE6), "");
  EXPECT_EQ(stream.push(0x97), "");
  EXPECT_EQ(stream.pending_bytes(), 2u);
  EXPECT_EQ(stream.flush(), fffd) << "an unfinished character at the end is one U+FFFD";

  // decode() applies the same policy; decode_bytes() returns the raw bytes.
  const std::vector<int32_t> half = {'x', 0xE6, 0x97};
  EXPECT_EQ(trained_->decode(half), "x" + fffd);
  EXPECT_EQ(trained_->decode_bytes(half), "x\xE6\x97");
  const std::vector<int32_t> overlong = {0xE0, 0x80};
  EXPECT_EQ(trained_->decode(overlong), fffd + fffd) << "E0 80 is two maximal invalid subparts";
}

// ---------------------------------------------------------------------------------------------
// Chat template
// ---------------------------------------------------------------------------------------------
TEST(Chat, FormatMatchesTheLlama3Template) {
  const std::vector<ChatMessage> messages = {{"system", "You are terse."},
                                             {"user", "  What is 2+2?\n"}};
  EXPECT_EQ(show(format_chat(messages)),
            show("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse."
                 "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n"));
  EXPECT_EQ(show(format_chat({{"user", "Hi"}}, /*add_generation_prompt=*/false)),
            show("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"));
  // As in the official template, <|begin_of_text|> comes with the first message.
  EXPECT_EQ(format_chat({}), "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(Chat, ContentIsTrimmedLikeJinja) {
  // Jinja's trim is Python's str.strip(): Unicode whitespace at both ends, none inside.
  const std::string ideographic_space = "\xE3\x80\x80", nbsp = "\xC2\xA0";
  const std::string text = format_chat({{"user", ideographic_space + "\t a  b \n" + nbsp}}, false);
  EXPECT_NE(text.find("\n\na  b<|eot_id|>"), std::string::npos) << show(text);
  EXPECT_NE(format_chat({{"user", " \n "}}, false).find("\n\n<|eot_id|>"), std::string::npos);
}

TEST_F(TrainedTokenizer, EncodeChatMatchesEncodingTheFormattedText) {
  const std::vector<ChatMessage> messages = {{"system", "Answer briefly."},
                                             {"user", "What's the capital of France?"},
                                             {"assistant", "Paris."},
                                             {"user", " And of Japan? "}};
  for (const Tokenizer* tok : {trained_, from_json_, from_model_}) {
    const auto ids = tok->encode_chat(messages);
    EXPECT_EQ(show(ids), show(tok->encode(format_chat(messages), /*allow_special=*/true)));
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids.front(), tok->bos_id());
    EXPECT_EQ(tok->decode(ids), format_chat(messages));
  }
  // A special token typed inside a message stays text.
  const auto ids = trained_->encode_chat({{"user", "say <|eot_id|> now"}}, false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), trained_->eot_id()), 1)
      << "only the template's own <|eot_id|> may be a control token";
}

// ---------------------------------------------------------------------------------------------
// Loading: formats, detection and malformed files
// ---------------------------------------------------------------------------------------------
TEST_F(TrainedTokenizer, FilesAreWrittenAtomically) {
  for (const auto& entry : fs::directory_iterator(dir_->path())) {
    EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos)
        << "temporary file left behind: " << entry.path().filename();
  }
  const std::string model = read_text(dir_->path() / "tokenizer.model");
  EXPECT_EQ(model.substr(0, 5), "AA== ") << "line 1 is byte 0x00 with rank 0";
  EXPECT_EQ(std::count(model.begin(), model.end(), '\n'), trained_->special_base())
      << "one line per base token, none for special tokens";
}

TEST_F(TrainedTokenizer, FormatIsDetectedByContentAndFolder) {
  TempDir dir;
  fs::copy_file(dir_->path() / "tokenizer.json", dir.path() / "tokenizer.txt");
  fs::copy_file(dir_->path() / "tokenizer.model", dir.path() / "ranks.bin");
  EXPECT_EQ(Tokenizer::from_file(dir.path() / "tokenizer.txt").merge_rule(),
            Tokenizer::MergeRule::kMergeList);
  EXPECT_EQ(Tokenizer::from_file(dir.path() / "ranks.bin").merge_rule(),
            Tokenizer::MergeRule::kTokenRanks);

  // A checkpoint folder: tokenizer.json preferred, else original/tokenizer.model.
  fs::create_directories(dir.path() / "ckpt" / "original");
  fs::copy_file(dir_->path() / "tokenizer.model",
                dir.path() / "ckpt" / "original" / "tokenizer.model");
  EXPECT_EQ(Tokenizer::from_file(dir.path() / "ckpt").merge_rule(),
            Tokenizer::MergeRule::kTokenRanks);
  fs::copy_file(dir_->path() / "tokenizer.json", dir.path() / "ckpt" / "tokenizer.json");
  EXPECT_EQ(Tokenizer::from_file(dir.path() / "ckpt").merge_rule(),
            Tokenizer::MergeRule::kMergeList);
  EXPECT_TRUE(throws_tokenizer_error([&] { Tokenizer::from_file(dir.path() / "missing.json"); },
                                     {"missing.json", "not found"}));
  fs::create_directories(dir.path() / "empty");
  EXPECT_TRUE(throws_tokenizer_error([&] { Tokenizer::from_file(dir.path() / "empty"); },
                                     {"empty", "no tokenizer.json"}));
}

TEST_F(TrainedTokenizer, ConvertingJsonBackGivesTheSameFile) {
  TempDir dir;
  from_json_->write_tokenizer_json(dir.path() / "again.json");
  EXPECT_EQ(read_text(dir.path() / "again.json"), read_text(dir_->path() / "tokenizer.json"));
  from_json_->write_tokenizer_model(dir.path() / "again.model");
  EXPECT_EQ(read_text(dir.path() / "again.model"), read_text(dir_->path() / "tokenizer.model"));
}

struct BadModelCase {
  const char* name;
  std::string text;
  std::vector<std::string> mentions;
};

TEST(MalformedFiles, TokenizerModel) {
  std::string bad_base64 = rank_file({});
  bad_base64.replace(bad_base64.find("Ag== 2"), 6, "A!g= 2");
  std::string no_zero_byte = rank_file({});
  no_zero_byte.replace(0, 4, base64("ab"));  // line 1 held byte 0x00
  std::string dup_rank = rank_file({"ab"});
  dup_rank.replace(dup_rank.rfind("256"), 3, "255");
  const std::vector<BadModelCase> cases = {
      {"bad base64", bad_base64, {"tokenizer.model:3:", "base64"}},
      {"missing rank", "QQ==\n", {"tokenizer.model:1:", "expected"}},
      {"rank not a number", rank_file({}) + "YWI= x7\n", {":257:", "not a non-negative integer"}},
      {"negative rank", "QQ== -1\n", {":1:", "not a non-negative integer"}},
      {"duplicate rank", dup_rank, {":257:", "rank 255 already appeared on line 256"}},
      {"rank out of range", rank_file({}) + "YWI= 999\n", {":257:", "out of range"}},
      {"duplicate token", rank_file({}) + "QQ== 256\n", {":257:", "line 66"}},
      {"too few tokens", "QQ== 0\nQg== 1\n", {"tokenizer.model", "256 single bytes"}},
      {"a byte without a token", no_zero_byte, {"tokenizer.model", "single byte 0x00"}},
      {"empty file", "\n\n", {"no tokens"}},
      {"binary file", std::string("\x0a\x05\x00\x01", 4), {"binary", "SentencePiece"}},
  };
  for (const BadModelCase& c : cases) {
    EXPECT_TRUE(throws_tokenizer_error(
        [&] { Tokenizer::from_tokenizer_model_text(c.text, "dir/tokenizer.model"); }, c.mentions))
        << "case: " << c.name;
  }
}

TEST_F(TrainedTokenizer, MalformedTokenizerJson) {
  const json good = json::parse(read_text(dir_->path() / "tokenizer.json"));
  const std::string space_key = gpt2_key(" ");
  struct Case {
    const char* name;
    std::function<void(json&)> edit;
    std::vector<std::string> mentions;
  };
  const std::vector<Case> cases = {
      {"no model", [](json& j) { j.erase("model"); }, {"(root)", "\"model\""}},
      {"wrong model type",
       [](json& j) { j["model"]["type"] = "WordPiece"; },
       {"model.type", "WordPiece"}},
      {"vocab not an object",
       [](json& j) { j["model"]["vocab"] = json::array(); },
       {"model.vocab"}},
      {"vocab id not an integer",
       [&](json& j) { j["model"]["vocab"][space_key] = "x"; },
       {"model.vocab[\"" + space_key + "\"]", "integer"}},
      {"vocab id out of range",
       [&](json& j) { j["model"]["vocab"][space_key] = 1000000; },
       {"model.vocab[\"" + space_key + "\"]", "out of range"}},
      {"character outside the byte alphabet",
       [&](json& j) {
         j["model"]["vocab"].erase(space_key);
         j["model"]["vocab"]["\xE2\x82\xAC"] = 32;  // € is not a byte stand-in
       },
       {"U+20AC", "byte-level alphabet"}},
      {"duplicate id", [&](json& j) { j["model"]["vocab"][space_key] = 33; }, {"used twice"}},
      {"merge without a space",
       [](json& j) { j["model"]["merges"][3] = "abc"; },
       {"model.merges[3]", "one space"}},
      {"merge of an unknown token",
       [](json& j) { j["model"]["merges"][4] = "zzzq q"; },
       {"model.merges[4]", "\"zzzq\" is not in model.vocab"}},
      {"merge result not a token",
       [](json& j) {
         j["model"]["merges"][5] = json::array({"q", "q"});
       },
       {"model.merges[5]", "merged token \"qq\""}},
      {"merge of the wrong type",
       [](json& j) { j["model"]["merges"][6] = 7; },
       {"model.merges[6]"}},
      {"added token without content",
       [](json& j) { j["added_tokens"][5].erase("content"); },
       {"added_tokens[5]", "\"content\""}},
      {"added token id reused",
       [](json& j) { j["added_tokens"][5]["id"] = j["added_tokens"][4]["id"]; },
       {"added_tokens[5].id", "used twice"}},
      {"added token inside the vocabulary",
       [](json& j) { j["added_tokens"][0]["id"] = 3; },
       {"added_tokens[0].id", "inside model.vocab"}},
      {"another pre-tokenizer regex",
       [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "\\s+"; },
       {"pre_tokenizer.pretokenizers[0].pattern.Regex", "Llama 3"}},
      {"GPT-2 style ByteLevel pre-tokenizer",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "ByteLevel"}, {"use_regex", true}};
       },
       {"pre_tokenizer", "GPT-2"}},
      {"pre-tokenizer without Llama 3's Split step",
       [](json& j) {
         j["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", {{{"type", "ByteLevel"}, {"use_regex", false}}}}};
       },
       {"pre_tokenizer", "no \"Split\" step"}},
      {"deeply nested pre-tokenizer sequences",
       [](json& j) {
         // 12 Sequences around the file's own (29 JSON levels, under the limit of 32).
         json node = j["pre_tokenizer"];
         for (int i = 0; i < 12; ++i) {
           node = {{"type", "Sequence"}, {"pretokenizers", json::array({node, {{"type", "Bad"}}})}};
         }
         j["pre_tokenizer"] = node;
       },
       {"pretokenizers[0].pretokenizers[1].type", "\"Bad\" is not supported"}},
  };
  for (const Case& c : cases) {
    json edited = good;
    c.edit(edited);
    std::vector<std::string> mentions = c.mentions;
    mentions.push_back("tok/tokenizer.json");
    EXPECT_TRUE(throws_tokenizer_error(
        [&] { Tokenizer::from_tokenizer_json_text(edited.dump(), "tok/tokenizer.json"); },
        mentions))
        << "case: " << c.name;
  }
  EXPECT_TRUE(throws_tokenizer_error(
      [&] { Tokenizer::from_tokenizer_json_text("{\"model\": {\"vocab\": ", "t.json"); },
      {"t.json", "not valid JSON"}));
  EXPECT_TRUE(
      throws_tokenizer_error([&] { Tokenizer::from_tokenizer_json_text("[1, 2]", "t.json"); },
                             {"t.json", "expected a JSON object"}));
}

TEST_F(TrainedTokenizer, HostileTokenizerJsonIsRefusedNamingTheFileAndKey) {
  const std::string good = read_text(dir_->path() / "tokenizer.json");
  const std::string origin = "tok/tokenizer.json";
  auto refused = [&](const std::string& text, const std::vector<std::string>& mentions) {
    std::vector<std::string> all = mentions;
    all.push_back(origin);
    return throws_tokenizer_error([&] { Tokenizer::from_tokenizer_json_text(text, origin); }, all);
  };
  // A pre-tokenizer nested 100,000 deep: refused at 33 levels, before any recursion.
  EXPECT_TRUE(refused(R"({"pre_tokenizer": )" + std::string(100'000, '[') + "}",
                      {"key 'pre_tokenizer[0][0]", "nested deeper than 32 levels"}));
  EXPECT_TRUE(refused(good + std::string("\0garbage", 8),
                      {"NUL byte at offset " + std::to_string(good.size())}));
  EXPECT_TRUE(refused(good + "]", {"unexpected text after the JSON value"}));
  EXPECT_TRUE(refused(R"({"model": {"type": "BPE", "vocab": {"a": 0, "a": 1}}})",
                      {"key 'model.vocab.a': appears twice"}));
}

TEST(TokenizerFiles, OversizedFileIsRefusedBeforeReading) {
  TempDir dir;
  const fs::path file = dir.path() / "tokenizer.json";
  {
    std::ofstream out(file, std::ios::binary);
    out << "{";
    out.seekp(std::streamoff{256} << 20);  // sparse: 256 MiB + 1 byte
    out.put('}');
  }
  EXPECT_TRUE(throws_tokenizer_error([&] { Tokenizer::from_file(file); },
                                     {file.string(), "268435457 bytes",
                                      "more than the 268435456-byte limit"}));
}

TEST_F(TrainedTokenizer, DamagedFilesNeverCrash) {
  // Truncated or corrupted files either load or throw TokenizerError; nothing else.
  std::mt19937 rng(7);
  for (const char* name : {"tokenizer.json", "tokenizer.model"}) {
    const std::string good = read_text(dir_->path() / name);
    for (int i = 0; i < 60; ++i) {
      std::string damaged = good;
      if (i % 2 == 0) {
        damaged.resize(std::uniform_int_distribution<size_t>(0, good.size())(rng));
      } else {
        for (int k = 0; k < 3; ++k) {
          damaged[std::uniform_int_distribution<size_t>(0, good.size() - 1)(rng)] =
              char(std::uniform_int_distribution<int>(0, 255)(rng));
        }
      }
      try {
        if (std::string_view(name).ends_with(".json")) {
          Tokenizer::from_tokenizer_json_text(damaged, name);
        } else {
          Tokenizer::from_tokenizer_model_text(damaged, name);
        }
      } catch (const TokenizerError&) {
        // expected for most damage
      } catch (const std::exception& e) {
        ADD_FAILURE() << name << " damage #" << i << " threw a non-TokenizerError: " << e.what();
      }
    }
  }
}

TEST_F(TrainedTokenizer, RankFileCannotStoreOtherSpecialTokens) {
  json edited = json::parse(read_text(dir_->path() / "tokenizer.json"));
  edited["added_tokens"][12]["content"] = "<|custom|>";
  const Tokenizer tok = Tokenizer::from_tokenizer_json_text(edited.dump(), "custom.json");
  EXPECT_EQ(tok.special_id("<|custom|>"), tok.special_base() + 12);
  TempDir dir;
  EXPECT_TRUE(throws_tokenizer_error(
      [&] { tok.write_tokenizer_model(dir.path() / "tokenizer.model"); }, {"special tokens"}));
  EXPECT_FALSE(fs::exists(dir.path() / "tokenizer.model"));
}

}  // namespace
}  // namespace clockwork
