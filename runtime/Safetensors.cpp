//===- Safetensors.cpp - safetensors headers: parse, validate, build ------===//
//
// Part of libloomrt.
//
// The header is untrusted input (weights come from anywhere), so it is read
// by a small strict JSON parser for exactly the subset safetensors writes
// rather than by a general one: every malformed header ends in one specific
// line, never in a crash, a huge allocation or deep recursion. The checks are
// those of the safetensors Python package (data regions sorted by offset must
// tile the data section exactly) plus the stricter ones Loom wants (no
// unknown keys, no duplicate names, only the element types Loom has).
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace loomrt;

/// The safetensors package refuses headers above this size
/// (MAX_HEADER_SIZE); so do we, which also bounds what a corrupt length field
/// can make us allocate.
static constexpr uint64_t kMaxHeaderSize = 100000000;
/// A valid header nests three levels (root, tensor, shape); anything much
/// deeper is garbage, and the bound keeps the recursive parser's stack small.
static constexpr unsigned kMaxJsonDepth = 16;
/// Names and literals longer than this are cut in messages.
static constexpr size_t kMaxQuoted = 80;

//===----------------------------------------------------------------------===//
// DType
//===----------------------------------------------------------------------===//

size_t loomrt::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::BF16:
  case DType::F16:
    return 2;
  case DType::I64:
    return 8;
  }
  return 0;
}

const char *loomrt::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::BF16:
    return "BF16";
  case DType::F16:
    return "F16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

