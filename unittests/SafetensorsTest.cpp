//===- SafetensorsTest.cpp - safetensors header parsing and building ------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include "gtest/gtest.h"

#include <cstdio>
#include <unistd.h>

using namespace loomrt;

namespace {

/// A whole file image: the 8-byte length, `json` verbatim, then `dataSize`
/// zero bytes.
std::string image(const std::string &json, size_t dataSize) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>(static_cast<uint64_t>(json.size()) >> (8 * i));
  return out + json + std::string(dataSize, '\0');
}

/// The error `parseSafetensors` gives for `bytes`, or "" when it accepts.
std::string errorFor(const std::string &bytes) {
  SafetensorsHeader header;
  std::string error;
  if (parseSafetensors(bytes.data(), bytes.size(), header, error))
    return "";
  return error.empty() ? "<empty message>" : error;
}

TensorEntry entry(const std::string &name, DType dtype,
                  std::vector<int64_t> shape) {
  TensorEntry result;
  result.name = name;
  result.dtype = dtype;
  result.shape = std::move(shape);
  return result;
}

TEST(SafetensorsTest, DTypes) {
  EXPECT_EQ(dtypeSize(DType::F32), 4u);
  EXPECT_EQ(dtypeSize(DType::BF16), 2u);
  EXPECT_EQ(dtypeSize(DType::F16), 2u);
  EXPECT_EQ(dtypeSize(DType::I32), 4u);
  EXPECT_EQ(dtypeSize(DType::I64), 8u);
  for (DType dtype :
       {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    DType parsed;
    ASSERT_TRUE(parseDType(dtypeName(dtype), parsed)) << dtypeName(dtype);
    EXPECT_EQ(parsed, dtype);
  }
  DType parsed;
  EXPECT_FALSE(parseDType("F64", parsed));
  EXPECT_FALSE(parseDType("f32", parsed));
  EXPECT_FALSE(parseDType("", parsed));
}

TEST(SafetensorsTest, RoundTrip) {
  std::vector<TensorEntry> tensors = {
      entry("wte", DType::BF16, {5, 3}), entry("scalar", DType::F32, {}),
      entry("empty", DType::I64, {0, 4}), entry("ids", DType::I32, {7}),
      entry("q\"uote\n\\é", DType::F16, {1, 2, 3})};
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"note", "tab\there"}};
  uint64_t dataStart = 0;
  std::string prefix = buildSafetensorsHeader(tensors, metadata, dataStart);
  ASSERT_EQ(prefix.size(), dataStart);

  // Back to back in the given order.
  uint64_t expected[][2] = {{0, 30}, {30, 34}, {34, 34}, {34, 62}, {62, 74}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    EXPECT_EQ(tensors[i].begin, expected[i][0]) << tensors[i].name;
    EXPECT_EQ(tensors[i].end, expected[i][1]) << tensors[i].name;
  }

  std::string file = prefix + std::string(74, '\x5a');
  SafetensorsHeader header;
  std::string error;
  ASSERT_TRUE(parseSafetensors(file.data(), file.size(), header, error))
      << error;
  EXPECT_EQ(header.dataStart, dataStart);
  EXPECT_EQ(header.fileSize, file.size());
  EXPECT_EQ(header.metadata, metadata);
  ASSERT_EQ(header.tensors.size(), tensors.size());
  for (const TensorEntry &built : tensors) {
    const TensorEntry *parsed = header.find(built.name);
    ASSERT_NE(parsed, nullptr) << built.name;
    EXPECT_EQ(parsed->dtype, built.dtype);
    EXPECT_EQ(parsed->shape, built.shape);
    EXPECT_EQ(parsed->begin, built.begin);
    EXPECT_EQ(parsed->end, built.end);
  }
  EXPECT_EQ(header.find("missing"), nullptr);
}

TEST(SafetensorsTest, BuildOrderAndPadding) {
  std::vector<TensorEntry> tensors = {entry("z", DType::F32, {1}),
                                      entry("a", DType::F32, {1})};
  uint64_t dataStart = 0;
  std::string prefix =
      buildSafetensorsHeader(tensors, {{"format", "pt"}}, dataStart);
  std::string json = prefix.substr(8);
  // "__metadata__" first, then the tensors in the order given.
  EXPECT_EQ(json.find("{\"__metadata__\":{\"format\":\"pt\"},\"z\":"), 0u)
      << json;
  EXPECT_LT(json.find("\"z\""), json.find("\"a\""));
  // The length field counts the padding, which is spaces.
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = length << 8 | static_cast<unsigned char>(prefix[i]);
  EXPECT_EQ(length, json.size());
  size_t close = json.rfind('}');
  EXPECT_EQ(json.find_first_not_of(' ', close + 1), std::string::npos);

  // Without metadata there is no "__metadata__" key at all.
  buildSafetensorsHeader(tensors, {}, dataStart);
  std::vector<TensorEntry> none;
  std::string empty = buildSafetensorsHeader(none, {}, dataStart);
  EXPECT_EQ(empty.substr(8), "{}      ");
  EXPECT_EQ(empty.find("__metadata__"), std::string::npos);
  EXPECT_EQ(errorFor(empty), "");
}

