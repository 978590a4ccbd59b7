// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// A collective started in the background: compute between loom.start and
// loom.wait overlaps with the communication.

loom.mesh @m ["dp" = 2, "tp" = 4]

// CHECK-LABEL: func.func @overlap
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<8x16xf32>)
func.func @overlap(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: %[[F:.*]] = loom.start -> !loom.future<tensor<8x16xf32>> {
  // CHECK-NEXT: %[[R:.*]] = loom.all_reduce %[[X]] on @m ["tp"] sum : tensor<8x16xf32>
  // CHECK-NEXT: loom.yield %[[R]] : tensor<8x16xf32>
  // CHECK-NEXT: }
  %f = loom.start -> !loom.future<tensor<8x16xf32>> {
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8x16xf32>
    loom.yield %r : tensor<8x16xf32>
  }
  // CHECK: %[[Z:.*]] = loom.relu %[[Y]]
  %z = loom.relu %y : tensor<8x16xf32>
  // CHECK: %[[V:.*]] = loom.wait %[[F]] : !loom.future<tensor<8x16xf32>>
  %v = loom.wait %f : !loom.future<tensor<8x16xf32>>
  // CHECK: loom.add %[[V]], %[[Z]]
  %s = loom.add %v, %z : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @gather_in_background
func.func @gather_in_background(%x: tensor<4x16xbf16>) -> tensor<8x16xbf16> {
  // CHECK: loom.start -> !loom.future<tensor<8x16xbf16>>
  // CHECK: loom.all_gather {{.*}} on @m ["dp"] dim 0
  %f = loom.start -> !loom.future<tensor<8x16xbf16>> {
    %g = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
    loom.yield %g : tensor<8x16xbf16>
  }
  %v = loom.wait %f : !loom.future<tensor<8x16xbf16>>
  return %v : tensor<8x16xbf16>
}

// A combined collective is started as one, with a future per member.
// CHECK-LABEL: func.func @combined_in_background
func.func @combined_in_background(%x: tensor<4x16xbf16>, %y: tensor<16x2xf32>) -> (tensor<8x16xbf16>, tensor<16x4xf32>) {
  // CHECK: %[[F:.*]]:2 = loom.start -> !loom.future<tensor<8x16xbf16>>, !loom.future<tensor<16x4xf32>> {
  // CHECK-NEXT: %[[C:.*]]:2 = loom.combined
  // CHECK: loom.yield %[[C]]#0, %[[C]]#1 : tensor<8x16xbf16>, tensor<16x4xf32>
  %f:2 = loom.start -> !loom.future<tensor<8x16xbf16>>, !loom.future<tensor<16x4xf32>> {
    %a, %b = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xf32>) {
      %g = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
      %h = loom.all_gather %y on @m ["dp"] dim 1 : tensor<16x2xf32> -> tensor<16x4xf32>
      loom.yield %g, %h : tensor<8x16xbf16>, tensor<16x4xf32>
    }
    loom.yield %a, %b : tensor<8x16xbf16>, tensor<16x4xf32>
  }
  // CHECK: loom.wait %[[F]]#1
  // CHECK: loom.wait %[[F]]#0
  %w = loom.wait %f#1 : !loom.future<tensor<16x4xf32>>
  %v = loom.wait %f#0 : !loom.future<tensor<8x16xbf16>>
  return %v, %w : tensor<8x16xbf16>, tensor<16x4xf32>
}

// A layer's gather started one iteration ahead.
// CHECK-LABEL: func.func @prefetched
func.func @prefetched(%x: tensor<4x16xf32>, %ws: tensor<3x8x16xf32>) -> tensor<4x16xf32> {
  %r = loom.repeat 3 carried(%x : tensor<4x16xf32>) stacked(%ws : tensor<3x8x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%c: tensor<4x16xf32>, %w: tensor<8x16xf32>):
    // CHECK: %[[F:.*]] = loom.start
    %f = loom.start -> !loom.future<tensor<16x16xf32>> {
      %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
      loom.yield %g : tensor<16x16xf32>
    }
    // CHECK: loom.wait %[[F]]
    // CHECK-NEXT: loom.prefetch %[[F]] : !loom.future<tensor<16x16xf32>>
    %v = loom.wait %f : !loom.future<tensor<16x16xf32>>
    loom.prefetch %f : !loom.future<tensor<16x16xf32>>
    %y = loom.matmul %c, %v : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    loom.yield %y : tensor<4x16xf32>
  }
  return %r : tensor<4x16xf32>
}
