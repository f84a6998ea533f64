// Tests of the safetensors reader and writer: round trips (bit-exact), sharded checkpoints, the
// bf16/f16 conversions, and one test per kind of malformed file, each checking that the error
// names the file, the tensor and the problem.
#include "harness/model/safetensors.h"
#include "harness/check/temp_dir.h"
#include "harness/model/config_check.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <algorithm>
#include <bit>
#include <csignal>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using clockwork::Checkpoint;
using clockwork::CheckpointError;
using clockwork::DType;
using clockwork::ShardingOptions;
using clockwork::TensorData;
using clockwork::TempDir;
using clockwork::TensorInfo;
using json = nlohmann::json;

// ------------------------------------------------------------------------------------------------
// Helpers
// ------------------------------------------------------------------------------------------------


// The message of the CheckpointError that `fn` throws, or a marker that makes every substring
// check fail when nothing (or something else) is thrown.
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const CheckpointError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<wrong exception type: ") + e.what() + ">";
  }
  return "<no exception thrown>";
}

std::string open_error(const fs::path& path) {
  return error_of([&] { Checkpoint::open(path); });
}

// Passes when `message` contains every one of `parts`; otherwise shows the whole message.
::testing::AssertionResult Mentions(const std::string& message,
                                    std::initializer_list<std::string> parts) {
  for (const std::string& part : parts) {
    if (message.find(part) == std::string::npos) {
      return ::testing::AssertionFailure()
             << "the error message does not mention \"" << part << "\"\n  message: " << message;
    }
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::byte> bytes_of_u16(std::initializer_list<uint16_t> values) {
  std::vector<std::byte> out(values.size() * 2);
  size_t i = 0;
  for (uint16_t v : values) std::memcpy(out.data() + 2 * i++, &v, 2);
  return out;
}

std::vector<std::byte> bytes_of_f32(const std::vector<float>& values) {
  std::vector<std::byte> out(values.size() * 4);
  if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
  return out;
}

std::vector<std::byte> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> chars((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(chars.size());
  if (!chars.empty()) std::memcpy(out.data(), chars.data(), chars.size());
  return out;
}

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Writes [length field][header][data_bytes zero bytes] by hand, for files the writer refuses to
// produce. The length field defaults to the header's real length.
void write_raw(const fs::path& path, const std::string& header, size_t data_bytes,
               std::optional<uint64_t> length_field = std::nullopt) {
  const uint64_t n = length_field.value_or(header.size());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header;
  out << std::string(data_bytes, '\0');
}

bool bits_equal(const TensorInfo& t, const std::vector<std::byte>& expected) {
  return t.nbytes == expected.size() &&
         (expected.empty() || std::memcmp(t.data, expected.data(), expected.size()) == 0);
}

// A tiny Llama-shaped set of tensors with distinct contents, in model order.
std::vector<TensorData> tiny_model_tensors(int layers) {
  std::vector<TensorData> out;
  float next = 0.0f;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = (next += 0.25f);
    out.push_back(TensorData::from_floats(name, DType::BF16, shape, values));
  };
  add("model.embed_tokens.weight", {16, 8});
  for (int i = 0; i < layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {8});
    add(p + "self_attn.q_proj.weight", {8, 8});
    add(p + "self_attn.k_proj.weight", {4, 8});
    add(p + "self_attn.v_proj.weight", {4, 8});
    add(p + "self_attn.o_proj.weight", {8, 8});
    add(p + "post_attention_layernorm.weight", {8});
    add(p + "mlp.gate_proj.weight", {12, 8});
    add(p + "mlp.up_proj.weight", {12, 8});
    add(p + "mlp.down_proj.weight", {8, 12});
  }
  add("model.norm.weight", {8});
  add("lm_head.weight", {16, 8});
  return out;
}

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// ------------------------------------------------------------------------------------------------
// Element types and conversions
// ------------------------------------------------------------------------------------------------

TEST(DType, SizesNamesAndParsing) {
  EXPECT_EQ(clockwork::dtype_size(DType::BF16), 2u);
  EXPECT_EQ(clockwork::dtype_size(DType::F16), 2u);
  EXPECT_EQ(clockwork::dtype_size(DType::F32), 4u);
  EXPECT_EQ(clockwork::dtype_name(DType::BF16), "BF16");
  EXPECT_EQ(clockwork::dtype_name(DType::F16), "F16");
  EXPECT_EQ(clockwork::dtype_name(DType::F32), "F32");

  DType d = DType::F32;
  EXPECT_TRUE(clockwork::parse_dtype("BF16", d));
  EXPECT_EQ(d, DType::BF16);
  EXPECT_TRUE(clockwork::parse_dtype("F16", d));
  EXPECT_EQ(d, DType::F16);
  // The header spells dtypes in capitals; anything else is not ours.
  EXPECT_FALSE(clockwork::parse_dtype("bf16", d));
  EXPECT_FALSE(clockwork::parse_dtype("I64", d));
  EXPECT_EQ(d, DType::F16) << "a failed parse must leave the output untouched";
  EXPECT_EQ(clockwork::shape_string({14336, 4096}), "[14336, 4096]");
  EXPECT_EQ(clockwork::shape_string({}), "[]");
}

TEST(Bf16, DecodesKnownValues) {
  using clockwork::bf16_to_float;
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0xc020), -2.5f);
  EXPECT_EQ(bf16_to_float(0x4000), 2.0f);
  EXPECT_EQ(bf16_to_float(0x3e80), 0.25f);
  EXPECT_EQ(bf16_to_float(0x0000), 0.0f);
  EXPECT_FALSE(std::signbit(bf16_to_float(0x0000)));
  EXPECT_TRUE(std::signbit(bf16_to_float(0x8000))) << "0x8000 is -0";
  EXPECT_EQ(bf16_to_float(0x7f80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16_to_float(0xff80), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(bf16_to_float(0x7fc0)));
  EXPECT_TRUE(std::isnan(bf16_to_float(0xffc1)));
  // Subnormals: the smallest is 2^-133, the largest 127 x 2^-133; 0x0080 is the smallest normal.
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16_to_float(0x007f), std::ldexp(127.0f, -133));
  EXPECT_EQ(bf16_to_float(0x0080), std::ldexp(1.0f, -126));
  EXPECT_EQ(bf16_to_float(0x8001), -std::ldexp(1.0f, -133));
  // Largest finite bf16: (2 - 2^-7) x 2^127.
  EXPECT_EQ(bf16_to_float(0x7f7f), std::ldexp(255.0f, 120));
}

