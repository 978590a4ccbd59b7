//===- Views.h - Values stored in another value's buffer ------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The memory plan (loom-plan-memory), the report's kernel list and the
// emitters must agree on which values are views: they get no buffer and no
// kernel, and keep the buffer they view alive as long as they are used.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H
#define LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace loom {

/// Whether `op` is a transpose that needs no buffer and no kernel: every
/// user reads its input through permuted strides. Contractions (matmul,
/// einsum, and loom.logits_stats's product) read any view; attention reads q, k and v views whose last
/// dimension stays last and whose batch dimensions but the last merge into
/// one stride (loomrt_attention_strides). The tied output projection
/// `h @ transpose(wte)` reads the embedding table as it is, and attention
/// reads head-split projections laid out [b, s, h, e] as [b, h, s, e].
bool isTransposeView(mlir::Operation *op);

/// Whether every reader of `value` would read it through strides if it were
/// the transpose by `perm` of a row-major value: a transpose made there
/// would be a view (isTransposeView). False where nothing reads it.
bool readersTakeTransposeOf(mlir::Value value, llvm::ArrayRef<int64_t> perm);

/// A transpose's element strides into its input's buffer, per result
/// dimension (result dimension i is input dimension perm[i]).
llvm::SmallVector<int64_t> transposeStrides(mlir::Operation *transpose);
/// The same over a row-major input of this shape.
llvm::SmallVector<int64_t> transposeStrides(llvm::ArrayRef<int64_t> inputShape,
                                            llvm::ArrayRef<int64_t> perm);

/// A value's element strides in the buffer it is stored in (row-major but
/// for transpose views, values stored in their reader's order, strided
/// pieces, pieces written into a concatenation, and reshapes of those).
llvm::SmallVector<int64_t> stridesInBuffer(mlir::Value value);
/// Whether `value` is stored row-major (stridesInBuffer is its shape's
/// row-major strides).
bool isRowMajorInBuffer(mlir::Value value);

/// The element strides of a reshape to `outShape` of a value stored at
/// `inStrides`, or none where some output dimension would have to step
/// across two of the input's runs (dimensions that do not step over the
/// ones after them whole): a reshape of a strided piece is a view only
/// where this finds strides.
std::optional<llvm::SmallVector<int64_t>>
reshapeStrides(llvm::ArrayRef<int64_t> inShape,
               llvm::ArrayRef<int64_t> inStrides,
               llvm::ArrayRef<int64_t> outShape);

/// The transpose in whose order `value` is stored instead of row-major, or
/// null: an attention result whose one user is a transpose read only by
/// contractions, when attention can write that order through strides. The
/// transpose is then a view with row-major strides, so that the
/// out-projection `bhse,hed->bsd` (as `bshe,hed->bsd`) is one plain GEMM.
mlir::Operation *storageTranspose(mlir::Value value);

/// A two-operand contraction's letters as the emitters group them (each
/// group in order of first appearance in the operands): batch (in both
/// operands and the result), m (first operand and result), n (second
/// operand and result), k (both operands only), and letters of one operand
/// only (summed before the product).
struct ContractionLetters {
  std::string batch, m, n, k, aSum, bSum;
};
ContractionLetters contractionLetters(llvm::StringRef a, llvm::StringRef b,
                                      llvm::StringRef out);

/// Attention's view of a [..., rows, cols] operand with these element
/// strides: the batch dimensions as `outer` (all but the last, which must
/// merge into one stride) and `inner` (the last), and the row stride;
/// false when it does not fit (columns not contiguous, outer dims that do
/// not merge).
struct AttentionView {
  int64_t outerStride = 0, innerStride = 0, rowStride = 0;
};
bool attentionView(llvm::ArrayRef<int64_t> shape,
                   llvm::ArrayRef<int64_t> strides, AttentionView &view);

