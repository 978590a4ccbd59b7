// RUN: loom-opt %s -split-input-file -canonicalize | FileCheck %s

// Folds and canonicalization patterns of the collectives. "one" has size 1:
// a group over it (or over no axis) is a single rank, and the collective is
// the identity.

//===----------------------------------------------------------------------===//
// Groups of one fold away; real groups stay
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @all_reduce_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.all_reduce
// CHECK:         %[[R:.*]] = loom.all_reduce %[[X]] on @mesh ["tp"] sum
// CHECK-NEXT:    return %[[X]], %[[R]]
func.func @all_reduce_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = loom.all_reduce %x on @mesh ["one"] sum : tensor<8x16xf32>
  %1 = loom.all_reduce %0 on @mesh [] max : tensor<8x16xf32>
  %2 = loom.all_reduce %1 on @mesh ["tp"] sum : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @all_gather_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.all_gather
// CHECK:         %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x64xf32>
// CHECK-NEXT:    return %[[X]], %[[G]]
func.func @all_gather_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x64xf32>) {
  %0 = loom.all_gather %x on @mesh ["one"] dim 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  %1 = loom.all_gather %0 on @mesh [] dim 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = loom.all_gather %1 on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x64xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x64xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @reduce_scatter_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.reduce_scatter
// CHECK:         %[[S:.*]] = loom.reduce_scatter %[[X]] on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    return %[[X]], %[[S]]
func.func @reduce_scatter_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %0 = loom.reduce_scatter %x on @mesh ["one"] dim 0 sum : tensor<8x16xf32> -> tensor<8x16xf32>
  %1 = loom.reduce_scatter %0 on @mesh [] dim 1 min : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = loom.reduce_scatter %1 on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @all_to_all_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.all_to_all
// CHECK:         %[[A:.*]] = loom.all_to_all %[[X]] on @mesh ["tp"] split 1 concat 0 : tensor<8x16xf32> -> tensor<32x4xf32>
// CHECK-NEXT:    return %[[X]], %[[A]]
func.func @all_to_all_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<32x4xf32>) {
  %0 = loom.all_to_all %x on @mesh ["one"] split 1 concat 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  %1 = loom.all_to_all %0 on @mesh [] split 0 concat 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = loom.all_to_all %1 on @mesh ["tp"] split 1 concat 0 : tensor<8x16xf32> -> tensor<32x4xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<32x4xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @all_slice_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.all_slice
// CHECK:         %[[S:.*]] = loom.all_slice %[[X]] on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    return %[[X]], %[[S]]
func.func @all_slice_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x4xf32>) {
  %0 = loom.all_slice %x on @mesh ["one"] dim 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  %1 = loom.all_slice %0 on @mesh [] dim 1 : tensor<8x16xf32> -> tensor<8x16xf32>
  %2 = loom.all_slice %1 on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x4xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @broadcast_group_of_one(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.broadcast
// CHECK:         %[[B:.*]] = loom.broadcast %[[X]] on @mesh ["dp"] root 1 : tensor<8x16xf32>
// CHECK-NEXT:    return %[[X]], %[[B]]
func.func @broadcast_group_of_one(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = loom.broadcast %x on @mesh ["one"] root 0 : tensor<8x16xf32>
  %1 = loom.broadcast %0 on @mesh [] root 0 : tensor<8x16xf32>
  %2 = loom.broadcast %1 on @mesh ["dp"] root 1 : tensor<8x16xf32>
  return %1, %2 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// all_slice(all_gather(x)) is x, when both go the same way
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// The gather has a second use, so it stays; the slice still folds.
// CHECK-LABEL: func.func @slice_of_gather(
// CHECK-SAME:      %[[X:.*]]: tensor<2x16xf32>)
// CHECK-NEXT:    %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["dp", "tp"] dim 0
// CHECK-NOT:     loom.all_slice
// CHECK:         return %[[X]], %[[G]]
func.func @slice_of_gather(%x: tensor<2x16xf32>) -> (tensor<2x16xf32>, tensor<16x16xf32>) {
  %0 = loom.all_gather %x on @mesh ["dp", "tp"] dim 0 : tensor<2x16xf32> -> tensor<16x16xf32>
  %1 = loom.all_slice %0 on @mesh ["dp", "tp"] dim 0 : tensor<16x16xf32> -> tensor<2x16xf32>
  return %1, %0 : tensor<2x16xf32>, tensor<16x16xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// The same axes in the other order are another layout: rank (d, t) gathers
// at d*4 + t but slices at t*2 + d.
// CHECK-LABEL: func.func @slice_of_gather_axes_reordered(
// CHECK-SAME:      %[[X:.*]]: tensor<2x16xf32>)
// CHECK-NEXT:    %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["dp", "tp"] dim 0
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[G]] on @mesh ["tp", "dp"] dim 0
// CHECK-NEXT:    return %[[S]]
func.func @slice_of_gather_axes_reordered(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %0 = loom.all_gather %x on @mesh ["dp", "tp"] dim 0 : tensor<2x16xf32> -> tensor<16x16xf32>
  %1 = loom.all_slice %0 on @mesh ["tp", "dp"] dim 0 : tensor<16x16xf32> -> tensor<2x16xf32>
  return %1 : tensor<2x16xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @slice_of_gather_other_dim(
// CHECK-SAME:      %[[X:.*]]: tensor<8x8xf32>)
// CHECK-NEXT:    %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["tp"] dim 0 : tensor<8x8xf32> -> tensor<32x8xf32>
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[G]] on @mesh ["tp"] dim 1 : tensor<32x8xf32> -> tensor<32x2xf32>
// CHECK-NEXT:    return %[[S]]
func.func @slice_of_gather_other_dim(%x: tensor<8x8xf32>) -> tensor<32x2xf32> {
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<8x8xf32> -> tensor<32x8xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 1 : tensor<32x8xf32> -> tensor<32x2xf32>
  return %1 : tensor<32x2xf32>
}

// -----

//===----------------------------------------------------------------------===//
// all_gather(all_slice(x)) is x, when both go the same way
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @gather_of_slice(
// CHECK-SAME:      %[[X:.*]]: tensor<16x8xf32>)
// CHECK-NEXT:    return %[[X]]
func.func @gather_of_slice(%x: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %0 = loom.all_slice %x on @mesh ["dp", "tp"] dim 0 : tensor<16x8xf32> -> tensor<2x8xf32>
  %1 = loom.all_gather %0 on @mesh ["dp", "tp"] dim 0 : tensor<2x8xf32> -> tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// Slicing one dimension and gathering another is a real move.
// CHECK-LABEL: func.func @gather_of_slice_other_dim(
// CHECK-NEXT:    loom.all_slice
// CHECK-NEXT:    loom.all_gather
func.func @gather_of_slice_other_dim(%x: tensor<16x8xf32>) -> tensor<4x32xf32> {
  %0 = loom.all_slice %x on @mesh ["tp"] dim 0 : tensor<16x8xf32> -> tensor<4x8xf32>
  %1 = loom.all_gather %0 on @mesh ["tp"] dim 1 : tensor<4x8xf32> -> tensor<4x32xf32>
  return %1 : tensor<4x32xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// A gather over "tp" then "dp" merges into one over ["dp", "tp"], which the
// slice over ["dp", "tp"] then undoes.
// CHECK-LABEL: func.func @slice_of_merged_gathers(
// CHECK-SAME:      %[[X:.*]]: tensor<2x16xf32>)
// CHECK-NOT:     loom.all_gather
// CHECK-NOT:     loom.all_slice
// CHECK:         return %[[X]]
func.func @slice_of_merged_gathers(%x: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<2x16xf32> -> tensor<8x16xf32>
  %1 = loom.all_gather %0 on @mesh ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  %2 = loom.all_slice %1 on @mesh ["dp", "tp"] dim 0 : tensor<16x16xf32> -> tensor<2x16xf32>
  return %2 : tensor<2x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// all_slice(all_reduce(x)) is a reduce_scatter
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// The reduction kind carries over.
// CHECK-LABEL: func.func @slice_of_reduce(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NOT:     loom.all_reduce
// CHECK-NOT:     loom.all_slice
// CHECK:         %[[S:.*]] = loom.reduce_scatter %[[X]] on @mesh ["dp", "tp"] dim 1 max : tensor<8x16xf32> -> tensor<8x2xf32>
// CHECK-NEXT:    return %[[S]]
func.func @slice_of_reduce(%x: tensor<8x16xf32>) -> tensor<8x2xf32> {
  %0 = loom.all_reduce %x on @mesh ["dp", "tp"] max : tensor<8x16xf32>
  %1 = loom.all_slice %0 on @mesh ["dp", "tp"] dim 1 : tensor<8x16xf32> -> tensor<8x2xf32>
  return %1 : tensor<8x2xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// Something else needs the full reduction: both stay.
// CHECK-LABEL: func.func @slice_of_reduce_two_uses(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[R:.*]] = loom.all_reduce %[[X]] on @mesh ["tp"] sum
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[R]] on @mesh ["tp"] dim 1
// CHECK-NEXT:    return %[[S]], %[[R]]
func.func @slice_of_reduce_two_uses(%x: tensor<8x16xf32>) -> (tensor<8x4xf32>, tensor<8x16xf32>) {
  %0 = loom.all_reduce %x on @mesh ["tp"] sum : tensor<8x16xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  return %1, %0 : tensor<8x4xf32>, tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// Reduced over "dp", sliced over "tp": no reduce_scatter does both.
// CHECK-LABEL: func.func @slice_of_reduce_other_axes(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[R:.*]] = loom.all_reduce %[[X]] on @mesh ["dp"] sum
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[R]] on @mesh ["tp"] dim 1
// CHECK-NEXT:    return %[[S]]
func.func @slice_of_reduce_other_axes(%x: tensor<8x16xf32>) -> tensor<8x4xf32> {
  %0 = loom.all_reduce %x on @mesh ["dp"] sum : tensor<8x16xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Slices of slices and gathers of gathers merge
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// Sliced by "dp" first, its piece then by "tp": "dp" is major.
// CHECK-LABEL: func.func @slice_of_slice(
// CHECK-SAME:      %[[X:.*]]: tensor<16x8xf32>)
// CHECK-NEXT:    %[[S:.*]] = loom.all_slice %[[X]] on @mesh ["dp", "tp"] dim 0 : tensor<16x8xf32> -> tensor<2x8xf32>
// CHECK-NOT:     loom.all_slice
// CHECK:         return %[[S]]
func.func @slice_of_slice(%x: tensor<16x8xf32>) -> tensor<2x8xf32> {
  %0 = loom.all_slice %x on @mesh ["dp"] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 0 : tensor<8x8xf32> -> tensor<2x8xf32>
  return %1 : tensor<2x8xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @slice_of_slice_other_dim(
// CHECK-SAME:      %[[X:.*]]: tensor<16x8xf32>)
// CHECK-NEXT:    %[[A:.*]] = loom.all_slice %[[X]] on @mesh ["dp"] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.all_slice %[[A]] on @mesh ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x2xf32>
// CHECK-NEXT:    return %[[B]]
func.func @slice_of_slice_other_dim(%x: tensor<16x8xf32>) -> tensor<8x2xf32> {
  %0 = loom.all_slice %x on @mesh ["dp"] dim 0 : tensor<16x8xf32> -> tensor<8x8xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x2xf32>
  return %1 : tensor<8x2xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// Gathered over "tp" first, then the pieces over "dp": "dp" (outer) is major.
// CHECK-LABEL: func.func @gather_of_gather(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[G:.*]] = loom.all_gather %[[X]] on @mesh ["dp", "tp"] dim 0 : tensor<2x8xf32> -> tensor<16x8xf32>
// CHECK-NOT:     loom.all_gather
// CHECK:         return %[[G]]
func.func @gather_of_gather(%x: tensor<2x8xf32>) -> tensor<16x8xf32> {
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %1 = loom.all_gather %0 on @mesh ["dp"] dim 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return %1 : tensor<16x8xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// The inner gather is needed on its own: merging would not save it.
// CHECK-LABEL: func.func @gather_of_gather_two_uses(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[A:.*]] = loom.all_gather %[[X]] on @mesh ["tp"] dim 0
// CHECK-NEXT:    %[[B:.*]] = loom.all_gather %[[A]] on @mesh ["dp"] dim 0
// CHECK-NEXT:    return %[[B]], %[[A]]
func.func @gather_of_gather_two_uses(%x: tensor<2x8xf32>) -> (tensor<16x8xf32>, tensor<8x8xf32>) {
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %1 = loom.all_gather %0 on @mesh ["dp"] dim 0 : tensor<8x8xf32> -> tensor<16x8xf32>
  return %1, %0 : tensor<16x8xf32>, tensor<8x8xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// CHECK-LABEL: func.func @gather_of_gather_other_dim(
// CHECK-SAME:      %[[X:.*]]: tensor<2x8xf32>)
// CHECK-NEXT:    %[[A:.*]] = loom.all_gather %[[X]] on @mesh ["tp"] dim 0 : tensor<2x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.all_gather %[[A]] on @mesh ["dp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT:    return %[[B]]
func.func @gather_of_gather_other_dim(%x: tensor<2x8xf32>) -> tensor<8x16xf32> {
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<2x8xf32> -> tensor<8x8xf32>
  %1 = loom.all_gather %0 on @mesh ["dp"] dim 1 : tensor<8x8xf32> -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

//===----------------------------------------------------------------------===//
// What is never removed
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// A send has no result but writes to the other stage: it stays. A used recv
// stays. A permutation over a group of one is not the identity (with no
// pairs the rank receives zeros), so it has no fold.
// CHECK-LABEL: func.func @point_to_point_and_permute(
// CHECK-SAME:      %[[X:.*]]: tensor<8xf32>)
// CHECK-NEXT:    loom.send %[[X]] on @mesh ["pp"] offset 1 : tensor<8xf32>
// CHECK-NEXT:    %[[R:.*]] = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
// CHECK-NEXT:    %[[P:.*]] = loom.collective_permute %[[R]] on @mesh ["one"] pairs [] : tensor<8xf32>
// CHECK-NEXT:    return %[[P]]
func.func @point_to_point_and_permute(%x: tensor<8xf32>) -> tensor<8xf32> {
  loom.send %x on @mesh ["pp"] offset 1 : tensor<8xf32>
  %0 = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
  %1 = loom.collective_permute %0 on @mesh ["one"] pairs [] : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4, "one" = 1] manual ["pp"]

// The other collectives are pure: every rank of a group runs the same
// program, so an unused one goes on all of them alike.
// CHECK-LABEL: func.func @unused_pure_collectives(
// CHECK-NOT:     loom.
// CHECK:         return
func.func @unused_pure_collectives(%x: tensor<8xf32>) {
  %0 = loom.all_reduce %x on @mesh ["tp"] sum : tensor<8xf32>
  %1 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 1, 0] : tensor<8xf32>
  return
}

// -----

// A collective that canonicalization makes from two keeps the reason the
// partitioner recorded (`--explain` reads it): the first one's, else the
// second's.
loom.mesh @mesh ["dp" = 2, "tp" = 4]

// CHECK-LABEL: func.func @reasons_kept(
// CHECK:         loom.reduce_scatter %{{.*}} on @mesh ["tp"] dim 0 sum {loom.reason = {value = "the reduced one"}}
// CHECK:         loom.all_slice %{{.*}} on @mesh ["dp", "tp"] dim 1 {loom.reason = {value = "the sliced one"}}
// CHECK:         loom.all_gather %{{.*}} on @mesh ["dp", "tp"] dim 1 {loom.reason = {value = "the second gather"}}
func.func @reasons_kept(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %z: tensor<8x2xf32>) -> (tensor<2x16xf32>, tensor<8x2xf32>, tensor<8x16xf32>) {
  %0 = loom.all_reduce %x on @mesh ["tp"] sum {loom.reason = {value = "the reduced one"}} : tensor<8x16xf32>
  %1 = loom.all_slice %0 on @mesh ["tp"] dim 0 {loom.reason = {value = "the slice after it"}} : tensor<8x16xf32> -> tensor<2x16xf32>
  %2 = loom.all_slice %y on @mesh ["dp"] dim 1 {loom.reason = {value = "the sliced one"}} : tensor<8x16xf32> -> tensor<8x8xf32>
  %3 = loom.all_slice %2 on @mesh ["tp"] dim 1 : tensor<8x8xf32> -> tensor<8x2xf32>
  %4 = loom.all_gather %z on @mesh ["tp"] dim 1 : tensor<8x2xf32> -> tensor<8x8xf32>
  %5 = loom.all_gather %4 on @mesh ["dp"] dim 1 {loom.reason = {value = "the second gather"}} : tensor<8x8xf32> -> tensor<8x16xf32>
  return %1, %3, %5 : tensor<2x16xf32>, tensor<8x2xf32>, tensor<8x16xf32>
}