TEST(Bf16, EncodeRoundsToNearestEven) {
  using clockwork::float_to_bf16;
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.5f), 0xc020);
  // bf16 keeps 7 mantissa bits, so the ulp at 1.0 is 2^-7 and the halfway point is 1 + 2^-8.
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80) << "tie goes to the even 0x3f80";
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82) << "tie goes to even 0x3f82";
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81)
      << "just above the tie rounds up";
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) - std::ldexp(1.0f, -20)), 0x3f80)
      << "just below the tie rounds down";
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80)
      << "FLT_MAX is past the last bf16 halfway point, so it rounds to infinity";
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(float_to_bf16(std::ldexp(1.0f, -133)), 0x0001) << "smallest bf16 subnormal";
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(Bf16, EncodeKeepsNaN) {
  using clockwork::float_to_bf16;
  // Only the low 16 mantissa bits set: plain truncation would give 0x7f80, i.e. infinity.
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  ASSERT_TRUE(std::isnan(low_payload_nan));
  const uint16_t b = float_to_bf16(low_payload_nan);
  EXPECT_TRUE(std::isnan(clockwork::bf16_to_float(b))) << std::hex << "got 0x" << b;
  const uint16_t negative = float_to_bf16(std::bit_cast<float>(0xffc00000u));
  EXPECT_TRUE(std::isnan(clockwork::bf16_to_float(negative)));
  EXPECT_EQ(negative & 0x8000, 0x8000) << "the sign of a NaN is kept";
}

TEST(Bf16, EveryValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = clockwork::bf16_to_float(static_cast<uint16_t>(bits));
    const uint16_t back = clockwork::float_to_bf16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(clockwork::bf16_to_float(back))) << "bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(back, bits) << "bits 0x" << std::hex << bits;
    }
  }
}

TEST(F16, DecodesKnownValues) {
  using clockwork::f16_to_float;
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc100), -2.5f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f) << "largest finite half";
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14)) << "smallest normal half";
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24)) << "smallest subnormal half";
  EXPECT_EQ(f16_to_float(0x03ff), std::ldexp(1023.0f, -24)) << "largest subnormal half";
  EXPECT_EQ(f16_to_float(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::signbit(f16_to_float(0x8000)));
  EXPECT_EQ(f16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(f16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7c01)));
}

TEST(F16, EncodeRoundsToNearestEven) {
  using clockwork::float_to_f16;
  EXPECT_EQ(float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(float_to_f16(-2.5f), 0xc100);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff) << "below the halfway point to 65536";
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00) << "the tie rounds to even, which is infinity";
  // Half keeps 10 mantissa bits: the halfway point above 1.0 is 1 + 2^-11.
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // Subnormal range, in units of 2^-24: 0.5 unit ties to 0, 1.5 units ties to 2.
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_f16(std::ldexp(1023.75f, -24)), 0x0400) << "rounds up into the normals";
  EXPECT_EQ(float_to_f16(-1e-10f), 0x8000);
  EXPECT_TRUE(std::isnan(clockwork::f16_to_float(float_to_f16(std::nanf("")))));
  EXPECT_TRUE(std::isnan(clockwork::f16_to_float(float_to_f16(std::bit_cast<float>(0x7f800001u)))))
      << "a NaN whose payload sits in the dropped bits must not become infinity";
}

TEST(F16, EveryValueRoundTrips) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const float f = clockwork::f16_to_float(static_cast<uint16_t>(bits));
    const uint16_t back = clockwork::float_to_f16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(clockwork::f16_to_float(back))) << "bits 0x" << std::hex << bits;
    } else {
      ASSERT_EQ(back, bits) << "bits 0x" << std::hex << bits;
    }
  }
}

// ------------------------------------------------------------------------------------------------
// Writing and reading back
// ------------------------------------------------------------------------------------------------

class SafetensorsTest : public ::testing::Test {
 protected:
  TempDir dir;
};

TEST_F(SafetensorsTest, SingleFileRoundTripIsBitExact) {
  const float nan_with_payload = std::bit_cast<float>(0x7fa12345u);
  const std::vector<float> f32_values = {
      0.5f, -1.25f, 3.0e38f, -0.0f, nan_with_payload, std::numeric_limits<float>::denorm_min()};
  // bf16 bits: 1.0, -2.5, NaN, +inf, -inf, the smallest subnormal, 0.
  const auto bf16_bytes = bytes_of_u16({0x3f80, 0xc020, 0x7fc0, 0x7f80, 0xff80, 0x0001, 0x0000});
  const auto f16_bytes = bytes_of_u16({0x3c00, 0xc100, 0x7bff, 0x0001, 0x7c00, 0x8000});
  std::vector<TensorData> tensors = {
      {"weights.f32", DType::F32, {2, 3}, bytes_of_f32(f32_values)},
      {"weights.bf16", DType::BF16, {7}, bf16_bytes},
      {"weights.f16", DType::F16, {3, 2}, f16_bytes},
      {"scalar", DType::F32, {}, bytes_of_f32({42.0f})},
      {"empty", DType::BF16, {0, 4}, {}},
  };
  const fs::path file = dir / "tiny.safetensors";
  clockwork::write_safetensors(file, tensors, {{"format", "pt"}, {"note", "unit test"}});

  const Checkpoint ckpt = Checkpoint::open(file);
  EXPECT_EQ(ckpt.names(), (std::vector<std::string>{"empty", "scalar", "weights.bf16",
                                                    "weights.f16", "weights.f32"}));
  EXPECT_EQ(ckpt.size(), 5u);
  for (const TensorData& expected : tensors) {
    SCOPED_TRACE(expected.name);
    ASSERT_TRUE(ckpt.contains(expected.name));
    const TensorInfo& t = ckpt.get(expected.name);
    EXPECT_EQ(t.name, expected.name);
    EXPECT_EQ(t.dtype, expected.dtype);
    EXPECT_EQ(t.shape, expected.shape);
    EXPECT_EQ(t.file, file.string());
    EXPECT_TRUE(bits_equal(t, expected.bytes)) << "tensor bytes differ after the round trip";
  }
  EXPECT_EQ(ckpt.get("scalar").numel(), 1);
  EXPECT_EQ(ckpt.get("empty").numel(), 0);
  EXPECT_EQ(ckpt.get("weights.f16").describe(), "F16 [3, 2]");

  // bf16 and f16 decode to the values their bits stand for.
  const std::vector<float> bf16 = clockwork::to_float32(ckpt.get("weights.bf16"));
  ASSERT_EQ(bf16.size(), 7u);
  EXPECT_EQ(bf16[0], 1.0f);
  EXPECT_EQ(bf16[1], -2.5f);
  EXPECT_TRUE(std::isnan(bf16[2]));
  EXPECT_EQ(bf16[3], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16[4], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(bf16[5], std::ldexp(1.0f, -133));
  EXPECT_EQ(bf16[6], 0.0f);
  const std::vector<float> f16 = clockwork::to_float32(ckpt.get("weights.f16"));
  EXPECT_EQ(f16, (std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24),
                                     std::numeric_limits<float>::infinity(), -0.0f}));
  const std::vector<float> f32 = clockwork::to_float32(ckpt.get("weights.f32"));
  ASSERT_EQ(f32.size(), f32_values.size());
  EXPECT_EQ(std::memcmp(f32.data(), f32_values.data(), 4 * f32.size()), 0)
      << "F32 must be copied bit for bit, NaN payload included";

  EXPECT_EQ(ckpt.total_bytes(), 6u * 4 + 7 * 2 + 6 * 2 + 4 + 0);
  EXPECT_EQ(ckpt.num_parameters(), 6u + 7 + 6 + 1 + 0);
  ASSERT_EQ(ckpt.files().size(), 1u);
  EXPECT_EQ(ckpt.files()[0].path.string(), file.string());
  EXPECT_EQ(ckpt.files()[0].num_tensors, 5u);
  EXPECT_EQ(ckpt.files()[0].file_bytes, fs::file_size(file));
  EXPECT_EQ(ckpt.files()[0].metadata.at("note"), "unit test");
  EXPECT_EQ(ckpt.files()[0].metadata.at("format"), "pt");
}