/// How a row kernel (a norm) reaches the rows of a [..., n] value stored at
/// `strides`: row r starts at (r / group) * groupStride + (r % group) *
/// rowStride (loomrt_rows). None where a row's elements are not contiguous
/// or its leading dimensions do not form at most two runs (dimensions that
/// step over the ones after them whole): q's heads [b, h, s, e] of a
/// projection [b, h, s, 3e] are one run, rows 3e apart; [b, s, h, e] of a
/// projection [b, s, 3, h, e] are two, groups of h rows e apart.
struct RowsView {
  int64_t group = 1, groupStride = 0, rowStride = 0;
};
std::optional<RowsView> rowsView(llvm::ArrayRef<int64_t> shape,
                                 llvm::ArrayRef<int64_t> strides);

/// Whether `op`'s results are views (reshape, shard, a transpose view, a
/// part view): no buffer, no kernel; or `op` is a concatenation whose every
/// operand is written into it in place (inPlaceConcatOf): a buffer, but no
/// kernel. The memory plan, the report and the emitters ask this.
bool isView(mlir::Operation *op);

/// Whether `op` is a `loom.slice`, `loom.split` or `loom.all_slice` whose
/// results are read in place from its input's buffer: each is one
/// contiguous run of the input as stored (row-major), so it is the input's
/// buffer from an offset on (partViewBytes, and for an all_slice the rank's
/// index in its group times the piece's extent along the cut dimension: an
/// ArenaStep). Every dimension before the last one cut keeps one index,
/// every one after it is whole: some of a stack's rows, some of one row's
/// columns, a rank's rows of a replicated batch. Pieces that are not such
/// runs (some columns of every row) are views too where every reader takes
/// strides (element-wise ops, fusion groups, contractions, concatenations,
/// attention, and transposes and reshapes read only by those): they step
/// through the input's buffer as the input does (stridesInBuffer). An
/// all_slice that the model returns, directly or through views, is copied:
/// the runtime's table of outputs holds fixed offsets.
bool isPartView(mlir::Operation *op);
/// Why a slice, split or all_slice is copied into a buffer of its own
/// rather than read in place (`--explain` prints it for each all_slice);
/// empty for a part view.
llvm::StringRef whyPartCopied(mlir::Operation *op);
/// Why a kernel that only moves bytes (a slice, split or all_slice; a
/// transpose; a concatenation) copies them rather than being read in
/// place, naming the first reader or piece that stops it
/// (`loom.layernorm at model.loom:12:7 does not`); empty for a view and
/// for any other op. `--report` prints it for each such kernel.
std::string whyCopied(mlir::Operation *op);
/// Where the piece `part` of a slice or split starts in that op's input,
/// per dimension.
llvm::SmallVector<int64_t> pieceStart(mlir::OpResult part);
/// Where a part view's result starts in its input's buffer, in bytes (for
/// an all_slice, the part that does not depend on the rank: 0).
int64_t partViewBytes(mlir::OpResult part);

/// Whether `op` is a `loom.concat` read in place from the model's
/// arguments (parameters, inputs: never written during a step) that its
/// inputs are stored in, which the memory plan places side by side in
/// this order (concatViewArguments): every piece one contiguous run of the
/// result, the first input its argument's bytes from some offset to the
/// end, each other input an argument whole, and each argument a piece of
/// no other concatenation. A rotated loop's norm gains, the stack from its
/// second row on and then the final norm's, are one.
bool isConcatView(mlir::Operation *op);
/// The arguments a concat view's inputs are stored in, in order; empty for
/// any other op.
llvm::SmallVector<mlir::BlockArgument> concatViewArguments(mlir::Operation *op);

/// The `loom.concat` that `value` is written into in place, or null: the
/// value's one use is as an operand of that concatenation, in the block
/// that makes it, and its op can write through strides (an element-wise
/// op, a fusion group without a reduction, a matmul or an einsum, or the
/// batched einsum that loom-batch-contractions makes of several), so it
/// writes its piece of the concatenation's buffer where the concatenation
/// would have copied it, and the concatenation copies only its other
/// operands. A concatenation that a loop's iteration yields, or that
/// initialises a loop's carried value, directly keeps copying; one yielded
/// through a view is written in place, and the memory plan lends its
/// buffer to the loop only where no read of the carried value comes after
/// its first piece's write.
mlir::Operation *inPlaceConcatOf(mlir::Value value);
/// Where a piece written in place starts in its concatenation's buffer, in
/// bytes.
int64_t concatPieceBytes(mlir::Value piece);

