//===- loomrt-safetensors.cpp - Check, dump and write safetensors files ---===//
//
// Part of libloomrt's tests: a thin command-line face on Safetensors.h so
// that lit, the fuzzer (fuzz_safetensors.py) and the interop check against
// the safetensors Python package (interop_safetensors.py) can drive it.
//
//   loomrt-safetensors check FILE   validate; print "ok: N tensors"
//   loomrt-safetensors dump FILE    one line per tensor, in name order:
//                                   name dtype [shape] sum=S first=X
//   loomrt-safetensors write OUT    write a fixed file of every dtype
//
// Errors go to stderr as "loomrt-safetensors: error: MESSAGE" with exit
// code 1; no input may make it exit otherwise.
//
//===----------------------------------------------------------------------===//

#include "runtime/Safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

using namespace loomrt;

static int fail(const std::string &message) {
  fprintf(stderr, "loomrt-safetensors: error: %s\n", message.c_str());
  return 1;
}

//===----------------------------------------------------------------------===//
// Element conversion
//===----------------------------------------------------------------------===//

/// Little-endian load of `size` bytes, independent of the host's order.
static uint64_t loadLE(const unsigned char *p, size_t size) {
  uint64_t value = 0;
  for (size_t i = size; i-- > 0;)
    value = value << 8 | p[i];
  return value;
}

static float bitsToFloat(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

/// IEEE binary16 to float, exactly (every half is a float): subnormals are
/// mantissa * 2^-24, infinities and NaNs keep their sign.
static float halfToFloat(uint16_t half) {
  unsigned exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
  float magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);
  else if (exponent == 31)
    magnitude = mantissa ? NAN : INFINITY;
  else
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400),
                           static_cast<int>(exponent) - 25);
  return (half & 0x8000) ? -magnitude : magnitude;
}

/// double to IEEE binary16, rounding to nearest even like numpy's
/// float16(x): the value is scaled so that one unit is the spacing of halves
/// in its binade and rounded there (nearbyint rounds ties to even).
static uint16_t doubleToHalf(double value) {
  uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  double magnitude = std::fabs(value);
  if (std::isnan(value))
    return sign | 0x7E00;
  if (magnitude == 0)
    return sign;
  int exponent = std::max(std::ilogb(magnitude), -14);
  double units = std::nearbyint(std::ldexp(magnitude, 10 - exponent));
  if (units >= 2048) { // rounded up into the next binade
    units /= 2;
    ++exponent;
  }
  if (exponent > 15)
    return sign | 0x7C00;
  if (units < 1024) // subnormal (exponent is -14)
    return sign | static_cast<uint16_t>(units);
  return sign | static_cast<uint16_t>((exponent + 15) << 10) |
         static_cast<uint16_t>(static_cast<unsigned>(units) - 1024);
}

static bool isInteger(DType dtype) {
  return dtype == DType::I32 || dtype == DType::I64;
}

static double elementAsDouble(DType dtype, const unsigned char *p) {
  switch (dtype) {
  case DType::F32:
    return bitsToFloat(static_cast<uint32_t>(loadLE(p, 4)));
  case DType::BF16: // the upper half of an f32
    return bitsToFloat(static_cast<uint32_t>(loadLE(p, 2)) << 16);
  case DType::F16:
    return halfToFloat(static_cast<uint16_t>(loadLE(p, 2)));
  case DType::I32:
    return static_cast<int32_t>(loadLE(p, 4));
  case DType::I64:
    return static_cast<double>(static_cast<int64_t>(loadLE(p, 8)));
  }
  return 0;
}

