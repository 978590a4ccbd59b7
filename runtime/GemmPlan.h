//===- GemmPlan.h - Strided contractions as strided-batched GEMMs ---------===//
//
// A contraction's operands and result are strided views (loomrt.h). Where
// their strides allow, a GEMM library can read and write them in place:
// each view must be a matrix with one unit stride per GEMM call, plus one
// batch dimension with a constant stride; any further dimensions become
// separate calls. Then no operand is packed and no result scattered, which
// for a head-split projection (`bsd,dhe->bhse`) saves two passes over memory
// per GEMM. The mapping is host logic, tested on the CPU against a direct
// evaluation of the views (unittests/GemmPlanTest.cpp); the CUDA backend
// runs it through cuBLASLt.
//===----------------------------------------------------------------------===//
#ifndef LOOMRT_GEMMPLAN_H
#define LOOMRT_GEMMPLAN_H

#include "loomrt.h"

#include <array>
#include <vector>

namespace loomrt {

/// D = op(X) op(Y) in column-major terms, `batch` times (matrix i at
/// X + i * strideX, ...), once per entry of `calls` (element offsets into
/// a, b and out). D is the result C when C's m dimension has unit stride,
/// its transpose otherwise; X and Y are then A and B, or B^T and A^T.
struct StridedGemm {
  bool xIsA = false;
  int64_t rows = 1, cols = 1, depth = 1; // D is rows x cols; depth = K
  bool transX = false, transY = false;   // stored X is depth x rows if set
  int64_t ldx = 1, ldy = 1, ldd = 1;
  int64_t batch = 1, strideX = 0, strideY = 0, strideD = 0;
  std::vector<std::array<int64_t, 3>> calls; // offsets into a, b, out
};

/// Plans `c` (two operands, no pre-summed dimensions) as at most `maxCalls`
/// strided-batched GEMMs over the views as they are; false when a view does
/// not fit (a dimension pair with no unit stride, a broadcast inside a
/// matrix, contraction dimensions that do not collapse into one).
bool planStridedGemm(const loomrt_contraction &c, StridedGemm &plan,
                     int maxCalls = 64);

} // namespace loomrt

#endif // LOOMRT_GEMMPLAN_H
