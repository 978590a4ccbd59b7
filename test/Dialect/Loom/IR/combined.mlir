// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// Collectives of one kind and group run as one (loom-combine-collectives
// makes these): the body's members, then the yield of their results.

loom.mesh @m ["dp" = 2, "tp" = 4]

// CHECK-LABEL: func.func @gathers
// CHECK-NEXT:  %[[C:.*]]:2 = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
// CHECK-NEXT:    %[[A:.*]] = loom.all_gather %arg0 on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT:    %[[B:.*]] = loom.all_gather %arg1 on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
// CHECK-NEXT:    loom.yield %[[A]], %[[B]] : tensor<8x16xbf16>, tensor<16x4xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  return %[[C]]#0, %[[C]]#1
func.func @gathers(%x: tensor<4x16xbf16>, %y: tensor<16x2xbf16>) -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
  %a, %b = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
    %0 = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
    %1 = loom.all_gather %y on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
    loom.yield %0, %1 : tensor<8x16xbf16>, tensor<16x4xbf16>
  }
  return %a, %b : tensor<8x16xbf16>, tensor<16x4xbf16>
}

// CHECK-LABEL: func.func @sums_and_scatters
// CHECK:       loom.combined -> (tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>)
// CHECK:       loom.combined -> (tensor<1x8xf32>, tensor<4x2xf32>)
func.func @sums_and_scatters(%x: tensor<4xf32>, %y: tensor<2x3xf32>, %z: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<1x8xf32>) {
  %s:3 = loom.combined -> (tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>) {
    %0 = loom.all_reduce %x on @m ["dp", "tp"] max : tensor<4xf32>
    %1 = loom.all_reduce %y on @m ["dp", "tp"] max : tensor<2x3xf32>
    %2 = loom.all_reduce %x on @m ["dp", "tp"] max : tensor<4xf32>
    loom.yield %0, %1, %2 : tensor<4xf32>, tensor<2x3xf32>, tensor<4xf32>
  }
  %r:2 = loom.combined -> (tensor<1x8xf32>, tensor<4x2xf32>) {
    %0 = loom.reduce_scatter %z on @m ["tp"] dim 0 sum : tensor<4x8xf32> -> tensor<1x8xf32>
    %1 = loom.reduce_scatter %z on @m ["tp"] dim 1 sum : tensor<4x8xf32> -> tensor<4x2xf32>
    loom.yield %0, %1 : tensor<1x8xf32>, tensor<4x2xf32>
  }
  return %s#0, %r#0 : tensor<4xf32>, tensor<1x8xf32>
}

// Gathers move bits: an f32 norm gain and a bf16 weight in one.
// CHECK-LABEL: func.func @mixed_gathers
// CHECK: loom.combined -> (tensor<8xf32>, tensor<8x16xbf16>)
func.func @mixed_gathers(%g: tensor<4xf32>, %w: tensor<4x16xbf16>) -> (tensor<8xf32>, tensor<8x16xbf16>) {
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8x16xbf16>) {
    %0 = loom.all_gather %g on @m ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
    %1 = loom.all_gather %w on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8x16xbf16>
  }
  return %r#0, %r#1 : tensor<8xf32>, tensor<8x16xbf16>
}
