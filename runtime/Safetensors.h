//===- Safetensors.h - safetensors headers: parse, validate, build --------===//
//
// The safetensors format (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON mapping each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the first byte after the header) plus an optional "__metadata__" object
// of strings, then the raw little-endian data.
//
// Part of libloomrt: no MLIR, no LLVM, no exceptions, no MPI.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_SAFETENSORS_H
#define LOOMRT_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace loomrt {

/// Element types a Loom tensor can have; the numbering is the ABI's
/// (loomrt.h LOOMRT_F32 ...).
enum class DType : int { F32 = 0, BF16 = 1, F16 = 2, I32 = 3, I64 = 4 };

/// Bytes per element.
size_t dtypeSize(DType dtype);
/// The safetensors spelling: "F32", "BF16", "F16", "I32", "I64".
const char *dtypeName(DType dtype);
/// Parses a safetensors dtype spelling; false for any other (e.g. "F64").
bool parseDType(const std::string &name, DType &dtype);

struct TensorEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Byte offsets relative to the start of the data section: [begin, end).
  uint64_t begin = 0, end = 0;
};

struct SafetensorsHeader {
  /// Tensors in data-offset order.
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;
  /// Absolute file offset of the data section (8 + header length).
  uint64_t dataStart = 0;
  uint64_t fileSize = 0;
  /// The entry named `name`, or null.
  const TensorEntry *find(const std::string &name) const;
};

/// Reads and validates the header of the file at `path` (only the first 8 + N
/// bytes are read; the data section is checked against the file's size). On
/// failure returns false and sets `error` to one line naming the file and the
/// problem ("PATH: truncated file: the header says 812 bytes but only 40
/// follow", ...).
/// Checks: the file opens; it has at least 8 bytes; the header length fits
/// the file (and is below 100 MB); the JSON is well formed UTF-8 and
/// an object of objects with exactly the keys dtype/shape/data_offsets;
/// dtypes are known; shapes are non-negative integers; each tensor's byte
/// length is its element count times the dtype size; the data regions are
/// in bounds, do not overlap and together cover the data section exactly.
bool readSafetensorsHeader(const std::string &path, SafetensorsHeader &header,
                           std::string &error);

/// The same checks over an in-memory image of a whole file (for tests and
/// fuzzing). `error` is the same one-line message without the "PATH: " prefix;
/// callers that know a name prepend it.
bool parseSafetensors(const void *data, uint64_t size,
                      SafetensorsHeader &header, std::string &error);

/// Lays out `tensors` back to back in the given order (filling begin/end)
/// and returns the file's first bytes: the 8-byte length and the JSON header,
/// padded with spaces so that the data section starts at a multiple of 8.
/// `dataStart` is set to the size of that prefix.
std::string
buildSafetensorsHeader(std::vector<TensorEntry> &tensors,
                       const std::map<std::string, std::string> &metadata,
                       uint64_t &dataStart);

} // namespace loomrt

#endif // LOOMRT_SAFETENSORS_H
