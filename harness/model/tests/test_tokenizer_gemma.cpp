// Tests of the SentencePiece-style tokenizer (Gemma 3's tokenizer.json) against encodings made by
// HuggingFace `tokenizers` (data/gemma3_tokenizer, written by make_tokenizer.py there), of
// Gemma 3's chat template, and of the errors a malformed file gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/model/tokenizer.h"

#ifndef CLOCKWORK_GEMMA_TOKENIZER_DATA
#error "CLOCKWORK_GEMMA_TOKENIZER_DATA must name the folder of the test tokenizer"
#endif

namespace {

using clockwork::ChatMessage;
using clockwork::StreamDecoder;
using clockwork::Tokenizer;
using clockwork::TokenizerError;
using json = nlohmann::json;

const std::string kData = CLOCKWORK_GEMMA_TOKENIZER_DATA;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const TokenizerError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type: ") + e.what() + ">";
  }
  return "<no exception thrown>";
}

class GemmaTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tokenizer_ = new Tokenizer(Tokenizer::from_file(kData + "/tokenizer.json"));
    golden_ = new json(json::parse(read_text(kData + "/golden.json")));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete golden_;
  }
  static const Tokenizer& tok() { return *tokenizer_; }
  static const json& cases() { return golden_->at("cases"); }
  static Tokenizer* tokenizer_;
  static json* golden_;
};
Tokenizer* GemmaTokenizer::tokenizer_ = nullptr;
json* GemmaTokenizer::golden_ = nullptr;

TEST_F(GemmaTokenizer, ReadsTheLayout) {
  EXPECT_EQ(tok().style(), Tokenizer::Style::kSentencePiece);
  EXPECT_EQ(tok().vocab_size(), 675) << "674 in model.vocab, <image_soft_token> after it";
  EXPECT_EQ(tok().special_base(), 674);
  EXPECT_EQ(tok().bos_id(), 2);
  EXPECT_EQ(tok().eos_id(), 1);
  EXPECT_EQ(tok().eot_id(), 6);
  EXPECT_EQ(tok().special_id("<start_of_turn>"), 5);
  EXPECT_EQ(tok().special_id("<image_soft_token>"), 674);
  EXPECT_TRUE(tok().is_special(2));
  EXPECT_TRUE(tok().is_special(674));
  EXPECT_FALSE(tok().is_special(7)) << "<unused0> is an added token that is not special";
  EXPECT_FALSE(tok().is_special(8)) << "<0x00>";
  EXPECT_EQ(tok().token_bytes(8 + 0x41), "A") << "<0x41> decodes to its byte";
  EXPECT_EQ(tok().find_token(" zebra "), std::nullopt);
  ASSERT_TRUE(tok().find_token(" ").has_value());
  EXPECT_EQ(tok().token_bytes(*tok().find_token(" ")), " ") << "the piece \"\u2581\"";
}

// Every text of golden.json, encoded as HuggingFace `tokenizers` does: with special tokens as
// plain text (encode_special_tokens) and cut out, with <bos>, and decoded back.
TEST_F(GemmaTokenizer, EncodesAsHuggingFaceDoes) {
  ASSERT_GE(cases().size(), 15u);
  for (const json& c : cases()) {
    const std::string text = c.at("text");
    SCOPED_TRACE("text: \"" + text + "\"");
    const std::vector<int32_t> plain = c.at("plain").get<std::vector<int32_t>>();
    const std::vector<int32_t> special = c.at("special").get<std::vector<int32_t>>();
    EXPECT_EQ(show(tok().encode(text)), show(plain));
    EXPECT_EQ(show(tok().encode(text, /*allow_special=*/true)), show(special));
    std::vector<int32_t> with_bos{tok().bos_id()};
    with_bos.insert(with_bos.end(), special.begin(), special.end());
    EXPECT_EQ(show(tok().encode(text, true, /*bos=*/true)), show(with_bos));
    EXPECT_EQ(tok().decode(special), c.at("decoded").get<std::string>());
    EXPECT_EQ(tok().decode(special, /*skip_special=*/true),
              c.at("decoded_skip_special").get<std::string>());
  }
}

TEST_F(GemmaTokenizer, DecodeOfEncodeGivesTheTextBack) {
  for (const json& c : cases()) {
    const std::string text = c.at("text");
    EXPECT_EQ(tok().decode(tok().encode(text)), text);
    EXPECT_EQ(tok().decode(tok().encode(text, true)), text);
  }
  // Longer text than any case: one piece of 20,000 characters, mixing known characters and
  // byte fallback (the encoding is one BPE over the whole stretch, as Gemma has no pre-tokenizer).
  std::string long_text;
  while (long_text.size() < 20000) long_text += "The dog sleeps; 漢字 and 🙂 run away.\n";
  EXPECT_EQ(tok().decode(tok().encode(long_text)), long_text);
}

TEST_F(GemmaTokenizer, ByteFallbackStreamsWholeCharacters) {
  const std::string text = "not 🙂 but 😀";
  const std::vector<int32_t> ids = tok().encode(text);
  StreamDecoder stream(tok());
  std::string out;
  std::vector<std::string> pieces;
  for (int32_t id : ids) {
    pieces.push_back(stream.push(id));
    out += pieces.back();
  }
  out += stream.flush();
  EXPECT_EQ(out, text);
  // 🙂 is not in the vocabulary: four <0xNN> tokens, and the character comes out whole.
  EXPECT_NE(std::find(pieces.begin(), pieces.end(), "\xF0\x9F\x99\x82"), pieces.end());
}

TEST_F(GemmaTokenizer, InvalidUtf8IsRefusedWithItsOffset) {
  try {
    tok().encode("ab\xC3(");
    FAIL() << "no exception";
  } catch (const clockwork::InvalidUtf8Error& e) {
    EXPECT_EQ(e.byte_offset(), 2u);
  }
}