TEST_F(SafetensorsTest, FromFloatsEncodesEachDtype) {
  const std::vector<float> values = {1.0f, -2.5f, 0.1f};
  const TensorData bf16 = TensorData::from_floats("a", DType::BF16, {3}, values);
  EXPECT_EQ(bf16.bytes, bytes_of_u16({0x3f80, 0xc020, clockwork::float_to_bf16(0.1f)}));
  const TensorData f16 = TensorData::from_floats("b", DType::F16, {1, 3}, values);
  EXPECT_EQ(f16.bytes, bytes_of_u16({0x3c00, 0xc100, clockwork::float_to_f16(0.1f)}));
  const TensorData f32 = TensorData::from_floats("c", DType::F32, {3, 1}, values);
  EXPECT_EQ(f32.bytes, bytes_of_f32(values));
  EXPECT_TRUE(Mentions(error_of([&] {
                         TensorData::from_floats("w", DType::F32, {2, 2}, values);
                       }),
                       {"tensor 'w'", "[2, 2]", "3 values"}));
}

TEST_F(SafetensorsTest, ToFloat32ChecksTheOutputSize) {
  clockwork::write_safetensors(dir / "a.safetensors",
                               {TensorData::from_floats("w", DType::BF16, {2}, {1.0f, 2.0f})});
  const Checkpoint ckpt = Checkpoint::open(dir / "a.safetensors");
  std::vector<float> out(3);
  EXPECT_TRUE(Mentions(error_of([&] { clockwork::to_float32(ckpt.get("w"), out); }),
                       {"tensor 'w'", "2 elements", "holds 3"}));
  out.resize(2);
  clockwork::to_float32(ckpt.get("w"), out);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 2.0f}));
}

TEST_F(SafetensorsTest, OpensADirectoryWithModelSafetensors) {
  clockwork::write_safetensors(dir / "model.safetensors",
                               {TensorData::from_floats("w", DType::F32, {2}, {1.0f, 2.0f})});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.names(), std::vector<std::string>{"w"});
  EXPECT_EQ(ckpt.files().at(0).path.string(), (dir / "model.safetensors").string());
  EXPECT_EQ(ckpt.path().string(), dir.path().string());
}

TEST_F(SafetensorsTest, WriterPadsTheHeaderAndAlignsTensors) {
  // An odd-length bf16 tensor next to f32 ones: with a naive order the f32 data would start at
  // an odd multiple of 2 bytes.
  const std::vector<TensorData> tensors = {
      TensorData::from_floats("a.bf16", DType::BF16, {3}, {1.0f, 2.0f, 3.0f}),
      TensorData::from_floats("b.f32", DType::F32, {1}, {4.0f}),
      TensorData::from_floats("c.f32", DType::F32, {2}, {5.0f, 6.0f}),
  };
  const fs::path file = dir / "aligned.safetensors";
  clockwork::write_safetensors(file, tensors, {});
  const std::vector<std::byte> raw = read_bytes(file);
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);
  EXPECT_EQ(header_len % 8, 0u) << "the data area must start on an 8-byte boundary";
  const std::string header(reinterpret_cast<const char*>(raw.data()) + 8, header_len);
  EXPECT_EQ(header.front(), '{');
  const size_t last_brace = header.rfind('}');
  EXPECT_EQ(header.find_first_not_of(' ', last_brace + 1), std::string::npos)
      << "padding after the JSON must be spaces: [" << header << "]";
  EXPECT_LT(header.size() - last_brace - 1, 8u) << "at most 7 bytes of padding";

  const json j = json::parse(header);
  EXPECT_FALSE(j.contains("__metadata__")) << "empty metadata is left out";
  for (const auto& [name, entry] : j.items()) {
    const uint64_t begin = entry["data_offsets"][0];
    const uint64_t size = entry["dtype"] == "F32" ? 4 : 2;
    EXPECT_EQ(begin % size, 0u) << name << " is not aligned to its element size";
  }
  EXPECT_EQ(j["b.f32"]["data_offsets"], json::array({0, 4})) << "widest dtype first, then name";
  EXPECT_EQ(j["c.f32"]["data_offsets"], json::array({4, 12}));
  EXPECT_EQ(j["a.bf16"]["data_offsets"], json::array({12, 18}));
  EXPECT_EQ(raw.size(), 8 + header_len + 18);
}