bool loomrt::parseDType(const std::string &name, DType &dtype) {
  for (DType candidate :
       {DType::F32, DType::BF16, DType::F16, DType::I32, DType::I64}) {
    if (name == dtypeName(candidate)) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

const TensorEntry *SafetensorsHeader::find(const std::string &name) const {
  for (const TensorEntry &entry : tensors)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Message helpers
//===----------------------------------------------------------------------===//

/// `text` in single quotes, safe to put on one line of a message: control
/// bytes become \xNN (a name may legally contain "\n") and long text is cut
/// at a UTF-8 character boundary.
static std::string quoted(const std::string &text) {
  std::string out = "'";
  size_t size = text.size();
  bool cut = size > kMaxQuoted;
  if (cut) {
    size = kMaxQuoted;
    while (size > 0 && (static_cast<unsigned char>(text[size]) & 0xC0) == 0x80)
      --size;
  }
  for (size_t i = 0; i < size; ++i) {
    unsigned char c = text[i];
    if (c < 0x20 || c == 0x7F) {
      char buf[8];
      snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  out += cut ? "'..." : "'";
  return out;
}

static std::string tensorPrefix(const std::string &name) {
  return "tensor " + quoted(name) + ": ";
}

static std::string shapeString(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i == 8 && shape.size() > 9) {
      out += ", ... (" + std::to_string(shape.size()) + " dimensions)";
      break;
    }
    if (i)
      out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

/// "1 byte", "24 bytes".
static std::string bytesString(uint64_t n) {
  return std::to_string(n) + (n == 1 ? " byte" : " bytes");
}

static std::string offsetsString(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
}

//===----------------------------------------------------------------------===//
// JSON
//===----------------------------------------------------------------------===//

namespace {

/// A parsed JSON value. Objects keep their members in document order (two
/// parallel vectors) so that errors come in the order a reader sees them and
/// duplicate keys can be diagnosed; a map would silently keep one of them.
struct JsonValue {
  enum Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Null;
  /// String contents (UTF-8), or a number's literal text.
  std::string text;
  /// For a number: whether it is a non-negative integer that fits 64 bits,
  /// and then its value.
  bool isUInt = false;
  uint64_t uint = 0;
  /// Array elements, or object member values.
  std::vector<JsonValue> elements;
  /// Object member keys, parallel to `elements`.
  std::vector<std::string> keys;
};

/// A recursive-descent parser over the header bytes. Errors name the byte
/// offset inside the header, which is what one sees in a hex dump after
/// skipping the 8-byte length.
class JsonParser {
public:
  JsonParser(const char *begin, size_t length, std::string &errorOut)
      : text(begin), size(length), error(errorOut) {}

  /// Parses one value followed only by whitespace (the padding).
  bool parse(JsonValue &root) {
    skipSpace();
    if (!parseValue(root, 1))
      return false;
    skipSpace();
    if (pos != size)
      return fail("unexpected " + describeNext() + " after the JSON value");
    return true;
  }

private:
  const char *text;
  size_t size;
  size_t pos = 0;
  std::string &error;

  bool fail(const std::string &message) {
    error = "invalid header JSON at header byte " + std::to_string(pos) + ": " +
            message;
    return false;
  }

  /// The next character (or the end), for "expected X, found Y" messages.
  std::string describeNext() const {
    if (pos >= size)
      return "the end of the header";
    unsigned char c = text[pos];
    char buf[16];
    if (c >= 0x20 && c < 0x7F)
      snprintf(buf, sizeof(buf), "'%c'", c);
    else
      snprintf(buf, sizeof(buf), "byte 0x%02x", c);
    return buf;
  }

  void skipSpace() {
    while (pos < size && (text[pos] == ' ' || text[pos] == '\t' ||
                          text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(char c) {
    if (pos < size && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  bool parseValue(JsonValue &value, unsigned depth) {
    if (pos >= size)
      return fail("expected a value, found " + describeNext());
    char c = text[pos];
    if (c == '{' || c == '[') {
      if (depth > kMaxJsonDepth)
        return fail("JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                    " levels");
      return c == '{' ? parseObject(value, depth) : parseArray(value, depth);
    }
    if (c == '"') {
      value.kind = JsonValue::String;
      return parseString(value.text);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(value);
    for (const char *word : {"true", "false", "null"}) {
      size_t length = strlen(word);
      if (size - pos >= length && memcmp(text + pos, word, length) == 0) {
        pos += length;
        value.kind = word[0] == 'n' ? JsonValue::Null : JsonValue::Bool;
        value.text = word;
        return true;
      }
    }
    return fail("expected a value, found " + describeNext());
  }

  bool parseObject(JsonValue &value, unsigned depth) {
    value.kind = JsonValue::Object;
    ++pos; // '{'
    skipSpace();
    if (consume('}'))
      return true;
    while (true) {
      skipSpace();
      if (pos >= size || text[pos] != '"')
        return fail("expected a string key, found " + describeNext());
      value.keys.emplace_back();
      if (!parseString(value.keys.back()))
        return false;
      skipSpace();
      if (!consume(':'))
        return fail("expected ':' after an object key, found " +
                    describeNext());
      skipSpace();
      value.elements.emplace_back();
      if (!parseValue(value.elements.back(), depth + 1))
        return false;
      skipSpace();
      if (consume('}'))
        return true;
      if (!consume(','))
        return fail("expected ',' or '}' in an object, found " +
                    describeNext());
    }
  }

  bool parseArray(JsonValue &value, unsigned depth) {
    value.kind = JsonValue::Array;
    ++pos; // '['
    skipSpace();
    if (consume(']'))
      return true;
    while (true) {
      skipSpace();
      value.elements.emplace_back();
      if (!parseValue(value.elements.back(), depth + 1))
        return false;
      skipSpace();
      if (consume(']'))
        return true;
      if (!consume(','))
        return fail("expected ',' or ']' in an array, found " + describeNext());
    }
  }

  /// Four hex digits of a \u escape.
  bool parseHex4(unsigned &code) {
    code = 0;
    for (int i = 0; i < 4; ++i, ++pos) {
      char c = pos < size ? text[pos] : 0;
      unsigned digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return fail("expected 4 hex digits after \\u, found " + describeNext());
      code = code * 16 + digit;
    }
    return true;
  }

  static void appendUtf8(std::string &out, unsigned code) {
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
  }

  /// A string; the header has already been checked to be valid UTF-8, so
  /// raw bytes are copied and only escapes need decoding. Escapes must not
  /// produce lone surrogates, which have no UTF-8 form.
  bool parseString(std::string &out) {
    ++pos; // '"'
    while (true) {
      if (pos >= size)
        return fail("unterminated string");
      unsigned char c = text[pos];
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("unescaped control character " + describeNext() +
                    " in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos;
        continue;
      }
      ++pos;
      char escape = pos < size ? text[pos] : 0;
      const char *simple = strchr("\"\\/bfnrt", escape);
      if (escape && simple) {
        out += "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
        ++pos;
        continue;
      }
      if (escape != 'u')
        return fail("invalid escape in a string: \\ followed by " +
                    describeNext());
      ++pos;
      unsigned code;
      if (!parseHex4(code))
        return false;
      if (code >= 0xDC00 && code <= 0xDFFF)
        return fail("\\u escape is a lone low surrogate");
      if (code >= 0xD800 && code <= 0xDBFF) {
        unsigned low;
        if (size - pos < 2 || text[pos] != '\\' || text[pos + 1] != 'u')
          return fail("\\u escape is a high surrogate without a low one");
        pos += 2;
        if (!parseHex4(low))
          return false;
        if (low < 0xDC00 || low > 0xDFFF)
          return fail("\\u escape is a high surrogate without a low one");
        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
      }
      appendUtf8(out, code);
    }
  }

  /// Any JSON number is accepted here and kept as text; whether it may
  /// stand where it stands (only non-negative integers may) is for the
  /// caller to say, with the tensor's name in the message.
  bool parseNumber(JsonValue &value) {
    value.kind = JsonValue::Number;
    size_t start = pos;
    bool integer = true, overflow = false;
    consume('-');
    if (pos >= size || text[pos] < '0' || text[pos] > '9')
      return fail("expected a digit after '-', found " + describeNext());
    if (text[pos] == '0' && pos + 1 < size && text[pos + 1] >= '0' &&
        text[pos + 1] <= '9')
      return fail("numbers must not have leading zeros");
    uint64_t magnitude = 0;
    while (pos < size && text[pos] >= '0' && text[pos] <= '9') {
      unsigned digit = text[pos++] - '0';
      if (magnitude > (UINT64_MAX - digit) / 10)
        overflow = true;
      else
        magnitude = magnitude * 10 + digit;
    }
    if (consume('.')) {
      integer = false;
      if (pos >= size || text[pos] < '0' || text[pos] > '9')
        return fail("expected a digit after '.', found " + describeNext());
      while (pos < size && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
    }
    if (pos < size && (text[pos] == 'e' || text[pos] == 'E')) {
      integer = false;
      ++pos;
      if (pos < size && (text[pos] == '+' || text[pos] == '-'))
        ++pos;
      if (pos >= size || text[pos] < '0' || text[pos] > '9')
        return fail("expected a digit in an exponent, found " + describeNext());
      while (pos < size && text[pos] >= '0' && text[pos] <= '9')
        ++pos;
    }
    value.text.assign(text + start, pos - start);
    value.isUInt = integer && !overflow && text[start] != '-';
    value.uint = magnitude;
    return true;
  }
};

} // namespace

/// Strict UTF-8 (no overlong forms, no surrogates, nothing above U+10FFFF),
/// as serde_json and Python's decoder require; on failure `where` is the
/// offset of the first bad byte.
static bool isValidUtf8(const unsigned char *s, size_t size, size_t &where) {
  size_t i = 0;
  while (i < size) {
    unsigned char c = s[i];
    where = i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t length;
    unsigned char low = 0x80, high = 0xBF; // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      length = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      length = 3;
      if (c == 0xE0)
        low = 0xA0; // overlong
      if (c == 0xED)
        high = 0x9F; // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      length = 4;
      if (c == 0xF0)
        low = 0x90; // overlong
      if (c == 0xF4)
        high = 0x8F; // above U+10FFFF
    } else {
      return false;
    }
    if (size - i < length || s[i + 1] < low || s[i + 1] > high)
      return false;
    for (size_t k = 2; k < length; ++k)
      if ((s[i + k] & 0xC0) != 0x80)
        return false;
    i += length;
  }
  return true;
}

static const char *kindName(const JsonValue &value) {
  switch (value.kind) {
  case JsonValue::Null:
    return "null";
  case JsonValue::Bool:
    return "a boolean";
  case JsonValue::Number:
    return "a number";
  case JsonValue::String:
    return "a string";
  case JsonValue::Array:
    return "an array";
  case JsonValue::Object:
    return "an object";
  }
  return "a value";
}

/// Reads a non-negative integer no larger than `max`; `what` names the place
/// ("tensor 'w': shape[1]").
static bool getUInt(const JsonValue &value, const std::string &what,
                    uint64_t max, uint64_t &out, std::string &error) {
  if (value.kind != JsonValue::Number) {
    error = what + " must be a non-negative integer, found " + kindName(value);
    return false;
  }
  std::string literal =
      value.text.size() > 40 ? value.text.substr(0, 40) + "..." : value.text;
  // Even "-0": serde_json reads it as a float, which safetensors rejects.
  if (value.text[0] == '-') {
    error = what + " must be a non-negative integer, found " + literal;
    return false;
  }
  if (value.text.find_first_of(".eE") != std::string::npos) {
    error = what + " must be an integer, found " + literal;
    return false;
  }
  if (!value.isUInt) {
    error = what + " = " + literal + " does not fit in 64 bits";
    return false;
  }
  if (value.uint > max) {
    error = what + " = " + literal + " is too large (at most " +
            std::to_string(max) + ")";
    return false;
  }
  out = value.uint;
  return true;
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Parses one tensor's {"dtype", "shape", "data_offsets"} and checks that
/// the offsets span exactly the bytes the shape and dtype need.
static bool parseTensor(const std::string &name, const JsonValue &value,
                        TensorEntry &entry, std::string &error) {
  std::string prefix = tensorPrefix(name);
  if (value.kind != JsonValue::Object) {
    error = prefix +
            "expected an object with dtype, shape and data_offsets, found " +
            kindName(value);
    return false;
  }
  const JsonValue *dtype = nullptr, *shape = nullptr, *offsets = nullptr;
  for (size_t i = 0; i < value.keys.size(); ++i) {
    const std::string &key = value.keys[i];
    const JsonValue **slot = key == "dtype"          ? &dtype
                             : key == "shape"        ? &shape
                             : key == "data_offsets" ? &offsets
                                                     : nullptr;
    if (!slot) {
      error = prefix + "unexpected key " + quoted(key) +
              " (a tensor has dtype, shape and data_offsets)";
      return false;
    }
    if (*slot) {
      error = prefix + "duplicate key " + quoted(key);
      return false;
    }
    *slot = &value.elements[i];
  }
  const char *missing = !dtype     ? "dtype"
                        : !shape   ? "shape"
                        : !offsets ? "data_offsets"
                                   : nullptr;
  if (missing) {
    error = prefix + "missing key '" + missing + "'";
    return false;
  }

  entry.name = name;
  if (dtype->kind != JsonValue::String) {
    error = prefix + "dtype must be a string, found " + kindName(*dtype);
    return false;
  }
  if (!parseDType(dtype->text, entry.dtype)) {
    error = prefix + "dtype " + quoted(dtype->text) +
            " is not supported (F32, BF16, F16, I32, I64)";
    return false;
  }

  if (shape->kind != JsonValue::Array) {
    error = prefix + "shape must be an array, found " + kindName(*shape);
    return false;
  }
  // The element count is computed as safetensors does (a checked product
  // in order), so both agree on which shapes overflow.
  uint64_t elements = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape->elements.size(); ++i) {
    uint64_t dim;
    if (!getUInt(shape->elements[i],
                 prefix + "shape[" + std::to_string(i) + "]", INT64_MAX, dim,
                 error))
      return false;
    entry.shape.push_back(static_cast<int64_t>(dim));
    if (dim != 0 && elements > UINT64_MAX / dim)
      overflow = true;
    elements *= dim;
  }
  uint64_t elementSize = dtypeSize(entry.dtype);
  if (overflow || elements > UINT64_MAX / elementSize) {
    error = prefix + "shape " + shapeString(entry.shape) + " with dtype " +
            dtypeName(entry.dtype) + " needs more than 2^64 bytes";
    return false;
  }

  if (offsets->kind != JsonValue::Array || offsets->elements.size() != 2) {
    error =
        prefix + "data_offsets must be an array [begin, end], found " +
        (offsets->kind == JsonValue::Array
             ? "an array of length " + std::to_string(offsets->elements.size())
             : std::string(kindName(*offsets)));
    return false;
  }
  if (!getUInt(offsets->elements[0], prefix + "data_offsets[0]", UINT64_MAX,
               entry.begin, error) ||
      !getUInt(offsets->elements[1], prefix + "data_offsets[1]", UINT64_MAX,
               entry.end, error))
    return false;
  if (entry.end < entry.begin) {
    error = prefix + "data_offsets " + offsetsString(entry.begin, entry.end) +
            " end before they begin";
    return false;
  }
  uint64_t bytes = elements * elementSize;
  if (entry.end - entry.begin != bytes) {
    error = prefix + "shape " + shapeString(entry.shape) + " with dtype " +
            dtypeName(entry.dtype) + " needs " + std::to_string(bytes) +
            " bytes but data_offsets give " +
            std::to_string(entry.end - entry.begin);
    return false;
  }
  return true;
}

static bool parseMetadata(const JsonValue &value,
                          std::map<std::string, std::string> &metadata,
                          std::string &error) {
  // safetensors reads "__metadata__" as an optional map, so null is "none".
  if (value.kind == JsonValue::Null)
    return true;
  if (value.kind != JsonValue::Object) {
    error = "__metadata__ must be an object of strings, found " +
            std::string(kindName(value));
    return false;
  }
  for (size_t i = 0; i < value.keys.size(); ++i) {
    const JsonValue &item = value.elements[i];
    if (item.kind != JsonValue::String) {
      error = "__metadata__ " + quoted(value.keys[i]) +
              " must be a string, found " + kindName(item);
      return false;
    }
    if (!metadata.emplace(value.keys[i], item.text).second) {
      error = "__metadata__ has a duplicate key " + quoted(value.keys[i]);
      return false;
    }
  }
  return true;
}

/// Checks the header JSON (`json`, `jsonSize` bytes, the file's bytes
/// 8 .. 8 + jsonSize) against a file of `fileSize` bytes.
static bool parseHeaderJson(const char *json, uint64_t jsonSize,
                            uint64_t fileSize, SafetensorsHeader &header,
                            std::string &error) {
  header = SafetensorsHeader();
  header.dataStart = 8 + jsonSize;
  header.fileSize = fileSize;
  uint64_t dataSize = fileSize - header.dataStart;

  size_t bad;
  if (!isValidUtf8(reinterpret_cast<const unsigned char *>(json), jsonSize,
                   bad)) {
    error = "header is not valid UTF-8 (at header byte " + std::to_string(bad) +
            ")";
    return false;
  }
  JsonValue root;
  if (!JsonParser(json, jsonSize, error).parse(root))
    return false;
  if (root.kind != JsonValue::Object) {
    error =
        "header must be a JSON object, found " + std::string(kindName(root));
    return false;
  }

  std::set<std::string> names;
  bool seenMetadata = false;
  for (size_t i = 0; i < root.keys.size(); ++i) {
    const std::string &name = root.keys[i];
    if (name == "__metadata__") {
      if (seenMetadata) {
        error = "duplicate key '__metadata__'";
        return false;
      }
      seenMetadata = true;
      if (!parseMetadata(root.elements[i], header.metadata, error))
        return false;
      continue;
    }
    if (!names.insert(name).second) {
      error = "duplicate tensor name " + quoted(name);
      return false;
    }
    header.tensors.emplace_back();
    if (!parseTensor(name, root.elements[i], header.tensors.back(), error))
      return false;
  }

  // Sorted by offsets, the regions must tile [0, dataSize): each begins
  // where the previous ended. Ties (empty tensors) are ordered by name so
  // the result does not depend on the JSON's key order.
  std::vector<TensorEntry> &tensors = header.tensors;
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              if (a.begin != b.begin)
                return a.begin < b.begin;
              if (a.end != b.end)
                return a.end < b.end;
              return a.name < b.name;
            });
  for (const TensorEntry &entry : tensors) {
    if (entry.end > dataSize) {
      error = tensorPrefix(entry.name) + "data_offsets " +
              offsetsString(entry.begin, entry.end) +
              " end past the data section (" + std::to_string(dataSize) +
              " bytes); is the file truncated?";
      return false;
    }
  }
  uint64_t covered = 0, uncovered = 0, firstGap = 0;
  const TensorEntry *last = nullptr; // the tensor that ends at `covered`
  for (const TensorEntry &entry : tensors) {
    if (entry.begin < covered) {
      error = "tensor " + quoted(entry.name) + " (data_offsets " +
              offsetsString(entry.begin, entry.end) + ") overlaps tensor " +
              quoted(last->name) + " (data_offsets " +
              offsetsString(last->begin, last->end) + ")";
      return false;
    }
    if (entry.begin > covered) {
      if (uncovered == 0)
        firstGap = covered;
      uncovered += entry.begin - covered;
    }
    if (!last || entry.end > covered)
      last = &entry;
    covered = entry.end;
  }
  if (covered < dataSize) {
    if (uncovered == 0)
      firstGap = covered;
    uncovered += dataSize - covered;
  }
  if (uncovered) {
    error = "data section has " + bytesString(uncovered) +
            " not covered by any tensor (the first at data offset " +
            std::to_string(firstGap) + ")";
    return false;
  }
  return true;
}

/// Decodes and checks the 8-byte length field against the file's size.
static bool checkLength(const unsigned char *prefix, uint64_t fileSize,
                        uint64_t &jsonSize, std::string &error) {
  jsonSize = 0;
  for (int i = 7; i >= 0; --i)
    jsonSize = jsonSize << 8 | prefix[i];
  if (jsonSize > kMaxHeaderSize) {
    error = "the header length " + std::to_string(jsonSize) +
            " is above the limit of " + std::to_string(kMaxHeaderSize) +
            " bytes";
    return false;
  }
  if (jsonSize > fileSize - 8) {
    error = "truncated file: the header says " + std::to_string(jsonSize) +
            " bytes but only " + std::to_string(fileSize - 8) + " follow";
    return false;
  }
  return true;
}

static std::string tooShort(uint64_t fileSize) {
  return "truncated file: " + std::to_string(fileSize) +
         " bytes, too short for the 8-byte header length";
}

bool loomrt::parseSafetensors(const void *data, uint64_t size,
                              SafetensorsHeader &header, std::string &error) {
  header = SafetensorsHeader();
  if (size < 8) {
    error = tooShort(size);
    return false;
  }
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  uint64_t jsonSize;
  if (!checkLength(bytes, size, jsonSize, error))
    return false;
  return parseHeaderJson(reinterpret_cast<const char *>(bytes + 8), jsonSize,
                         size, header, error);
}

namespace {
/// Closes a FILE on every return path.
struct FileCloser {
  FILE *file;
  ~FileCloser() {
    if (file)
      fclose(file);
  }
};
} // namespace

/// Reads exactly `size` bytes or says why not.
static bool readExactly(FILE *file, void *buffer, size_t size,
                        std::string &error) {
  if (fread(buffer, 1, size, file) == size)
    return true;
  error = ferror(file) ? std::string("read failed: ") + strerror(errno)
                       : "read failed: the file changed while being read";
  return false;
}

bool loomrt::readSafetensorsHeader(const std::string &path,
                                   SafetensorsHeader &header,
                                   std::string &error) {
  header = SafetensorsHeader();
  // Non-blocking, so that a FIFO without a writer is refused below rather
  // than waited on; a regular file reads the same either way.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  FileCloser closer{fd < 0 ? nullptr : fdopen(fd, "rb")};
  if (fd >= 0 && !closer.file)
    close(fd);
  // Fails with the path prefixed, as promised in the header.
  auto fail = [&](const std::string &message) {
    error = path + ": " + message;
    return false;
  };
  if (!closer.file)
    return fail(std::string("cannot open: ") + strerror(errno));
  struct stat info;
  if (fstat(fileno(closer.file), &info) != 0)
    return fail(std::string("cannot stat: ") + strerror(errno));
  // A directory or a pipe has no meaningful size to check offsets against.
  if (!S_ISREG(info.st_mode))
    return fail("not a regular file");
  uint64_t fileSize = static_cast<uint64_t>(info.st_size);
  if (fileSize < 8)
    return fail(tooShort(fileSize));

  unsigned char prefix[8];
  std::string message;
  uint64_t jsonSize;
  if (!readExactly(closer.file, prefix, 8, message) ||
      !checkLength(prefix, fileSize, jsonSize, message))
    return fail(message);
  // Only the header is read: weight files are large, and the data section
  // is validated through offsets against the file's size alone.
  std::string json(jsonSize, '\0');
  if (!readExactly(closer.file, json.data(), jsonSize, message) ||
      !parseHeaderJson(json.data(), jsonSize, fileSize, header, message))
    return fail(message);
  return true;
}

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

/// Appends `text` as a JSON string. Control characters are escaped; other
/// bytes, UTF-8 included, are written as they are (as serde_json does).
static void appendJsonString(std::string &out, const std::string &text) {
  out += '"';
  for (unsigned char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += static_cast<char>(c);
      }
    }
  }
  out += '"';
}

std::string loomrt::buildSafetensorsHeader(
    std::vector<TensorEntry> &tensors,
    const std::map<std::string, std::string> &metadata, uint64_t &dataStart) {
  // Compact JSON as the safetensors package writes it: "__metadata__" first,
  // then the tensors in data order.
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto &[key, value] : metadata) {
      if (!first)
        json += ',';
      first = false;
      appendJsonString(json, key);
      json += ':';
      appendJsonString(json, value);
    }
    json += '}';
  }
  uint64_t offset = 0;
  for (TensorEntry &entry : tensors) {
    uint64_t bytes = dtypeSize(entry.dtype);
    for (int64_t dim : entry.shape)
      bytes *= static_cast<uint64_t>(dim);
    entry.begin = offset;
    entry.end = offset += bytes;
    if (json.size() > 1)
      json += ',';
    appendJsonString(json, entry.name);
    json += ":{\"dtype\":\"";
    json += dtypeName(entry.dtype);
    json += "\",\"shape\":[";
    for (size_t i = 0; i < entry.shape.size(); ++i) {
      if (i)
        json += ',';
      json += std::to_string(entry.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(entry.begin) + ',' +
            std::to_string(entry.end) + "]}";
  }
  json += '}';
  // Spaces (JSON whitespace, as safetensors pads) so that the data section,
  // and with it every 8-byte element, is 8-byte aligned in the file.
  json.append((8 - json.size() % 8) % 8, ' ');

  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i)
    prefix[i] =
        static_cast<char>(static_cast<uint64_t>(json.size()) >> (8 * i));
  dataStart = 8 + json.size();
  return prefix + json;
}
