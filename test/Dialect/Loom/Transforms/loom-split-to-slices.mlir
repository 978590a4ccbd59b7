// RUN: loom-opt %s --split-input-file --loom-split-to-slices | FileCheck %s

// q, k and v split from one projection: q and k normalised in place, v
// gathered. Each piece becomes a slice of its own, so that q and k are
// views and only v is copied.
loom.mesh @m ["sp" = 2]
// CHECK-LABEL: func.func @judged_one_by_one
// CHECK-NEXT:  %[[Q:.*]] = loom.slice %arg0 [0, 0, 0] to [4, 6, 8] : tensor<4x6x24xf32> -> tensor<4x6x8xf32>
// CHECK-NEXT:  %[[K:.*]] = loom.slice %arg0 [0, 0, 8] to [4, 6, 16] : tensor<4x6x24xf32> -> tensor<4x6x8xf32>
// CHECK-NEXT:  %[[V:.*]] = loom.slice %arg0 [0, 0, 16] to [4, 6, 24] : tensor<4x6x24xf32> -> tensor<4x6x8xf32>
// CHECK-NOT:   loom.split
// CHECK:       loom.rmsnorm %[[Q]]
// CHECK:       loom.rmsnorm %[[K]]
// CHECK:       loom.all_gather %[[V]]
func.func @judged_one_by_one(%qkv: tensor<4x6x24xf32> {loom.input = "qkv"}, %g: tensor<8xf32> {loom.input = "g"}) -> (tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x12x8xf32>) attributes {loom.model} {
  %q, %k, %v = loom.split %qkv dim = 2 sizes = [8, 8, 8] : tensor<4x6x24xf32> -> tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x6x8xf32>
  %nq = loom.rmsnorm %q, %g eps = 1.0E-6 : tensor<4x6x8xf32>, tensor<8xf32> -> tensor<4x6x8xf32>
  %nk = loom.rmsnorm %k, %g eps = 1.0E-6 : tensor<4x6x8xf32>, tensor<8xf32> -> tensor<4x6x8xf32>
  %gv = loom.all_gather %v on @m ["sp"] dim 1 : tensor<4x6x8xf32> -> tensor<4x12x8xf32>
  return %nq, %nk, %gv : tensor<4x6x8xf32>, tensor<4x6x8xf32>, tensor<4x12x8xf32>
}

// -----

// Left alone: a split read in place already, and one whose every piece
// would be copied anyway (gathered, and read rows whole by a
// cross-entropy).
loom.mesh @m ["sp" = 2]
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT:  loom.split %arg0 dim = 1 sizes = [4, 4]
// CHECK-NEXT:  loom.split %arg1 dim = 1 sizes = [4, 4]
// CHECK-NOT:   loom.slice
func.func @left_alone(%x: tensor<6x8xf32> {loom.input = "x"}, %y: tensor<6x8xf32> {loom.input = "y"}, %t: tensor<6xi32> {loom.input = "t"}) -> (tensor<6x4xf32>, tensor<6x4xf32>, tensor<12x4xf32>, tensor<f32>) attributes {loom.model} {
  %a, %b = loom.split %x dim = 1 sizes = [4, 4] : tensor<6x8xf32> -> tensor<6x4xf32>, tensor<6x4xf32>
  %c, %d = loom.split %y dim = 1 sizes = [4, 4] : tensor<6x8xf32> -> tensor<6x4xf32>, tensor<6x4xf32>
  %s = loom.add %a, %b : tensor<6x4xf32>, tensor<6x4xf32> -> tensor<6x4xf32>
  %p = loom.mul %a, %b : tensor<6x4xf32>, tensor<6x4xf32> -> tensor<6x4xf32>
  %g = loom.all_gather %c on @m ["sp"] dim 0 : tensor<6x4xf32> -> tensor<12x4xf32>
  %l = loom.cross_entropy %d, %t : tensor<6x4xf32>, tensor<6xi32> -> tensor<f32>
  return %s, %p, %g, %l : tensor<6x4xf32>, tensor<6x4xf32>, tensor<12x4xf32>, tensor<f32>
}