TEST_F(SafetensorsTest, WriterMatchesTheReferenceLayout) {
  // The header the format's reference implementation writes for these tensors: metadata first,
  // 4-byte dtypes before 2-byte ones, names in order within a dtype size, compact JSON, spaces
  // up to a multiple of 8.
  const std::string expected_header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("s":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("x.f32":{"dtype":"F32","shape":[2,3],"data_offsets":[4,28]},)"
      R"("z":{"dtype":"F32","shape":[0],"data_offsets":[28,28]},)"
      R"("y.f16":{"dtype":"F16","shape":[3],"data_offsets":[28,34]}}      )";
  const fs::path file = dir / "reference.safetensors";
  clockwork::write_safetensors(
      file,
      {TensorData::from_floats("y.f16", DType::F16, {3}, {1.0f, -2.5f, 65504.0f}),
       TensorData::from_floats("x.f32", DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5}),
       TensorData{"z", DType::F32, {0}, {}}, TensorData::from_floats("s", DType::F32, {}, {7.0f})});
  const std::vector<std::byte> raw = read_bytes(file);
  ASSERT_EQ(raw.size(), 8 + expected_header.size() + 34);
  uint64_t header_len = 0;
  std::memcpy(&header_len, raw.data(), 8);
  EXPECT_EQ(header_len, 264u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(raw.data()) + 8, header_len),
            expected_header);
}

TEST_F(SafetensorsTest, WriterOutputDoesNotDependOnInputOrder) {
  std::vector<TensorData> tensors = tiny_model_tensors(2);
  clockwork::write_safetensors(dir / "forward.safetensors", tensors);
  std::reverse(tensors.begin(), tensors.end());
  clockwork::write_safetensors(dir / "reversed.safetensors", tensors);
  EXPECT_EQ(read_bytes(dir / "forward.safetensors"), read_bytes(dir / "reversed.safetensors"));
}

TEST_F(SafetensorsTest, WriterRejectsBadTensorsAndLeavesNoFile) {
  const fs::path file = dir / "bad.safetensors";
  TensorData short_bytes{"model.norm.weight", DType::BF16, {4096}, std::vector<std::byte>(100)};
  EXPECT_TRUE(Mentions(
      error_of([&] { clockwork::write_safetensors(file, {short_bytes}); }),
      {file.string(), "tensor 'model.norm.weight'", "100 bytes", "2 bytes x 4096 = 8192"}));
  EXPECT_FALSE(fs::exists(file));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "no temporary file may be left behind";

  const TensorData w = TensorData::from_floats("w", DType::F32, {1}, {1.0f});
  EXPECT_TRUE(Mentions(error_of([&] {
                         clockwork::write_safetensors(file, {w, w});
                       }),
                       {"tensor 'w'", "twice"}));
  const TensorData reserved = TensorData::from_floats("__metadata__", DType::F32, {1}, {1.0f});
  EXPECT_TRUE(Mentions(error_of([&] { clockwork::write_safetensors(file, {reserved}); }),
                       {"'__metadata__'", "reserved"}));
  const TensorData unnamed = TensorData::from_floats("", DType::F32, {1}, {1.0f});
  EXPECT_TRUE(
      Mentions(error_of([&] { clockwork::write_safetensors(file, {unnamed}); }), {"empty name"}));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST_F(SafetensorsTest, FailedWriteKeepsThePreviousFile) {
  const fs::path file = dir / "model.safetensors";
  clockwork::write_safetensors(file, {TensorData::from_floats("w", DType::F32, {1}, {1.0f})});
  const std::vector<std::byte> before = read_bytes(file);
  TensorData broken{"w", DType::F32, {2}, std::vector<std::byte>(4)};
  EXPECT_THROW(clockwork::write_safetensors(file, {broken}), CheckpointError);
  EXPECT_EQ(read_bytes(file), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST_F(SafetensorsTest, AnIoErrorMidWriteLeavesNothingBehind) {
  // Cap the process's file size so that write() fails part-way (EFBIG instead of SIGXFSZ).
  struct FileSizeCap {
    rlimit saved{};
    void (*saved_handler)(int) = nullptr;
    explicit FileSizeCap(rlim_t bytes) {
      getrlimit(RLIMIT_FSIZE, &saved);
      saved_handler = std::signal(SIGXFSZ, SIG_IGN);
      rlimit capped = saved;
      capped.rlim_cur = bytes;
      setrlimit(RLIMIT_FSIZE, &capped);
    }
    ~FileSizeCap() {
      setrlimit(RLIMIT_FSIZE, &saved);
      std::signal(SIGXFSZ, saved_handler);
    }
  };
  const fs::path file = dir / "big.safetensors";
  std::string message;
  {
    FileSizeCap cap(4096);
    message = error_of([&] {
      clockwork::write_safetensors(
          file, {TensorData{"w", DType::F32, {4096}, std::vector<std::byte>(4 * 4096)}});
    });
  }
  EXPECT_TRUE(Mentions(message, {file.string(), "write failed"}));
  EXPECT_TRUE(fs::is_empty(dir.path())) << "the partial temporary file must be removed";
}

TEST_F(SafetensorsTest, WriterReportsAMissingDirectory) {
  const fs::path file = dir / "no-such-dir" / "x.safetensors";
  EXPECT_TRUE(Mentions(error_of([&] {
                         clockwork::write_safetensors(
                             file, {TensorData::from_floats("w", DType::F32, {1}, {1.0f})});
                       }),
                       {file.string(), "cannot create"}));
}

// ------------------------------------------------------------------------------------------------
// Sharded checkpoints
// ------------------------------------------------------------------------------------------------

TEST_F(SafetensorsTest, ShardedRoundTripByMaxShardBytes) {
  const std::vector<TensorData> tensors = tiny_model_tensors(3);
  uint64_t total = 0;
  for (const TensorData& t : tensors) total += t.bytes.size();
  // Each layer holds 992 bytes of bf16 weights; 1,200 bytes per shard gives several shards.
  const auto shards =
      clockwork::write_sharded(dir.path(), tensors, ShardingOptions{.max_shard_bytes = 1200});
  ASSERT_GE(shards.size(), 3u);
  const size_t n = shards.size();
  for (size_t k = 0; k < n; ++k) {
    char expected[64];
    std::snprintf(expected, sizeof expected, "model-%05zu-of-%05zu.safetensors", k + 1, n);
    EXPECT_EQ(shards[k].string(), (dir / expected).string());
    EXPECT_TRUE(fs::exists(shards[k]));
  }
  // No shard exceeds the limit unless it holds a single tensor.
  for (const fs::path& shard : shards) {
    const Checkpoint one = Checkpoint::open(shard);
    EXPECT_TRUE(one.total_bytes() <= 1200 || one.size() == 1) << shard;
  }

  const json index = read_json(dir / "model.safetensors.index.json");
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  ASSERT_EQ(index["weight_map"].size(), tensors.size());
  EXPECT_EQ(index["weight_map"]["model.embed_tokens.weight"],
            "model-00001-of-0000" + std::to_string(n) + ".safetensors")
      << "tensors keep the model order, so the embedding is in the first shard";
  EXPECT_EQ(index["weight_map"]["lm_head.weight"], shards.back().filename().string());

  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_EQ(ckpt.size(), tensors.size());
  EXPECT_EQ(ckpt.files().size(), n);
  EXPECT_EQ(ckpt.total_bytes(), total);
  for (const TensorData& expected : tensors) {
    SCOPED_TRACE(expected.name);
    const TensorInfo& t = ckpt.get(expected.name, expected.dtype, expected.shape);
    EXPECT_TRUE(bits_equal(t, expected.bytes));
    EXPECT_EQ(fs::path(t.file).filename().string(),
              index["weight_map"][expected.name].get<std::string>());
  }
}

TEST_F(SafetensorsTest, ShardedByCountMakesExactlyThatManyShards) {
  const std::vector<TensorData> tensors = tiny_model_tensors(2);
  for (size_t count : {1u, 2u, 4u, 7u}) {
    SCOPED_TRACE("num_shards = " + std::to_string(count));
    TempDir out;
    const auto shards =
        clockwork::write_sharded(out.path(), tensors, ShardingOptions{.num_shards = count});
    ASSERT_EQ(shards.size(), count);
    const Checkpoint ckpt = Checkpoint::open(out.path());
    ASSERT_EQ(ckpt.files().size(), count);
    for (const auto& f : ckpt.files()) EXPECT_GT(f.num_tensors, 0u) << f.path;
    EXPECT_EQ(ckpt.size(), tensors.size());
  }
  // One tensor holding most of the bytes spans several quarter points; the shards around it must
  // still get a tensor each.
  {
    TempDir out;
    const std::vector<TensorData> lopsided = {
        TensorData{"a", DType::F32, {1}, std::vector<std::byte>(4)},
        TensorData{"big", DType::F32, {1000}, std::vector<std::byte>(4000)},
        TensorData{"c", DType::F32, {1}, std::vector<std::byte>(4)},
        TensorData{"d", DType::F32, {1}, std::vector<std::byte>(4)},
    };
    const auto shards =
        clockwork::write_sharded(out.path(), lopsided, ShardingOptions{.num_shards = 4});
    ASSERT_EQ(shards.size(), 4u);
    for (const fs::path& shard : shards) EXPECT_EQ(Checkpoint::open(shard).size(), 1u) << shard;
  }
  // Four shards of a 2-layer model: the largest tensor is 256 of 2,512 bytes, so a balanced split
  // keeps every shard well under half of the total.
  TempDir out;
  const auto shards =
      clockwork::write_sharded(out.path(), tensors, ShardingOptions{.num_shards = 4});
  const uint64_t total = Checkpoint::open(out.path()).total_bytes();
  for (const fs::path& shard : shards) {
    EXPECT_LT(Checkpoint::open(shard).total_bytes(), total / 2)
        << shard << " is far from a quarter";
  }
}

TEST_F(SafetensorsTest, WriteShardedRejectsBadOptions) {
  const std::vector<TensorData> tensors = tiny_model_tensors(1);
  EXPECT_TRUE(Mentions(error_of([&] { clockwork::write_sharded(dir.path(), tensors, {}); }),
                       {"exactly one of max_shard_bytes and num_shards"}));
  EXPECT_TRUE(Mentions(error_of([&] {
                         clockwork::write_sharded(dir.path(), tensors,
                                                  {.max_shard_bytes = 10, .num_shards = 2});
                       }),
                       {"exactly one"}));
  EXPECT_TRUE(Mentions(
      error_of([&] { clockwork::write_sharded(dir.path(), tensors, {.num_shards = 100}); }),
      {"cannot split", "into 100"}));
  std::vector<TensorData> twice = tensors;
  twice.push_back(tensors.front());
  EXPECT_TRUE(
      Mentions(error_of([&] { clockwork::write_sharded(dir.path(), twice, {.num_shards = 2}); }),
               {"tensor 'model.embed_tokens.weight'", "twice"}));
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

// Writes a valid two-shard checkpoint and returns the index JSON for the test to alter.
json write_two_shards(const fs::path& dir) {
  clockwork::write_sharded(dir, tiny_model_tensors(2), ShardingOptions{.num_shards = 2});
  return read_json(dir / "model.safetensors.index.json");
}

const char* const kShard1 = "model-00001-of-00002.safetensors";
const char* const kShard2 = "model-00002-of-00002.safetensors";

TEST_F(SafetensorsTest, IndexNamingAMissingShard) {
  write_two_shards(dir.path());
  fs::remove(dir / kShard2);
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / "model.safetensors.index.json").string(), "lm_head.weight",
                        std::string("shard '") + kShard2 + "'", "does not exist"}));
}