/// Whether `value` is its storage's buffer (the value viewedValue leads
/// to in the end) whole, from its first byte: no part view or concat view
/// on the way.
/// Only such a value may lend that buffer to another (a loop's carried
/// value, a result written in place).
bool viewsWholeBuffer(mlir::Value value);

/// Whether `op` computes something a started collective can communicate
/// beside: a kernel, or a loop of them; not a view, a constant, a
/// collective or a start or wait. The overlap pass and `--explain` count
/// these.
bool isComputation(mlir::Operation *op);

/// The value whose buffer `value` uses (reshape and shard results, part
/// views from an offset on, a concat view its first input's, a repeat's carried and stacked arguments,
/// transposes read only by contractions, a loom.combined's results: its
/// members', a loom.start's futures and their loom.wait results: the
/// started collective's), or null when it has a buffer of its own.
mlir::Value viewedValue(mlir::Value value);

/// One term of an ArenaAddress: `bytes` times an index known only as the
/// program runs: `repeat`'s iteration number (or, for `parity`, that
/// number's lowest bit), or, where `groupAxes` is set (an all_slice view;
/// `repeat` is null), the rank's index in its group over those mesh axes,
/// of `groupSize` ranks.
struct ArenaStep {
  mlir::Operation *repeat;
  int64_t bytes;
  bool parity = false;
  mlir::ArrayAttr groupAxes = {};
  int64_t groupSize = 0;
  /// The largest index the step takes.
  int64_t lastIndex() const;
  bool operator==(const ArenaStep &other) const {
    return repeat == other.repeat && bytes == other.bytes &&
           parity == other.parity && groupAxes == other.groupAxes;
  }
};

/// Where a value of a planned program (loom-plan-memory) lives in the
/// arena: its buffer's offset (-1 when the plan gave it none) plus, for each
/// `loom.repeat` it is a stacked slice of (outermost first), that repeat's
/// iteration number times the slice's bytes. A result of a collective that
/// a `loom.prefetch` starts one iteration ahead alternates between two
/// buffers: plus the iteration's parity times its bytes. `bufferBytes` is
/// the size of the whole buffer (a stacked value's, for a slice; both, for
/// a prefetched result).
struct ArenaAddress {
  int64_t offset = -1;
  int64_t bufferBytes = 0;
  llvm::SmallVector<ArenaStep> steps;
};

/// The loom.start holding `op` (directly, or as a member of a
/// loom.combined) when a loom.prefetch starts it one iteration ahead; null
/// otherwise.
mlir::Operation *prefetchedStartOf(mlir::Operation *op);
ArenaAddress arenaAddress(mlir::Value value);

/// A matmul of these shapes as an einsum spec: batch dimensions broadcast,
/// and a size-1 or missing batch dimension of one operand gets a letter of
/// its own (summed over one element), so it does not tie the operands.
std::string matmulSpec(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs,
                       llvm::ArrayRef<int64_t> result);

/// One copy among those that end a repeat's iteration: carried buffer `to`
/// (or the scratch) takes the contents of carried buffer `from`, of the
/// scratch, or (kYieldedValue) of the value yielded for `to`.
struct CarriedMove {
  static constexpr int kScratch = -1, kYieldedValue = -2;
  int to, from;
};

/// The copies that give each carried buffer its next value, in an order
/// that reads every buffer before overwriting it. `sources[i]` is i when
/// buffer i already holds its next value, j when carried buffer j does,
/// or kYieldedValue. Values that trade places (a cycle of j's) go round
/// through one scratch buffer; the memory plan reserves one for a repeat
/// whose moves use it, and the emitters make exactly these copies.
llvm::SmallVector<CarriedMove> carriedMoves(llvm::ArrayRef<int> sources);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_TRANSFORMS_VIEWS_H
