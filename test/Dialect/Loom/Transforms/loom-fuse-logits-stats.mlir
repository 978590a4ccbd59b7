// RUN: loom-opt %s --split-input-file --loom-fuse-logits-stats --verify-diagnostics | FileCheck %s

// A tied output projection (a transposed embedding table) read by one
// softmax_stats and one pick, and by nothing else: one loom.logits_stats
// where the earlier of the two was, with the pick's location (the
// cross-entropy's), the logits' type, `partial` and the vocabulary group.
// The maximum's reader between the two still comes after it.
// CHECK-LABEL: func.func @tied
// CHECK-NOT:   loom.matmul
// CHECK:       %[[M:.*]], %[[S:.*]], %[[P:.*]] = loom.logits_stats %arg0, %0, %arg2 logits bf16 partial vocab on @m ["tp"] : tensor<2x4x8xbf16>, tensor<8x16xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
// CHECK-NEXT:  loom.all_reduce %[[M]]
// CHECK-NOT:   loom.softmax_stats
// CHECK-NOT:   loom.pick
// CHECK:       return {{.*}}%[[S]], %[[P]]
loom.mesh @m ["tp" = 2]
func.func @tied(%h: tensor<2x4x8xbf16>, %table: tensor<16x8xbf16>, %t: tensor<2x4xi32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %w = loom.transpose %table perm = [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
  %l = loom.matmul %h, %w : tensor<2x4x8xbf16>, tensor<8x16xbf16> -> tensor<2x4x16xbf16> loc("ce.loom":4:3)
  %m, %s = loom.softmax_stats %l partial : tensor<2x4x16xbf16> -> tensor<2x4xf32>, tensor<2x4xf32>
  %g = loom.all_reduce %m on @m ["tp"] max : tensor<2x4xf32>
  %p = loom.pick %l, %t vocab on @m ["tp"] : tensor<2x4x16xbf16>, tensor<2x4xi32> -> tensor<2x4xf32> loc("ce.loom":5:3)
  return %g, %s, %p : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// An untied projection [D, V] on one device: no `partial`, no group.
// CHECK-LABEL: func.func @untied
// CHECK:       loom.logits_stats %arg0, %arg1, %arg2 logits f32 : tensor<4x8xf32>, tensor<8x16xf32>, tensor<4xi32>
func.func @untied(%h: tensor<4x8xf32>, %w: tensor<8x16xf32>, %t: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %l = loom.matmul %h, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %p = loom.pick %l, %t : tensor<4x16xf32>, tensor<4xi32> -> tensor<4xf32>
  %m, %s = loom.softmax_stats %l : tensor<4x16xf32> -> tensor<4xf32>, tensor<4xf32>
  return %m, %s, %p : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// Logits that something else reads (here the function's result), that no
// pick reads, or whose targets come later than the statistics, are kept.
// CHECK-LABEL: func.func @kept
// CHECK-NOT:   loom.logits_stats
// CHECK-LABEL: func.func @no_pick
// CHECK-NOT:   loom.logits_stats
// CHECK-LABEL: func.func @late_targets
// CHECK-NOT:   loom.logits_stats
func.func @kept(%h: tensor<4x8xf32>, %w: tensor<8x16xf32>, %t: tensor<4xi32>) -> (tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %l = loom.matmul %h, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %m, %s = loom.softmax_stats %l : tensor<4x16xf32> -> tensor<4xf32>, tensor<4xf32>
  %p = loom.pick %l, %t : tensor<4x16xf32>, tensor<4xi32> -> tensor<4xf32>
  return %l, %m, %s, %p : tensor<4x16xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
func.func @no_pick(%h: tensor<4x8xf32>, %w: tensor<8x16xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %l = loom.matmul %h, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %m, %s = loom.softmax_stats %l : tensor<4x16xf32> -> tensor<4xf32>, tensor<4xf32>
  return %m, %s : tensor<4xf32>, tensor<4xf32>
}
func.func @late_targets(%h: tensor<4x8xf32>, %w: tensor<8x16xf32>, %t: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %l = loom.matmul %h, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %m, %s = loom.softmax_stats %l : tensor<4x16xf32> -> tensor<4xf32>, tensor<4xf32>
  %c = loom.cast %t : tensor<4xi64> -> tensor<4xi32>
  %p = loom.pick %l, %c : tensor<4x16xf32>, tensor<4xi32> -> tensor<4xf32>
  return %m, %s, %p : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// The op's verifier.
func.func @bad_rhs(%h: tensor<4x8xf32>, %w: tensor<4x8x16xf32>, %t: tensor<4xi32>) {
  // expected-error@+1 {{needs lhs [..., K] and rhs [K, V], got f32[4, 8] and f32[4, 8, 16]}}
  %m, %s, %p = loom.logits_stats %h, %w, %t logits f32 : tensor<4x8xf32>, tensor<4x8x16xf32>, tensor<4xi32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @bad_targets(%h: tensor<4x8xf32>, %w: tensor<8x16xf32>, %t: tensor<8xi32>) {
  // expected-error@+1 {{targets i32[8] must have the shape of lhs f32[4, 8] without its last dimension}}
  %m, %s, %p = loom.logits_stats %h, %w, %t logits f32 : tensor<4x8xf32>, tensor<8x16xf32>, tensor<8xi32> -> tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  return
}