// An index that forgets a whole shard of its series would drop that shard's tensors without a
// word; the loader names the shard left out.
TEST_F(SafetensorsTest, IndexLeavingOutAShardOfItsSeries) {
  json index = write_two_shards(dir.path());
  json only_first = json::object();
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (shard == kShard1) only_first[name] = shard;
  }
  ASSERT_FALSE(only_first.empty());
  index["weight_map"] = only_first;
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / "model.safetensors.index.json").string(),
                        std::string("none to '") + kShard2 + "'", "shard 2 of the 2"}));
  // A shard number outside its series is refused too.
  index["weight_map"] = json{{"a", "model-00003-of-00002.safetensors"}};
  clockwork::write_safetensors(dir / "model-00003-of-00002.safetensors",
                               {TensorData::from_floats("a", DType::F32, {1}, {1.0f})});
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()), {"tensor 'a'", "number 3 is outside 1..2"}));
}

// A shard name the file system refuses (over NAME_MAX, 255 bytes on Linux) is reported like a
// missing shard, naming the index and the tensor, instead of escaping as a filesystem_error.
TEST_F(SafetensorsTest, IndexNamingAShardTheFileSystemRefuses) {
  json index = write_two_shards(dir.path());
  const std::string long_name(300, 'x');
  index["weight_map"]["lm_head.weight"] = long_name;
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / "model.safetensors.index.json").string(), "lm_head.weight",
                        "cannot be opened", "File name too long"}));
}

