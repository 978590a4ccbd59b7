// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-fuse-softmax-stats | FileCheck %s

// A cross-entropy written out over bf16 logits widened to f32: the max and
// the sum of exp become one op that reads the bf16 logits; the max's other
// user (the add) takes the op's max; the cast stays for the pick.
// CHECK-LABEL: func.func @cross_entropy
// CHECK:       %[[C:.*]] = loom.cast %arg0
// CHECK-NEXT:  %[[M:.*]], %[[S:.*]] = loom.softmax_stats %arg0 : tensor<4x8xbf16> -> tensor<4xf32>, tensor<4xf32>
// CHECK-NOT:   loom.max
// CHECK-NOT:   loom.exp
// CHECK:       loom.pick %[[C]], %arg1
// CHECK:       %[[L:.*]] = loom.log %[[S]]
// CHECK:       loom.add %[[L]], %[[M]]
func.func @cross_entropy(%x: tensor<4x8xbf16>, %t: tensor<4xi32>) -> tensor<4xf32> {
  %c = loom.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %m = loom.max %c dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %r = loom.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %d = loom.sub %c, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = loom.exp %d : tensor<4x8xf32>
  %s = loom.sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %p = loom.pick %c, %t : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %l = loom.log %s : tensor<4xf32>
  %a = loom.add %l, %m : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %o = loom.sub %a, %p : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %o : tensor<4xf32>
}

// -----

// f32 input, no cast; a rank-3 row set.
// CHECK-LABEL: func.func @f32_rows
// CHECK-NEXT:  %[[M:.*]], %[[S:.*]] = loom.softmax_stats %arg0 : tensor<2x3x8xf32> -> tensor<2x3xf32>, tensor<2x3xf32>
// CHECK-NEXT:  return %[[M]], %[[S]]
func.func @f32_rows(%x: tensor<2x3x8xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %m = loom.max %x dims = [2] : tensor<2x3x8xf32> -> tensor<2x3xf32>
  %r = loom.reshape %m : tensor<2x3xf32> -> tensor<2x3x1xf32>
  %d = loom.sub %x, %r : tensor<2x3x8xf32>, tensor<2x3x1xf32> -> tensor<2x3x8xf32>
  %e = loom.exp %d : tensor<2x3x8xf32>
  %s = loom.sum %e dims = [2] : tensor<2x3x8xf32> -> tensor<2x3xf32>
  return %m, %s : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Left alone: the exps have another user (they must reach memory anyway);
// the max is over a dimension other than the last; the sum subtracts from
// another value than the max's input.
// CHECK-LABEL: func.func @not_fused
// CHECK-NOT:   loom.softmax_stats
// CHECK:       return
func.func @not_fused(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>) {
  %m = loom.max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %r = loom.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %d = loom.sub %x, %r : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = loom.exp %d : tensor<4x8xf32>
  %s = loom.sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %m0 = loom.max %x dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %r0 = loom.reshape %m0 : tensor<8xf32> -> tensor<1x8xf32>
  %d0 = loom.sub %x, %r0 : tensor<4x8xf32>, tensor<1x8xf32> -> tensor<4x8xf32>
  %e0 = loom.exp %d0 : tensor<4x8xf32>
  %s0 = loom.sum %e0 dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
  %m1 = loom.max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %r1 = loom.reshape %m1 : tensor<4xf32> -> tensor<4x1xf32>
  %d1 = loom.sub %y, %r1 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e1 = loom.exp %d1 : tensor<4x8xf32>
  %s1 = loom.sum %e1 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %s, %e, %s0, %s1 : tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4xf32>
}

// -----

// A maximum finished by a collective first (the vocabulary split over tp)
// is left as it is.
// CHECK-LABEL: func.func @vocab_split
// CHECK-NOT:   loom.softmax_stats
// CHECK:       loom.all_reduce
loom.mesh @m ["tp" = 2]
func.func @vocab_split(%x: tensor<4x4xf32>) -> tensor<4xf32> {
  %m = loom.max %x dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  %g = loom.all_reduce %m on @m ["tp"] max : tensor<4xf32>
  %r = loom.reshape %g : tensor<4xf32> -> tensor<4x1xf32>
  %d = loom.sub %x, %r : tensor<4x4xf32>, tensor<4x1xf32> -> tensor<4x4xf32>
  %e = loom.exp %d : tensor<4x4xf32>
  %s = loom.sum %e dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// The op's verifier.
func.func @bad_shape(%x: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4xf32>) {
  // expected-error@+1 {{results must have the input's shape}}
  %m, %s = loom.softmax_stats %x : tensor<4x8xf32> -> tensor<8xf32>, tensor<4xf32>
  return %m, %s : tensor<8xf32>, tensor<4xf32>
}