TEST(SafetensorsTest, DataStartIsAligned) {
  // Every name length moves the JSON's size through all residues mod 8.
  for (size_t length = 0; length < 24; ++length) {
    std::vector<TensorEntry> tensors = {
        entry(std::string(length + 1, 'n'), DType::I64, {1})};
    uint64_t dataStart = 0;
    std::string prefix = buildSafetensorsHeader(tensors, {}, dataStart);
    EXPECT_EQ(dataStart % 8, 0u) << "name length " << length + 1;
    EXPECT_EQ(prefix.size(), dataStart);
    SafetensorsHeader header;
    std::string error, file = prefix + std::string(8, '\0');
    EXPECT_TRUE(parseSafetensors(file.data(), file.size(), header, error))
        << error;
  }
}

TEST(SafetensorsTest, TensorsInOffsetOrder) {
  std::string json = R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                     R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                     R"("a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                     R"("y":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})";
  std::string file = image(json, 8);
  SafetensorsHeader header;
  std::string error;
  ASSERT_TRUE(parseSafetensors(file.data(), file.size(), header, error))
      << error;
  std::vector<std::string> names;
  for (const TensorEntry &tensor : header.tensors)
    names.push_back(tensor.name);
  EXPECT_EQ(names, (std::vector<std::string>{"a", "y", "z", "b"}));
  // Data need not be aligned in files others write.
  EXPECT_EQ(header.dataStart, 8 + json.size());
}

TEST(SafetensorsTest, AcceptedVariants) {
  // Whitespace around tokens, escapes, a null "__metadata__" (which the
  // safetensors package reads as none) and an unpadded header.
  EXPECT_EQ(errorFor(image(" {\n\t\"\\u00e9\\ud83d\\ude00\" : {\"shape\": [ 2 "
                           "],\"data_offsets\":[0,4],\"dtype\":\"BF16\"} , "
                           "\"__metadata__\":null }\r\n",
                           4)),
            "");
  SafetensorsHeader header;
  std::string error,
      file = image(R"({"\u00e9\ud83d\ude00":{"dtype":"I32","shape":[],)"
                   R"("data_offsets":[0,4]}})",
                   4);
  ASSERT_TRUE(parseSafetensors(file.data(), file.size(), header, error));
  EXPECT_NE(header.find("\xc3\xa9\xf0\x9f\x98\x80"), nullptr);
}

/// A header with one F32 tensor "w" whose fields are given as JSON text.
std::string oneTensor(const std::string &dtype, const std::string &shape,
                      const std::string &offsets) {
  return R"({"w":{"dtype":)" + dtype + R"(,"shape":)" + shape +
         R"(,"data_offsets":)" + offsets + "}}";
}

struct ErrorCase {
  const char *label;
  std::string bytes;
  std::string message;
};