static int64_t elementAsInt(DType dtype, const unsigned char *p) {
  return dtype == DType::I32 ? static_cast<int32_t>(loadLE(p, 4))
                             : static_cast<int64_t>(loadLE(p, 8));
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

static int runCheck(const std::string &path) {
  SafetensorsHeader header;
  std::string error;
  if (!readSafetensorsHeader(path, header, error))
    return fail(error);
  printf("ok: %zu tensors\n", header.tensors.size());
  return 0;
}

static int runDump(const std::string &path) {
  SafetensorsHeader header;
  std::string error;
  if (!readSafetensorsHeader(path, header, error))
    return fail(error);
  FILE *file = fopen(path.c_str(), "rb");
  if (!file)
    return fail(path + ": cannot open: " + strerror(errno));

  std::vector<const TensorEntry *> order;
  for (const TensorEntry &entry : header.tensors)
    order.push_back(&entry);
  std::sort(order.begin(), order.end(),
            [](const TensorEntry *a, const TensorEntry *b) {
              return a->name < b->name;
            });

  // Elements are summed in file order, in double, so that a reference can
  // reproduce the sum exactly with a plain left-to-right loop.
  std::vector<unsigned char> buffer(1 << 16);
  int status = 0;
  for (const TensorEntry *entry : order) {
    size_t elementSize = dtypeSize(entry->dtype);
    if (fseeko(file, static_cast<off_t>(header.dataStart + entry->begin),
               SEEK_SET) != 0) {
      status = fail(path + ": seek failed: " + strerror(errno));
      break;
    }
    double sum = 0;
    std::string first = "none";
    uint64_t left = entry->end - entry->begin;
    while (left > 0) {
      size_t chunk =
          static_cast<size_t>(std::min<uint64_t>(left, buffer.size() / 8 * 8));
      if (fread(buffer.data(), 1, chunk, file) != chunk) {
        status = fail(path + ": read failed in tensor '" + entry->name + "'");
        break;
      }
      if (first == "none") {
        char text[32];
        if (isInteger(entry->dtype))
          snprintf(text, sizeof(text), "%lld",
                   static_cast<long long>(
                       elementAsInt(entry->dtype, buffer.data())));
        else
          snprintf(text, sizeof(text), "%.9g",
                   elementAsDouble(entry->dtype, buffer.data()));
        first = text;
      }
      for (size_t offset = 0; offset < chunk; offset += elementSize)
        sum += elementAsDouble(entry->dtype, buffer.data() + offset);
      left -= chunk;
    }
    if (status)
      break;
    std::string shape = "[";
    for (size_t i = 0; i < entry->shape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(entry->shape[i]);
    shape += "]";
    printf("%s %s %s sum=%.9g first=%s\n", entry->name.c_str(),
           dtypeName(entry->dtype), shape.c_str(), sum, first.c_str());
  }
  fclose(file);
  return status;
}

/// Appends `value`'s low `size` bytes, little-endian.
static void storeLE(std::string &out, uint64_t value, size_t size) {
  for (size_t i = 0; i < size; ++i)
    out += static_cast<char>(value >> (8 * i));
}

static uint32_t floatBits(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

/// The fixed file interop_safetensors.py expects: one tensor of each dtype
/// with values that exercise signs, fractions, the f16 maximum and rounding,
/// and an i64 beyond 32 bits.
static int runWrite(const std::string &path) {
  std::vector<TensorEntry> tensors(5);
  std::vector<std::string> data(5);
  tensors[0].name = "a";
  tensors[0].dtype = DType::F32;
  tensors[0].shape = {2, 3};
  for (int i = 0; i < 6; ++i)
    storeLE(data[0], floatBits(0.5f * i - 1), 4);
  tensors[1].name = "b";
  tensors[1].dtype = DType::BF16;
  tensors[1].shape = {4};
  for (float value : {1.0f, 2.0f, 3.0f, -0.5f}) // exact in bf16
    storeLE(data[1], floatBits(value) >> 16, 2);
  tensors[2].name = "c";
  tensors[2].dtype = DType::F16;
  tensors[2].shape = {2, 2};
  for (double value : {0.25, -2.0, 65504.0, 1e-4})
    storeLE(data[2], doubleToHalf(value), 2);
  tensors[3].name = "d";
  tensors[3].dtype = DType::I32;
  tensors[3].shape = {3};
  for (int32_t value : {-1, 0, 7})
    storeLE(data[3], static_cast<uint32_t>(value), 4);
  tensors[4].name = "e";
  tensors[4].dtype = DType::I64;
  tensors[4].shape = {2};
  for (int64_t value : {int64_t(1) << 40, int64_t(-3)})
    storeLE(data[4], static_cast<uint64_t>(value), 8);

  uint64_t dataStart;
  std::string bytes =
      buildSafetensorsHeader(tensors, {{"format", "pt"}}, dataStart);
  for (const std::string &tensorData : data)
    bytes += tensorData;

  FILE *file = fopen(path.c_str(), "wb");
  if (!file)
    return fail(path + ": cannot create: " + strerror(errno));
  bool ok = fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  ok = (fclose(file) == 0) && ok;
  if (!ok)
    return fail(path + ": write failed: " + strerror(errno));
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: loomrt-safetensors check|dump|write FILE\n");
    return 2;
  }
  std::string command = argv[1], path = argv[2];
  if (command == "check")
    return runCheck(path);
  if (command == "dump")
    return runDump(path);
  if (command == "write")
    return runWrite(path);
  fprintf(stderr,
          "loomrt-safetensors: error: unknown command '%s' "
          "(check, dump, write)\n",
          command.c_str());
  return 2;
}