TEST_F(SafetensorsTest, TensorMissingFromItsShard) {
  json index = write_two_shards(dir.path());
  index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = kShard1;
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / kShard1).string(), "tensor 'model.layers.9.mlp.up_proj.weight'",
                        "is missing", "says this shard holds it"}));
}

TEST_F(SafetensorsTest, TensorInADifferentShardThanTheIndexSays) {
  json index = write_two_shards(dir.path());
  ASSERT_EQ(index["weight_map"]["model.embed_tokens.weight"], kShard1);
  index["weight_map"]["model.embed_tokens.weight"] = kShard2;
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / kShard1).string(), "tensor 'model.embed_tokens.weight'",
                        std::string("maps it to '") + kShard2 + "'"}));
}

TEST_F(SafetensorsTest, TensorStoredInTwoShards) {
  const TensorData a = TensorData::from_floats("a", DType::F32, {1}, {1.0f});
  const TensorData b = TensorData::from_floats("b", DType::F32, {1}, {2.0f});
  clockwork::write_safetensors(dir / kShard1, {a, b});
  clockwork::write_safetensors(dir / kShard2, {b});
  write_text(dir / "model.safetensors.index.json",
             json{{"weight_map", {{"a", kShard1}, {"b", kShard2}}}}.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()), {"tensor 'b'", "two shards", kShard1, kShard2}));
}

TEST_F(SafetensorsTest, ShardTensorNotListedInTheIndex) {
  json index = write_two_shards(dir.path());
  index["weight_map"].erase("model.norm.weight");
  write_text(dir / "model.safetensors.index.json", index.dump());
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / kShard2).string(), "tensor 'model.norm.weight'", "not listed"}));
}

TEST_F(SafetensorsTest, MalformedIndexFiles) {
  const fs::path index = dir / "model.safetensors.index.json";
  write_two_shards(dir.path());

  write_text(index, R"({"metadata": {"total_size": 4}})");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "missing 'weight_map'"}));
  write_text(index, R"({"weight_map": {}})");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "'weight_map' is empty"}));
  write_text(index, R"({"weight_map": {"a": 3}})");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "weight_map['a']", "number"}));
  write_text(index, R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {"'../elsewhere.safetensors'", "plain file name"}));
  write_text(index, R"({"weight_map": {"a": "x", "a": "y"}})");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "key 'weight_map.a': appears twice"}));
  write_text(index, R"({"weight_map": )");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "not valid JSON"}));
  write_text(index, "[]");
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "JSON array"}));
}

TEST_F(SafetensorsTest, ABrokenShardIsNamedInTheError) {
  write_two_shards(dir.path());
  fs::resize_file(dir / kShard2, fs::file_size(dir / kShard2) - 2);
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {(dir / kShard2).string(), "ends beyond the data area", "truncated"}));
}

// ------------------------------------------------------------------------------------------------
// Opening and looking up
// ------------------------------------------------------------------------------------------------

TEST_F(SafetensorsTest, OpenReportsMissingPathsAndEmptyDirectories) {
  EXPECT_TRUE(Mentions(open_error(dir / "nothing-here"),
                       {(dir / "nothing-here").string(), "no such file or directory"}));
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {dir.path().string(), "model.safetensors.index.json", "model.safetensors"}));
}

TEST_F(SafetensorsTest, MissingTensorSuggestsTheClosestName) {
  clockwork::write_safetensors(dir / "model.safetensors", tiny_model_tensors(2));
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  EXPECT_FALSE(ckpt.contains("layers.1.self_attn.q_proj.weight"));
  EXPECT_TRUE(Mentions(error_of([&] { ckpt.get("layers.1.self_attn.q_proj.weight"); }),
                       {dir.path().string(), "no tensor named 'layers.1.self_attn.q_proj.weight'",
                        "did you mean 'model.layers.1.self_attn.q_proj.weight'"}));
  EXPECT_TRUE(Mentions(error_of([&] { ckpt.get("model.layers.0.mlp.upproj.weight"); }),
                       {"did you mean 'model.layers.0.mlp.up_proj.weight'"}));
}

TEST_F(SafetensorsTest, GetChecksDtypeAndShape) {
  clockwork::write_safetensors(dir / "model.safetensors",
                               {TensorData{"w", DType::BF16, {4, 8}, std::vector<std::byte>(64)}});
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  const std::string file = (dir / "model.safetensors").string();

  EXPECT_EQ(&ckpt.get("w", DType::BF16, {4, 8}), &ckpt.get("w"));
  EXPECT_TRUE(Mentions(
      error_of([&] {
        ckpt.get("w", DType::BF16, {8, 4});
      }),
      {file, "tensor 'w'", "wrong shape", "Expected: BF16 [8, 4]", "Actual:   BF16 [4, 8]"}));
  EXPECT_TRUE(Mentions(
      error_of([&] {
        ckpt.get("w", DType::F32, {4, 8});
      }),
      {file, "tensor 'w'", "wrong dtype", "Expected: F32 [4, 8]", "Actual:   BF16 [4, 8]"}));
  EXPECT_TRUE(Mentions(error_of([&] { ckpt.get("w", DType::F16, {32}); }),
                       {"wrong dtype and shape", "Expected: F16 [32]"}));
  EXPECT_TRUE(Mentions(error_of([&] {
                         ckpt.get("v", DType::BF16, {4, 8});
                       }),
                       {"no tensor named 'v'", "did you mean 'w'"}));
}

TEST_F(SafetensorsTest, CheckpointCanBeMovedWithoutInvalidatingTensors) {
  clockwork::write_safetensors(dir / "model.safetensors",
                               {TensorData::from_floats("w", DType::F32, {2}, {3.0f, 4.0f})});
  Checkpoint first = Checkpoint::open(dir.path());
  const TensorInfo* before = &first.get("w");
  Checkpoint second = std::move(first);
  EXPECT_EQ(&second.get("w"), before);
  EXPECT_EQ(clockwork::to_float32(second.get("w")), (std::vector<float>{3.0f, 4.0f}));
}

// ------------------------------------------------------------------------------------------------
// Malformed files: the length field and truncation
// ------------------------------------------------------------------------------------------------

TEST_F(SafetensorsTest, FileShorterThanTheLengthField) {
  const fs::path file = dir / "short.safetensors";
  write_text(file, "abcde");
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "is 5 bytes", "at least 8 bytes"}));
  write_text(file, "");
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "is 0 bytes"}));
}