TEST(SafetensorsTest, Errors) {
  std::string valid = oneTensor("\"F32\"", "[2,3]", "[0,24]");
  const char *ab = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                   R"("b":{"dtype":"F32","shape":[2],"data_offsets":[%s]}})";
  auto twoTensors = [&](const char *offsets) {
    char buffer[256];
    snprintf(buffer, sizeof(buffer), ab, offsets);
    return std::string(buffer);
  };
  std::string huge(8, '\xff');
  std::vector<ErrorCase> cases = {
      // The length field.
      {"empty", "",
       "truncated file: 0 bytes, too short for the 8-byte header length"},
      {"seven bytes", std::string(7, '\0'),
       "truncated file: 7 bytes, too short for the 8-byte header length"},
      {"header cut", image(valid, 24).substr(0, 48),
       "truncated file: the header says " + std::to_string(valid.size()) +
           " bytes but only 40 follow"},
      {"header too large", huge + valid,
       "the header length 18446744073709551615 is above the limit of "
       "100000000 bytes"},
      // JSON syntax.
      {"trailing garbage", image(valid + " x", 24),
       "invalid header JSON at header byte " +
           std::to_string(valid.size() + 1) +
           ": unexpected 'x' after the JSON value"},
      {"unterminated", image("{\"w", 0),
       "invalid header JSON at header byte 3: unterminated string"},
      {"bad escape", image(R"({"\q":1})", 0),
       "invalid header JSON at header byte 3: invalid escape in a string: \\ "
       "followed by 'q'"},
      {"lone surrogate", image(R"({"\udc00":1})", 0),
       "invalid header JSON at header byte 8: \\u escape is a lone low "
       "surrogate"},
      {"control character", image("{\"a\nb\":1}", 0),
       "invalid header JSON at header byte 3: unescaped control character "
       "byte 0x0a in a string"},
      {"leading zero", image(oneTensor("\"F32\"", "[02,3]", "[0,24]"), 24),
       "numbers must not have leading zeros"},
      {"invalid UTF-8", image("{\"\xc3\x28\":1}", 0),
       "header is not valid UTF-8 (at header byte 2)"},
      {"overlong UTF-8", image("{\"\xc0\xaf\":1}", 0),
       "header is not valid UTF-8 (at header byte 2)"},
      {"deep nesting", image("{\"w\":" + std::string(17, '[') + "]}", 0),
       "invalid header JSON at header byte 20: JSON nested deeper than 16 "
       "levels"},
      // Structure.
      {"not an object", image("[]", 0),
       "header must be a JSON object, found an array"},
      {"tensor not an object", image(R"({"w":[1]})", 0),
       "tensor 'w': expected an object with dtype, shape and data_offsets, "
       "found an array"},
      {"missing key", image(R"({"w":{"dtype":"F32","shape":[]}})", 0),
       "tensor 'w': missing key 'data_offsets'"},
      {"unknown key",
       image(R"({"w":{"dtype":"F32","shape":[],"offsets":[0,4]}})", 4),
       "tensor 'w': unexpected key 'offsets' (a tensor has dtype, shape and "
       "data_offsets)"},
      {"duplicate key",
       image(R"({"w":{"dtype":"F32","dtype":"F32","shape":[],)"
             R"("data_offsets":[0,4]}})",
             4),
       "tensor 'w': duplicate key 'dtype'"},
      {"duplicate name",
       image(R"({"w":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
             R"("w":{"dtype":"F32","shape":[],"data_offsets":[4,8]}})",
             8),
       "duplicate tensor name 'w'"},
      {"name with a newline", image(R"({"a\nb":1})", 0),
       "tensor 'a\\x0ab': expected an object with dtype, shape and "
       "data_offsets, found a number"},
      {"metadata value", image(R"({"__metadata__":{"k":1}})", 0),
       "__metadata__ 'k' must be a string, found a number"},
      {"duplicate metadata",
       image(R"({"__metadata__":{},"__metadata__":{}})", 0),
       "duplicate key '__metadata__'"},
      // dtype and shape.
      {"unsupported dtype", image(oneTensor("\"F64\"", "[2,3]", "[0,24]"), 24),
       "tensor 'w': dtype 'F64' is not supported (F32, BF16, F16, I32, I64)"},
      {"dtype not a string", image(oneTensor("4", "[2,3]", "[0,24]"), 24),
       "tensor 'w': dtype must be a string, found a number"},
      {"negative dim", image(oneTensor("\"F32\"", "[-2,3]", "[0,24]"), 24),
       "tensor 'w': shape[0] must be a non-negative integer, found -2"},
      {"float dim", image(oneTensor("\"F32\"", "[2,3.0]", "[0,24]"), 24),
       "tensor 'w': shape[1] must be an integer, found 3.0"},
      {"null dim", image(oneTensor("\"F32\"", "[null]", "[0,4]"), 4),
       "tensor 'w': shape[0] must be a non-negative integer, found null"},
      {"boolean dim", image(oneTensor("\"F32\"", "[true]", "[0,4]"), 4),
       "tensor 'w': shape[0] must be a non-negative integer, found a boolean"},
      {"dim above 2^64",
       image(oneTensor("\"F32\"", "[18446744073709551616]", "[0,4]"), 4),
       "tensor 'w': shape[0] = 18446744073709551616 does not fit in 64 bits"},
      {"dim above int64",
       image(oneTensor("\"F32\"", "[9223372036854775808]", "[0,4]"), 4),
       "tensor 'w': shape[0] = 9223372036854775808 is too large (at most "
       "9223372036854775807)"},
      {"element count overflow",
       image(oneTensor("\"F32\"", "[4294967296,4294967296]", "[0,4]"), 4),
       "tensor 'w': shape [4294967296, 4294967296] with dtype F32 needs more "
       "than 2^64 bytes"},
      {"byte count overflow",
       image(oneTensor("\"I64\"", "[4611686018427387904]", "[0,4]"), 4),
       "tensor 'w': shape [4611686018427387904] with dtype I64 needs more "
       "than 2^64 bytes"},
      // Offsets.
      {"size mismatch", image(oneTensor("\"F32\"", "[2,3]", "[0,20]"), 20),
       "tensor 'w': shape [2, 3] with dtype F32 needs 24 bytes but "
       "data_offsets give 20"},
      {"reversed offsets", image(oneTensor("\"F32\"", "[]", "[8,4]"), 8),
       "tensor 'w': data_offsets [8, 4] end before they begin"},
      {"three offsets", image(oneTensor("\"F32\"", "[]", "[0,4,4]"), 4),
       "tensor 'w': data_offsets must be an array [begin, end], found an "
       "array of length 3"},
      {"negative offset", image(oneTensor("\"F32\"", "[]", "[-0,4]"), 4),
       "tensor 'w': data_offsets[0] must be a non-negative integer, found -0"},
      {"truncated data", image(valid, 16),
       "tensor 'w': data_offsets [0, 24] end past the data section (16 "
       "bytes); is the file truncated?"},
      {"overlap", image(twoTensors("4,12"), 12),
       "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets "
       "[0, 8])"},
      {"gap", image(twoTensors("16,24"), 24),
       "data section has 8 bytes not covered by any tensor (the first at "
       "data offset 8)"},
      {"trailing bytes", image(valid, 40),
       "data section has 16 bytes not covered by any tensor (the first at "
       "data offset 24)"},
      {"one trailing byte", image(valid, 25),
       "data section has 1 byte not covered by any tensor (the first at data "
       "offset 24)"},
      {"data without tensors", image("{}", 3),
       "data section has 3 bytes not covered by any tensor (the first at "
       "data offset 0)"},
  };
  for (const ErrorCase &errorCase : cases) {
    std::string error = errorFor(errorCase.bytes);
    EXPECT_NE(error.find(errorCase.message), std::string::npos)
        << errorCase.label << ": got \"" << error << "\"";
    EXPECT_EQ(error.find('\n'), std::string::npos) << errorCase.label;
  }
}

