// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every collective through the custom and the generic form, on
// per-device tensors. "pp" is manual: send and recv run over it, every other
// collective over "dp" and "tp".

// CHECK: loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]{{$}}
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]

// Every reduction kind; axes keep their order (major to minor); an empty
// axis list is a group of one. In the generic form the kind is its integer
// value: sum 0, max 1, min 2.
// CHECK-LABEL: func.func @all_reduce(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[A:.*]] = loom.all_reduce %[[X]] on @mesh ["tp"] sum : tensor<8x16xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.all_reduce %[[A]] on @mesh ["tp", "dp"] max : tensor<8x16xf32>
// CHECK-NEXT:    %[[C:.*]] = loom.all_reduce %[[B]] on @mesh ["dp"] min : tensor<8x16xf32>
// CHECK-NEXT:    %[[D:.*]] = loom.all_reduce %[[C]] on @mesh [] sum : tensor<8x16xf32>
// CHECK-NEXT:    return %[[D]]
// GENERIC-LABEL: sym_name = "all_reduce"
// GENERIC:       "loom.all_reduce"(%{{.*}}) <{axes = ["tp"], mesh = @mesh, reduction = 0 : i32}> : (tensor<8x16xf32>) -> tensor<8x16xf32>
// GENERIC-NEXT:  "loom.all_reduce"(%{{.*}}) <{axes = ["tp", "dp"], mesh = @mesh, reduction = 1 : i32}>
// GENERIC-NEXT:  "loom.all_reduce"(%{{.*}}) <{axes = ["dp"], mesh = @mesh, reduction = 2 : i32}>
// GENERIC-NEXT:  "loom.all_reduce"(%{{.*}}) <{axes = [], mesh = @mesh, reduction = 0 : i32}>
func.func @all_reduce(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.all_reduce %x on @mesh ["tp"] sum : tensor<8x16xf32>
  %1 = loom.all_reduce %0 on @mesh ["tp", "dp"] max : tensor<8x16xf32>
  %2 = loom.all_reduce %1 on @mesh ["dp"] min : tensor<8x16xf32>
  %3 = loom.all_reduce %2 on @mesh [] sum : tensor<8x16xf32>
  return %3 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @all_gather(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xbf16>)
// CHECK-NEXT:    %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT:    %[[H:.*]] = loom.all_gather %[[G]] on @mesh ["dp", "tp"] dim 1 : tensor<8x16xbf16> -> tensor<8x128xbf16>
// CHECK-NEXT:    return %[[H]]
// GENERIC-LABEL: sym_name = "all_gather"
// GENERIC:       "loom.all_gather"(%{{.*}}) <{axes = ["dp"], dim = 0 : i64, mesh = @mesh}> : (tensor<4x16xbf16>) -> tensor<8x16xbf16>
// GENERIC-NEXT:  "loom.all_gather"(%{{.*}}) <{axes = ["dp", "tp"], dim = 1 : i64, mesh = @mesh}> : (tensor<8x16xbf16>) -> tensor<8x128xbf16>
func.func @all_gather(%x: tensor<4x16xbf16>) -> tensor<8x128xbf16> {
  %0 = loom.all_gather %x on @mesh ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
  %1 = loom.all_gather %0 on @mesh ["dp", "tp"] dim 1 : tensor<8x16xbf16> -> tensor<8x128xbf16>
  return %1 : tensor<8x128xbf16>
}

// CHECK-LABEL: func.func @reduce_scatter(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[R:.*]] = loom.reduce_scatter %[[X]] on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %[[S:.*]] = loom.reduce_scatter %[[R]] on @mesh ["dp"] dim 0 max : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT:    return %[[S]]
// GENERIC-LABEL: sym_name = "reduce_scatter"
// GENERIC:       "loom.reduce_scatter"(%{{.*}}) <{axes = ["tp"], dim = 1 : i64, mesh = @mesh, reduction = 0 : i32}> : (tensor<8x16xf32>) -> tensor<8x4xf32>
// GENERIC-NEXT:  "loom.reduce_scatter"(%{{.*}}) <{axes = ["dp"], dim = 0 : i64, mesh = @mesh, reduction = 1 : i32}> : (tensor<8x4xf32>) -> tensor<4x4xf32>
func.func @reduce_scatter(%x: tensor<8x16xf32>) -> tensor<4x4xf32> {
  %0 = loom.reduce_scatter %x on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  %1 = loom.reduce_scatter %0 on @mesh ["dp"] dim 0 max : tensor<8x4xf32> -> tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// CHECK-LABEL: func.func @all_to_all(
// CHECK-SAME:      %[[X:.*]]: tensor<4x16xi32>)
// CHECK-NEXT:    %[[A:.*]] = loom.all_to_all %[[X]] on @mesh ["tp"] split 1 concat 0 : tensor<4x16xi32> -> tensor<16x4xi32>
// CHECK-NEXT:    return %[[A]]
// GENERIC-LABEL: sym_name = "all_to_all"
// GENERIC:       "loom.all_to_all"(%{{.*}}) <{axes = ["tp"], concat_dim = 0 : i64, mesh = @mesh, split_dim = 1 : i64}> : (tensor<4x16xi32>) -> tensor<16x4xi32>
func.func @all_to_all(%x: tensor<4x16xi32>) -> tensor<16x4xi32> {
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 0 : tensor<4x16xi32> -> tensor<16x4xi32>
  return %0 : tensor<16x4xi32>
}

// The pieces numbered over the same axes in another order.
// CHECK-LABEL: func.func @all_to_all_ordered(
// CHECK-NEXT:    %[[A:.*]] = loom.all_to_all %{{.*}} on @mesh ["dp", "tp"] as ["tp", "dp"] split 1 concat 0 : tensor<4x16xi32> -> tensor<32x2xi32>
// GENERIC-LABEL: sym_name = "all_to_all_ordered"
// GENERIC:       "loom.all_to_all"(%{{.*}}) <{axes = ["dp", "tp"], concat_dim = 0 : i64, mesh = @mesh, split_axes = ["tp", "dp"], split_dim = 1 : i64}>
func.func @all_to_all_ordered(%x: tensor<4x16xi32>) -> tensor<32x2xi32> {
  %0 = loom.all_to_all %x on @mesh ["dp", "tp"] as ["tp", "dp"] split 1 concat 0 : tensor<4x16xi32> -> tensor<32x2xi32>
  return %0 : tensor<32x2xi32>
}

// CHECK-LABEL: func.func @all_slice(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf16>)
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[X]] on @mesh ["tp", "dp"] dim 1 : tensor<8x16xf16> -> tensor<8x2xf16>
// CHECK-NEXT:    return %[[S]]
// GENERIC-LABEL: sym_name = "all_slice"
// GENERIC:       "loom.all_slice"(%{{.*}}) <{axes = ["tp", "dp"], dim = 1 : i64, mesh = @mesh}> : (tensor<8x16xf16>) -> tensor<8x2xf16>
func.func @all_slice(%x: tensor<8x16xf16>) -> tensor<8x2xf16> {
  %0 = loom.all_slice %x on @mesh ["tp", "dp"] dim 1 : tensor<8x16xf16> -> tensor<8x2xf16>
  return %0 : tensor<8x2xf16>
}

// A ring over "tp", and an empty permutation (every rank receives zeros).
// CHECK-LABEL: func.func @collective_permute(
// CHECK-SAME:      %[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT:    %[[P:.*]] = loom.collective_permute %[[X]] on @mesh ["tp"] pairs [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8xf32>
// CHECK-NEXT:    %[[Q:.*]] = loom.collective_permute %[[P]] on @mesh ["dp"] pairs [] : tensor<8xf32>
// CHECK-NEXT:    return %[[Q]]
// GENERIC-LABEL: sym_name = "collective_permute"
// GENERIC:       "loom.collective_permute"(%{{.*}}) <{axes = ["tp"], mesh = @mesh, pairs = array<i64: 0, 1, 1, 2, 2, 3, 3, 0>}> : (tensor<8xf32>) -> tensor<8xf32>
// GENERIC-NEXT:  "loom.collective_permute"(%{{.*}}) <{axes = ["dp"], mesh = @mesh, pairs = array<i64>}> : (tensor<8xf32>) -> tensor<8xf32>
func.func @collective_permute(%x: tensor<8xf32>) -> tensor<8xf32> {
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8xf32>
  %1 = loom.collective_permute %0 on @mesh ["dp"] pairs [] : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:      %[[X:.*]]: tensor<8xi64>)
// CHECK-NEXT:    %[[B:.*]] = loom.broadcast %[[X]] on @mesh ["dp", "tp"] root 7 : tensor<8xi64>
// CHECK-NEXT:    return %[[B]]
// GENERIC-LABEL: sym_name = "broadcast"
// GENERIC:       "loom.broadcast"(%{{.*}}) <{axes = ["dp", "tp"], mesh = @mesh, root = 7 : i64}> : (tensor<8xi64>) -> tensor<8xi64>
func.func @broadcast(%x: tensor<8xi64>) -> tensor<8xi64> {
  %0 = loom.broadcast %x on @mesh ["dp", "tp"] root 7 : tensor<8xi64>
  return %0 : tensor<8xi64>
}

// A stage boundary: send forward, receive from behind (negative offset).
// CHECK-LABEL: func.func @send_recv(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xbf16>)
// CHECK-NEXT:    loom.send %[[X]] on @mesh ["pp"] offset 1 : tensor<8x16xbf16>
// CHECK-NEXT:    %[[R:.*]] = loom.recv on @mesh ["pp"] offset -1 : tensor<8x16xbf16>
// CHECK-NEXT:    return %[[R]]
// GENERIC-LABEL: sym_name = "send_recv"
// GENERIC:       "loom.send"(%{{.*}}) <{axes = ["pp"], mesh = @mesh, offset = 1 : i64}> : (tensor<8x16xbf16>) -> ()
// GENERIC-NEXT:  "loom.recv"() <{axes = ["pp"], mesh = @mesh, offset = -1 : i64}> : () -> tensor<8x16xbf16>
func.func @send_recv(%x: tensor<8x16xbf16>) -> tensor<8x16xbf16> {
  loom.send %x on @mesh ["pp"] offset 1 : tensor<8x16xbf16>
  %0 = loom.recv on @mesh ["pp"] offset -1 : tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}
