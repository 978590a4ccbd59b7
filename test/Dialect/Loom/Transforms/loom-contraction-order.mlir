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

// -----

// The out-projection reads the attention result through a transpose into the
// order its GEMM reads ([b, s, h, e]: m letters, then k letters), which
// attention writes directly (Views.h storageTranspose); as the second operand
// the GEMM reads it in batch, k, n order (here [b, s, h, e] too).
// CHECK-LABEL: func.func @out_projection
// CHECK:       %[[O:.*]] = loom.attention
// CHECK-NEXT:  %[[T:.*]] = loom.transpose %[[O]] perm = [0, 2, 1, 3] : tensor<2x4x8x4xbf16> -> tensor<2x8x4x4xbf16>
// CHECK-NEXT:  loom.einsum "bshe,hed->bsd" %[[T]], %arg2
// CHECK:       %[[P:.*]] = loom.attention
// CHECK-NEXT:  %[[U:.*]] = loom.transpose %[[P]] perm = [0, 2, 1, 3] : tensor<2x4x8x4xbf16> -> tensor<2x8x4x4xbf16>
// CHECK-NEXT:  loom.einsum "bsh,bshe->bse" %arg3, %[[U]]
func.func @out_projection(%q: tensor<2x4x8x4xbf16> {loom.input = "q"}, %k: tensor<2x4x8x4xbf16> {loom.input = "k"}, %wo: tensor<4x4x16xbf16> {loom.input = "wo"}, %g: tensor<2x8x4xbf16> {loom.input = "g"}) -> (tensor<2x8x16xbf16>, tensor<2x8x4xbf16>) attributes {loom.model} {
  %o = loom.attention %q, %k, %k causal scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %r = loom.einsum "bhse,hed->bsd" %o, %wo : (tensor<2x4x8x4xbf16>, tensor<4x4x16xbf16>) -> tensor<2x8x16xbf16>
  %p = loom.attention %k, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %z = loom.einsum "bsh,bhse->bse" %g, %p : (tensor<2x8x4xbf16>, tensor<2x4x8x4xbf16>) -> tensor<2x8x4xbf16>
  return %r, %z : tensor<2x8x16xbf16>, tensor<2x8x4xbf16>
}

// -----

// Left alone: a result read twice, one already in the GEMM's order, one
// whose GEMM order would move the result's columns (attention writes whole
// rows), and one with a letter summed alone.
// CHECK-LABEL: func.func @results_left_alone
// CHECK-NOT:   loom.transpose
// CHECK:       loom.einsum "bhse,hed->bsd"
// CHECK:       loom.einsum "bhse,hed->bsd"
// CHECK:       loom.einsum "bhse,ed->bhsd"
// CHECK:       loom.einsum "bhse,hsd->bed"
// CHECK:       loom.einsum "bhse,hd->bsd"
// CHECK-NOT:   loom.transpose
func.func @results_left_alone(%q: tensor<2x4x8x4xbf16> {loom.input = "q"}, %wo: tensor<4x4x16xbf16> {loom.input = "wo"}, %we: tensor<4x16xbf16> {loom.input = "we"}, %ws: tensor<4x8x16xbf16> {loom.input = "ws"}, %wh: tensor<4x16xbf16> {loom.input = "wh"}) -> (tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x16xbf16>, tensor<2x8x16xbf16>) attributes {loom.model} {
  %o = loom.attention %q, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %r1 = loom.einsum "bhse,hed->bsd" %o, %wo : (tensor<2x4x8x4xbf16>, tensor<4x4x16xbf16>) -> tensor<2x8x16xbf16>
  %r2 = loom.einsum "bhse,hed->bsd" %o, %wo : (tensor<2x4x8x4xbf16>, tensor<4x4x16xbf16>) -> tensor<2x8x16xbf16>
  %o2 = loom.attention %q, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %r3 = loom.einsum "bhse,ed->bhsd" %o2, %we : (tensor<2x4x8x4xbf16>, tensor<4x16xbf16>) -> tensor<2x4x8x16xbf16>
  %o3 = loom.attention %q, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %r4 = loom.einsum "bhse,hsd->bed" %o3, %ws : (tensor<2x4x8x4xbf16>, tensor<4x8x16xbf16>) -> tensor<2x4x16xbf16>
  %o4 = loom.attention %q, %q, %q scale = 5.000000e-01 : tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16>, tensor<2x4x8x4xbf16> -> tensor<2x4x8x4xbf16>
  %r5 = loom.einsum "bhse,hd->bsd" %o4, %wh : (tensor<2x4x8x4xbf16>, tensor<4x16xbf16>) -> tensor<2x8x16xbf16>
  return %r1, %r2, %r3, %r4, %r5 : tensor<2x8x16xbf16>, tensor<2x8x16xbf16>, tensor<2x4x8x16xbf16>, tensor<2x4x16xbf16>, tensor<2x8x16xbf16>
}