TEST(SafetensorsTest, EmptyTensorInsideAnotherOverlaps) {
  // A zero-byte region strictly inside another is an overlap too (the
  // safetensors package requires each region to start where the last ended).
  std::string json = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("z":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})";
  EXPECT_EQ(errorFor(image(json, 8)),
            "tensor 'z' (data_offsets [4, 4]) overlaps tensor 'a' "
            "(data_offsets [0, 8])");
}

TEST(SafetensorsTest, ReadFromFile) {
  char path[] = "/tmp/loom-safetensors-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  std::vector<TensorEntry> tensors = {entry("w", DType::F16, {3})};
  uint64_t dataStart = 0;
  std::string file =
      buildSafetensorsHeader(tensors, {}, dataStart) + std::string(6, '\0');
  ASSERT_EQ(write(fd, file.data(), file.size()),
            static_cast<ssize_t>(file.size()));
  close(fd);

  SafetensorsHeader header;
  std::string error;
  ASSERT_TRUE(readSafetensorsHeader(path, header, error)) << error;
  EXPECT_EQ(header.fileSize, file.size());
  EXPECT_EQ(header.dataStart, dataStart);
  ASSERT_EQ(header.tensors.size(), 1u);
  EXPECT_EQ(header.tensors[0].end, 6u);

  // Errors name the file first.
  ASSERT_EQ(truncate(path, static_cast<off_t>(file.size() - 1)), 0);
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error, std::string(path) +
                       ": tensor 'w': data_offsets [0, 6] end past the data "
                       "section (5 bytes); is the file truncated?");
  ASSERT_EQ(truncate(path, 12), 0);
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error, std::string(path) + ": truncated file: the header says " +
                       std::to_string(dataStart - 8) +
                       " bytes but only 4 follow");
  unlink(path);
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error,
            std::string(path) + ": cannot open: No such file or directory");
  EXPECT_FALSE(readSafetensorsHeader("/tmp", header, error));
  EXPECT_EQ(error, "/tmp: not a regular file");
}

} // namespace
