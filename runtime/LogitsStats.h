//===- LogitsStats.h - A cross-entropy's logits a block at a time ---------===//
//
// Part of the Loom project.
//
// loomrt_logits_stats (loom.logits_stats) makes the logits a block of
// columns at a time: each block is one GEMM of the product's descriptor
// narrowed to those columns, then the block's softmax statistics and picks,
// merged into the rows' running ones. Shared by the CPU and CUDA backends
// (the merge also runs in a kernel).
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_LOGITSSTATS_H
#define LOOMRT_LOGITSSTATS_H

#include "loomrt.h"
#include "runtime/Elements.h"
#include "runtime/SoftmaxStats.h"

namespace loomrt {

/// The logits' rows and columns: the product's result is [rows..., vocab],
/// its vocabulary the one n dimension, last in b's and out's views.
inline int64_t logitsRows(const loomrt_contraction &c) {
  int64_t rows = 1;
  for (int d = 0; d + 1 < c.out.num_dims; ++d)
    rows *= c.out.size[d];
  return rows;
}
inline int64_t logitsVocab(const loomrt_contraction &c) {
  return c.out.size[c.out.num_dims - 1];
}

/// The product of columns [start, start + count) into a row-major
/// [rows, count] block; b's pointer moves by `*bOffset` elements.
inline loomrt_contraction logitsBlock(const loomrt_contraction &c,
                                      int64_t start, int64_t count,
                                      int64_t *bOffset) {
  loomrt_contraction block = c;
  int bColumns = c.b.num_dims - 1, outColumns = c.out.num_dims - 1;
  *bOffset = start * c.b.stride[bColumns];
  block.b.size[bColumns] = count;
  int64_t stride = 1;
  for (int d = outColumns; d >= 0; --d) {
    block.out.size[d] = d == outColumns ? count : c.out.size[d];
    block.out.stride[d] = stride;
    stride *= block.out.size[d];
  }
  return block;
}

/// Columns per block: `asked` (LOOMRT_LOGITS_COLUMNS, for tests that need
/// many blocks of a small vocabulary) when it is not 0, else as many as
/// `bytes` of logits hold, in multiples of 128 (whole GEMM tiles).
inline int64_t logitsBlockColumns(int64_t rows, int64_t vocab,
                                  int64_t elementBytes, int64_t bytes,
                                  int64_t asked) {
  int64_t columns = asked;
  if (columns <= 0) {
    columns = bytes / (rows > 0 ? rows * elementBytes : 1) / 128 * 128;
    if (columns < 128)
      columns = 128;
  }
  return columns < vocab ? columns : vocab;
}

/// A GPU's bytes of logits a block: 1/64 of the device's memory, and at
/// least 96 MiB. Fewer, wider blocks made GPT-2 small's step faster on an
/// H200 (7.635 ms with its 786 MiB of logits in one block, 7.875 in 96 MiB
/// blocks, 8.611 in 24 MiB ones: 2026-11-30, docs/performance.md), and
/// 1/64 of the memory costs a run little room (2.2 GiB of an H200's 140).
/// From the device's total, not its free memory, so that a program's
/// blocks, and so its last bits, do not change from run to run.
constexpr int64_t kGpuLogitsMemoryShare = 64;
constexpr int64_t kGpuLogitsLeastBytes = int64_t(96) << 20;
inline int64_t gpuLogitsBlockBytes(int64_t deviceMemory) {
  const int64_t share = deviceMemory / kGpuLogitsMemoryShare;
  return share > kGpuLogitsLeastBytes ? share : kGpuLogitsLeastBytes;
}

/// A CPU's bytes of logits a block: few enough that re-reading the rows'
/// activations for each block costs little beside the GEMMs (4 such blocks
/// were faster than one on the CPU: docs/performance.md, 2026-11-30).
constexpr int64_t kCpuLogitsBlockBytes = int64_t(32) << 20;

/// A product's logits in blocks of columns: `forEach` runs
/// fn(product narrowed to the block, b at the block, start, count).
struct LogitsBlocks {
  int64_t rows, vocab, columns;
  LogitsBlocks(const loomrt_contraction &c, int64_t blockBytes,
               int64_t askedColumns)
      : rows(logitsRows(c)), vocab(logitsVocab(c)),
        columns(logitsBlockColumns(rows, vocab, elementBytes(c.out_dtype),
                                   blockBytes, askedColumns)) {}
  int64_t blockElements() const { return rows * columns; }
  template <typename Fn>
  void forEach(const loomrt_contraction &c, const void *b, Fn fn) const {
    for (int64_t start = 0; start < vocab; start += columns) {
      int64_t count = vocab - start < columns ? vocab - start : columns;
      int64_t bOffset = 0;
      loomrt_contraction block = logitsBlock(c, start, count, &bOffset);
      fn(block,
         static_cast<const char *>(b) +
             bOffset * int64_t(elementBytes(c.b_dtype)),
         start, count);
    }
  }
};

/// Merges one block's statistics (loomrt_softmax_stats with `partial`) and
/// pick (0 unless the target is in the block) into a row's running ones;
/// `first` starts them.
LOOMRT_INLINE void mergeLogitsBlock(float *max, float *sum, float *picked,
                                    float blockMax, float blockSum,
                                    float blockPicked, bool first) {
  SoftmaxStats stats = first ? emptyStats() : SoftmaxStats{*max, *sum};
  mergeStats(stats, SoftmaxStats{blockMax, blockSum});
  *max = stats.max;
  *sum = stats.sum;
  *picked = (first ? 0.0f : *picked) + blockPicked;
}

} // namespace loomrt

#endif // LOOMRT_LOGITSSTATS_H
