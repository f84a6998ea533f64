// `clockwork tokenize`: text to ids (with each token's bytes shown) and ids back to text.
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>

#include "harness/model/tokenizer.h"
#include "tools/clockwork/cli.h"
#include "tools/clockwork/commands.h"
#include "harness/model/model_dir.h"

namespace clockwork::cli {

namespace {

const CommandSpec kSpec{
    "tokenize",
    "(--model DIR | --tokenizer FILE) (--text TEXT | --file F | --decode ID...) [options]",
    "Encodes text with a model's tokenizer and prints the ids, then one line per token with its\n"
    "id and its bytes; with --decode, prints the text of the given ids instead.",
    {
        {"model", "DIR", "model directory (its tokenizer.json, or original/tokenizer.model)"},
        {"tokenizer", "FILE", "a tokenizer.json or tokenizer.model file instead of --model"},
        {"text", "TEXT", "the text to encode"},
        {"file", "F", "encode the contents of this file"},
        {"chat", "", "wrap the text as a user message in the Llama 3 chat template"},
        {"system", "TEXT", "with --chat: a system message before the user message"},
        {"bos", "", "start with <|begin_of_text|> (without --chat)"},
        {"special", "", "let special token strings in the text, like <|eot_id|>, become their ids"},
        {"decode", "", "decode the ids given as the remaining arguments"},
    },
    "ID",
    "examples:\n"
    "  clockwork tokenize --model tiny --text 'Hello, world!'\n"
    "  clockwork tokenize --model tiny --chat --text 'What time is it?'\n"
    "  clockwork tokenize --tokenizer tiny/original/tokenizer.model --decode 72 101 108"};

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot open for reading");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& argv) {
  const Args args = parse_args(kSpec, argv);
  if (args.help) {
    std::cout << help_text(kSpec);
    return 0;
  }
  if (args.has("model") == args.has("tokenizer")) {
    throw UsageError("give exactly one of --model DIR and --tokenizer FILE");
  }
  const bool decode = args.has("decode");
  const int inputs = int(args.has("text")) + int(args.has("file")) + int(decode);
  if (inputs != 1) throw UsageError("give exactly one of --text TEXT, --file F and --decode ID...");
  if (!decode && !args.positional().empty()) {
    throw UsageError("unexpected argument '" + args.positional().front() +
                     "' (ids are read only with --decode)");
  }
  if (args.has("system") && !args.has("chat")) throw UsageError("--system needs --chat");
  if (decode && (args.has("chat") || args.has("bos") || args.has("special"))) {
    throw UsageError("--chat, --bos and --special apply to encoding, not to --decode");
  }

  Tokenizer tokenizer = [&] {
    if (auto dir = args.get("model")) return load_tokenizer(require_model_dir(*dir));
    const std::string file = *args.get("tokenizer");
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) {
      throw std::runtime_error("tokenizer file '" + file + "' does not exist");
    }
    return Tokenizer::from_file(file);
  }();

  if (decode) {
    if (args.positional().empty()) throw UsageError("--decode needs at least one token id");
    std::vector<int32_t> ids;
    for (const std::string& word : args.positional()) {
      const auto id = parse_int(word);
      if (!id) throw UsageError("--decode: '" + word + "' is not a token id");
      if (*id < 0 || *id >= tokenizer.vocab_size()) {
        throw std::runtime_error("token id " + word +
                                 " is out of range: the tokenizer has ids 0 to " +
                                 std::to_string(tokenizer.vocab_size() - 1));
      }
      ids.push_back(static_cast<int32_t>(*id));
    }
    std::cout << tokenizer.decode(ids) << "\n";
    return 0;
  }

  const std::string text = args.has("text") ? *args.get("text") : read_text_file(*args.get("file"));
  std::vector<int32_t> ids;
  if (args.has("chat")) {
    std::vector<ChatMessage> messages;
    if (auto system = args.get("system")) messages.push_back({"system", *system});
    messages.push_back({"user", text});
    ids = tokenizer.encode_chat(messages);
  } else {
    ids = tokenizer.encode(text, args.has("special"), args.has("bos"));
  }

  std::cout << ids.size() << (ids.size() == 1 ? " token:" : " tokens:");
  for (int32_t id : ids) std::cout << " " << id;
  std::cout << "\n";
  for (int32_t id : ids) {
    const std::string& bytes = tokenizer.token_bytes(id);
    std::cout << "  " << std::string(std::max<int>(0, 7 - int(std::to_string(id).size())), ' ')
              << id << "  " << (tokenizer.is_special(id) ? bytes : quote_bytes(bytes)) << "\n";
  }
  return 0;
}

}  // namespace clockwork::cli