TEST_F(SafetensorsTest, HeaderLengthOverTheLimit) {
  const fs::path file = dir / "huge.safetensors";
  write_raw(file, "{}", 0, uint64_t{1} << 40);
  EXPECT_TRUE(
      Mentions(open_error(file), {file.string(), "1099511627776 bytes", "100000000-byte limit"}));
}

TEST_F(SafetensorsTest, HeaderLengthLargerThanTheFile) {
  const fs::path file = dir / "long.safetensors";
  write_raw(file, "{}", 0, 1000);
  EXPECT_TRUE(Mentions(open_error(file),
                       {file.string(), "says 1000 bytes", "only 2 bytes follow", "truncated"}));
}

TEST_F(SafetensorsTest, HeaderCutShort) {
  const fs::path file = dir / "cut.safetensors";
  clockwork::write_safetensors(file, tiny_model_tensors(1));
  uint64_t header_len = 0;
  std::memcpy(&header_len, read_bytes(file).data(), 8);
  fs::resize_file(file, 8 + header_len / 2);
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "says " + std::to_string(header_len),
                                          "only " + std::to_string(header_len / 2), "truncated"}));
}

TEST_F(SafetensorsTest, DataCutShort) {
  const fs::path file = dir / "cut.safetensors";
  // One tensor, so the truncation hits a known name.
  clockwork::write_safetensors(file, {TensorData::from_floats("w", DType::F32, {4}, {1, 2, 3, 4})});
  fs::resize_file(file, fs::file_size(file) - 3);
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "tensor 'w'", "data_offsets [0, 16]",
                                          "data area, which has 13 bytes", "truncated"}));
}

// ------------------------------------------------------------------------------------------------
// Malformed headers: one declarative case each
// ------------------------------------------------------------------------------------------------

struct MalformedHeader {
  const char* name;                   // the test's name
  std::string header;                 // the JSON header, written verbatim
  size_t data_bytes;                  // size of the data area that follows
  std::vector<std::string> expected;  // substrings the error must contain (the file is added)
};

// Names the case in failure output instead of dumping its bytes.
void PrintTo(const MalformedHeader& c, std::ostream* os) {
  *os << c.name;
}

class MalformedHeaderTest : public ::testing::TestWithParam<MalformedHeader> {};

TEST_P(MalformedHeaderTest, IsRejectedWithAClearMessage) {
  const MalformedHeader& c = GetParam();
  TempDir dir;
  const fs::path file = dir / "model-00002-of-00004.safetensors";
  write_raw(file, c.header, c.data_bytes);
  const std::string message = open_error(file);
  EXPECT_TRUE(Mentions(message, {file.string()}));
  for (const std::string& part : c.expected) EXPECT_TRUE(Mentions(message, {part}));
}

const MalformedHeader kMalformedHeaders[] = {
    {"InvalidJson", R"({"w": {"dtype": "F32",)", 0, {"header is not valid JSON"}},
    {"EmptyHeader", "", 0, {"header is not valid JSON"}},
    {"NotAnObject", "[1, 2]", 0, {"header is a JSON array", "expected an object"}},
    {"EntryNotAnObject", R"({"w": 3})", 0, {"tensor 'w'", "header entry is a JSON number"}},
    {"MissingDtype",
     R"({"w": {"shape": [2], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "missing 'dtype'", "BF16, F16, F32"}},
    {"MissingShape",
     R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "missing 'shape'"}},
    {"MissingDataOffsets",
     R"({"w": {"dtype": "F32", "shape": [2]}})",
     8,
     {"tensor 'w'", "missing 'data_offsets'"}},
    {"UnknownDtype",
     R"({"w": {"dtype": "Q9", "shape": [2], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "dtype 'Q9' is not supported", "supported: BF16, F16, F32"}},
    {"UnsupportedDtype",
     R"({"ids": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'ids'", "dtype 'I64' is not supported"}},
    {"DtypeNotAString",
     R"({"w": {"dtype": 16, "shape": [2], "data_offsets": [0, 4]}})",
     4,
     {"tensor 'w'", "'dtype' is a JSON number"}},
    {"NegativeShape",
     R"({"w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}})",
     0,
     {"tensor 'w'", "shape [2,-3]", "negative dimension -3"}},
    {"FractionalShape",
     R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "entry 2.5", "non-negative integers"}},
    {"ShapeNotAList",
     R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "'shape' is a JSON string"}},
    {"ShapeOverflows",
     R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "more bytes than fit in 64 bits"}},
    {"OffsetsNotAPair",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8]}})",
     8,
     {"tensor 'w'", "'data_offsets' is [8]", "[begin, end]"}},
    {"NegativeOffset",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [-8, 0]}})",
     8,
     {"tensor 'w'", "'data_offsets' is [-8,0]", "non-negative"}},
    {"BeginAfterEnd",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
     8,
     {"tensor 'w'", "data_offsets [8, 0] has begin > end"}},
    {"LengthMismatch",
     R"({"model.layers.3.mlp.up_proj.weight":
         {"dtype": "BF16", "shape": [14336, 4096], "data_offsets": [0, 1000]}})",
     1000,
     {"tensor 'model.layers.3.mlp.up_proj.weight'",
      "data_offsets [0, 1000] length 1000 != 2 bytes x 14336 x 4096 = 117440512 bytes"}},
    {"OffsetsOutOfBounds",
     R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
     16,
     {"tensor 'w'", "data_offsets [8, 24] ends beyond the data area, which has 16 bytes"}},
    {"OverlappingTensors",
     R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
     24,
     {"tensor 'b' (data_offsets [8, 24]) overlaps tensor 'a' (data_offsets [0, 16])"}},
    {"SameRangeTwice",
     R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'b' (data_offsets [0, 8]) overlaps tensor 'a'"}},
    {"GapBetweenTensors",
     R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
         "b": {"dtype": "F32", "shape": [4], "data_offsets": [20, 36]}})",
     36,
     {"gap of 4 bytes between tensor 'a' (data_offsets [0, 16]) and tensor 'b' (data_offsets "
      "[20, 36])"}},
    {"DataNotStartingAtZero",
     R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [4, 20]}})",
     20,
     {"tensor 'a'", "starts at byte 4"}},
    {"TrailingBytes",
     R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
     20,
     {"data area has 20 bytes", "end at byte 16", "4 trailing bytes"}},
    {"DuplicateTensorName",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
     16,
     {"key 'w': appears twice"}},
    {"DuplicateKeyInsideAnEntry",
     R"({"w": {"dtype": "F32", "dtype": "F16", "shape": [2], "data_offsets": [0, 8]}})",
     8,
     {"key 'w.dtype': appears twice"}},
    {"MetadataNotStrings",
     R"({"__metadata__": {"format": 1},
         "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})",
     8,
     {"__metadata__ key 'format'", "expected a string"}},
    {"MetadataNotAnObject", R"({"__metadata__": "pt"})", 0, {"__metadata__ is a JSON string"}},
    // Untrusted input: each refused with the key where the problem sits, before it can overflow
    // the stack, exhaust memory or be silently ignored.
    {"DepthBomb",
     R"({"__metadata__": {"format": )" + std::string(100'000, '[') + std::string(100'000, ']') +
         "}}",
     0,
     {"key '__metadata__.format[0][0]", "levels)", "nested deeper than 16 levels"}},
    {"NulByteThenGarbage",
     std::string(R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})") +
         std::string("\0garbage", 8),
     8,
     {"NUL byte at offset 61", "line 1, column 62"}},
    {"TextAfterTheHeader",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}} {"x": 1})",
     8,
     {"unexpected text after the JSON value", "column 63"}},
    {"LineBreakPaddingTheHeader",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})" "\n  ",
     8,
     {"only spaces may pad a safetensors header"}},
    {"NumberBeyondADouble",
     R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8e999]}})",
     8,
     {"key 'w.data_offsets[1]'", "too large for a double"}},
    {"OverflowingShape",
     R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "shape [4294967296, 4294967296] has more bytes than fit in 64 bits"}},
    {"ShapeDimensionBeyond64Bits",
     R"({"w": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 8]}})",
     8,
     {"tensor 'w'", "dimension too large for 64 bits"}},
};