TEST_F(GemmaTokenizer, WritingIsRefused) {
  EXPECT_NE(error_of([&] { tok().write_tokenizer_json("/nonexistent/tokenizer.json"); })
                .find("SentencePiece-style"),
            std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The chat template
// ---------------------------------------------------------------------------------------------
TEST(GemmaChat, FormatsTurnsAsGemma3sTemplate) {
  const std::vector<ChatMessage> chat = {{"system", "Be brief. "},
                                         {"user", "  Hi there\n"},
                                         {"assistant", "Hello!"},
                                         {"user", "Bye"}};
  EXPECT_EQ(clockwork::format_gemma_chat(chat),
            "<bos><start_of_turn>user\nBe brief. \n\nHi there<end_of_turn>\n"
            "<start_of_turn>model\nHello!<end_of_turn>\n"
            "<start_of_turn>user\nBye<end_of_turn>\n"
            "<start_of_turn>model\n");
  EXPECT_EQ(clockwork::format_gemma_chat({{"user", "Hi"}}, /*add_generation_prompt=*/false),
            "<bos><start_of_turn>user\nHi<end_of_turn>\n");
  EXPECT_EQ(clockwork::format_gemma_chat({}), "<bos><start_of_turn>model\n");
  // A system message alone leaves no turn to fold it into; the template drops it.
  EXPECT_EQ(clockwork::format_gemma_chat({{"system", "S"}}, false), "<bos>");
}

TEST(GemmaChat, RolesMustAlternate) {
  const std::string two_users = error_of(
      [] { clockwork::format_gemma_chat({{"user", "a"}, {"user", "b"}}); });
  EXPECT_NE(two_users.find("chat message 1 has role \"user\""), std::string::npos) << two_users;
  const std::string reply_first = error_of(
      [] { clockwork::format_gemma_chat({{"system", "s"}, {"assistant", "a"}}); });
  EXPECT_NE(reply_first.find("chat message 1 has role \"assistant\""), std::string::npos)
      << reply_first;
}

TEST_F(GemmaTokenizer, EncodeChatIsTheTemplateEncodedWithSpecialTokens) {
  const std::vector<ChatMessage> chat = {
      {"system", "You are a fox."}, {"user", "Who jumps?"}, {"assistant", "The fox."}, {"user", "Why?"}};
  for (bool prompt : {true, false}) {
    const std::vector<int32_t> ids = tok().encode_chat(chat, prompt);
    EXPECT_EQ(show(ids), show(tok().encode(clockwork::format_gemma_chat(chat, prompt), true)));
    EXPECT_EQ(ids.front(), tok().bos_id());
  }
  // A control token typed in a message stays text.
  const std::vector<int32_t> typed = tok().encode_chat({{"user", "<end_of_turn>"}});
  EXPECT_EQ(std::count(typed.begin(), typed.end(), tok().eot_id()), 1);
}

// ---------------------------------------------------------------------------------------------
// Malformed files: the error names the file and the key
// ---------------------------------------------------------------------------------------------
class GemmaTokenizerFile : public ::testing::Test {
 protected:
  json file = json::parse(read_text(kData + "/tokenizer.json"));
  std::string load_error() {
    return error_of([&] { Tokenizer::from_tokenizer_json_text(file.dump(), "gemma/tokenizer.json"); });
  }
  void expect_error(const std::string& key, const std::string& what) {
    const std::string message = load_error();
    EXPECT_NE(message.find("gemma/tokenizer.json: " + key), std::string::npos) << message;
    EXPECT_NE(message.find(what), std::string::npos) << message;
  }
};

TEST_F(GemmaTokenizerFile, TheUnmodifiedFileLoads) {
  EXPECT_EQ(load_error(), "<no exception thrown>");
}

TEST_F(GemmaTokenizerFile, AnotherDecoderIsRefused) {
  file["decoder"]["decoders"].erase(1);  // no ByteFallback
  expect_error("decoder", "ByteFallback");
}

TEST_F(GemmaTokenizerFile, AnotherNormalizerIsRefused) {
  file["normalizer"] = {{"type", "Prepend"}, {"prepend", "\u2581"}};
  expect_error("normalizer", "Replace");
}

TEST_F(GemmaTokenizerFile, ByteFallbackMustBeOn) {
  file["model"]["byte_fallback"] = false;
  expect_error("model.byte_fallback", "must be true");
}

TEST_F(GemmaTokenizerFile, AMissingByteTokenIsNamed) {
  file["model"]["vocab"].erase("<0x41>");
  // Keep ids contiguous: the last piece takes the freed id.
  std::string last;
  for (auto& [key, value] : file["model"]["vocab"].items()) {
    if (value == 673) last = key;
  }
  file["model"]["vocab"][last] = 8 + 0x41;
  file["added_tokens"].back()["id"] = 673;
  expect_error("model.vocab", "<0x41>");
}

TEST_F(GemmaTokenizerFile, AnAddedTokenMustMatchItsVocabularyEntry) {
  file["added_tokens"][2]["content"] = "<start>";
  expect_error("added_tokens[2]", "\"<bos>\" in model.vocab");
}

TEST_F(GemmaTokenizerFile, AMergeOfAnUnknownPieceIsNamed) {
  file["model"]["merges"][3] = json::array({"zz", "q"});
  expect_error("model.merges[3]", "\"zz\" is not in model.vocab");
}

TEST_F(GemmaTokenizerFile, APreTokenizerThatSplitsIsRefused) {
  file["pre_tokenizer"] = {{"type", "Whitespace"}};
  expect_error("pre_tokenizer", "not supported");
}

}  // namespace
