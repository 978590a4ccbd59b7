// RUN: loom-opt %s --split-input-file --loom-contraction-order | FileCheck %s

// The head-split projection read only by attention is computed in the order
// a GEMM writes ([b, s, h, e]) and read through a transpose.
// CHECK-LABEL: func.func @head_split
// CHECK:       %[[G:.*]] = loom.einsum "bsd,dhe->bshe" %arg0, %arg1 : (tensor<2x8x16xbf16>, tensor<16x4x4xbf16>) -> tensor<2x8x4x4xbf16>
// CHECK-NEXT:  %[[Q:.*]] = loom.transpose %[[G]] perm = [0, 2, 1, 3] : tensor<2x8x4x4xbf16> -> tensor<2x4x8x4xbf16>
// CHECK-NEXT:  loom.attention %[[Q]], %[[Q]], %[[Q]] causal
func.func @head_split(%x: tensor<2x8x16xbf16> {loom.input = "x"}, %w: tensor<16x4x4xbf16> {loom.input = "w"}) -> tensor<2x4x8x4xbf16> attributes {loom.model} {
  %q = loom.einsum "bsd,dhe->bhse" %x, %w : (tensor<2x8x16xbf16>, tensor<16x4x4xbf16>) -> tensor<2x4x8x4xbf16>
  %o = loom.attention %q, %q, %q causal scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  return %o : tensor<2x4x8x4xbf16>
}

// -----

// Left alone: a result also read by something else than attention, one
// already in GEMM order, and a one-operand einsum.
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:   loom.transpose
// CHECK:       loom.einsum "bsd,dhe->bhse"
// CHECK:       loom.einsum "bsd,dhe->bshe"
// CHECK:       loom.einsum "bshe->bhse"
// CHECK-NOT:   loom.transpose
func.func @left_alone(%x: tensor<2x8x16xbf16> {loom.input = "x"}, %w: tensor<16x4x4xbf16> {loom.input = "w"}) -> (tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>) attributes {loom.model} {
  %q = loom.einsum "bsd,dhe->bhse" %x, %w : (tensor<2x8x16xbf16>, tensor<16x4x4xbf16>) -> tensor<2x4x8x4xbf16>
  %o = loom.attention %q, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %n = loom.einsum "bsd,dhe->bshe" %x, %w : (tensor<2x8x16xbf16>, tensor<16x4x4xbf16>) -> tensor<2x8x4x4xbf16>
  %t = loom.einsum "bshe->bhse" %n : (tensor<2x8x4x4xbf16>) -> tensor<2x4x8x4xbf16>
  %p = loom.attention %t, %t, %t scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  return %o, %q, %p : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>
}