INSTANTIATE_TEST_SUITE_P(Safetensors, MalformedHeaderTest, ::testing::ValuesIn(kMalformedHeaders),
                         [](const ::testing::TestParamInfo<MalformedHeader>& param_info) {
                           return std::string(param_info.param.name);
                         });

TEST_F(SafetensorsTest, HeaderLengthClaimingATerabyteIsRefusedBeforeReading) {
  // 2^40 bytes of header: refused from the length field alone, nothing is allocated.
  const fs::path file = dir / "huge.safetensors";
  write_raw(file, "{}", 0, uint64_t{1} << 40);
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "header length field says 1099511627776",
                                          "100000000-byte limit"}));
}

TEST_F(SafetensorsTest, HeaderWithMoreTensorsThanTheLimit) {
  // One file may describe at most 65,536 tensors; the count is checked while the header is
  // parsed, so a header listing millions of tensors stops at the first one over.
  std::string header = "{";
  for (int i = 0; i <= 65536; ++i) {
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},";
  }
  header.back() = '}';
  const fs::path file = dir / "many.safetensors";
  write_raw(file, header, 0);
  EXPECT_TRUE(Mentions(open_error(file), {file.string(), "key 't65536'",
                                          "more than 65536 entries in one object"}));
}

TEST_F(SafetensorsTest, IndexDepthBombSizeAndTrailingBytes) {
  const fs::path index = dir / "model.safetensors.index.json";
  write_text(index, R"({"weight_map": {"a": )" + std::string(100'000, '[') + "}}");
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {index.string(), "key 'weight_map.a[0]", "nested deeper than 16 levels"}));
  write_text(index, R"({"weight_map": {"a": "model.safetensors"}} trailing)");
  EXPECT_TRUE(Mentions(open_error(dir.path()),
                       {index.string(), "unexpected text after the JSON value"}));
  write_text(index, std::string(R"({"weight_map": {"a": "model.safetensors"}})") +
                        std::string("\0{}", 3));
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "NUL byte at offset 42"}));
  // Over 64 MiB is refused from the file's size, before it is read.
  {
    std::ofstream out(index, std::ios::binary);
    out.seekp((std::streamoff{64} << 20) + 1);
    out.put(' ');
  }
  EXPECT_TRUE(Mentions(open_error(dir.path()), {index.string(), "67108866 bytes",
                                                "more than the 67108864-byte limit"}));
}

TEST_F(SafetensorsTest, ConfigIsCheckedAgainstTheCheckpointBeforeUse) {
  clockwork::write_safetensors(dir / "model.safetensors", tiny_model_tensors(2));
  const Checkpoint ckpt = Checkpoint::open(dir.path());
  clockwork::ModelConfig c;  // the shapes tiny_model_tensors() writes
  c.hidden_size = 8;
  c.num_layers = 2;
  c.num_heads = 2;
  c.num_kv_heads = 1;
  c.head_dim = 4;
  c.intermediate_size = 12;
  c.vocab_size = 16;
  EXPECT_NO_THROW(clockwork::check_config_fits_checkpoint(c, ckpt));

  c.num_layers = 1000;  // passes config.json's bounds, but not this checkpoint
  EXPECT_TRUE(Mentions(error_of([&] { clockwork::check_config_fits_checkpoint(c, ckpt); }),
                       {dir.path().string(), "num_hidden_layers is 1000",
                        "layers stop at model.layers.1"}));
  c.num_layers = std::numeric_limits<int64_t>::max();  // 9 x L overflows
  EXPECT_TRUE(Mentions(error_of([&] { clockwork::check_config_fits_checkpoint(c, ckpt); }),
                       {dir.path().string(), "more weights than fit in 64 bits"}));
}

TEST_F(SafetensorsTest, HeaderWithOnlyMetadataIsAnEmptyCheckpoint) {
  // Valid per the format: no tensors, no data. Lookups then say the checkpoint is empty.
  const fs::path file = dir / "empty.safetensors";
  write_raw(file, R"({"__metadata__": {"format": "pt"}})", 0);
  const Checkpoint ckpt = Checkpoint::open(file);
  EXPECT_EQ(ckpt.size(), 0u);
  EXPECT_TRUE(Mentions(error_of([&] { ckpt.get("w"); }), {"no tensor named 'w'", "no tensors"}));
}

TEST_F(SafetensorsTest, ZeroSizedTensorsMayShareAnOffset) {
  const fs::path file = dir / "zeros.safetensors";
  write_raw(file,
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "e": {"dtype": "BF16", "shape": [0], "data_offsets": [8, 8]},
                "z": {"dtype": "F32", "shape": [0, 3], "data_offsets": [0, 0]}})",
            8);
  const Checkpoint ckpt = Checkpoint::open(file);
  EXPECT_EQ(ckpt.size(), 3u);
  EXPECT_EQ(ckpt.get("e").nbytes, 0u);
}

}  // namespace
