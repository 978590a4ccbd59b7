// RUN: loom-opt %s -split-input-file -canonicalize | FileCheck %s

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// A constraint repeating its operand's constraint folds away.
// CHECK-LABEL: func.func @same_sharding(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[S:.*]] = loom.shard %[[X]] as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
// CHECK-NEXT:    return %[[S]] : tensor<8x16xf32>
func.func @same_sharding(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  %1 = loom.shard %0 as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// A chain of identical constraints folds to one.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[S:.*]] = loom.shard %[[X]] as <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
// CHECK-NEXT:    return %[[S]] : tensor<8x16xf32>
func.func @chain(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  %1 = loom.shard %0 as <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  %2 = loom.shard %1 as <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// Different constraints are both kept: the second one reshards.
// CHECK-LABEL: func.func @different_sharding(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT:    %[[A:.*]] = loom.shard %[[X]] as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.shard %[[A]] as <@mesh, [{"tp"}, {}]> : tensor<8x16xf32>
// CHECK-NEXT:    return %[[B]] : tensor<8x16xf32>
func.func @different_sharding(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  %1 = loom.shard %0 as <@mesh, [{"tp"}, {}]> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// Shardings that differ only in openness or priority are different.
// CHECK-LABEL: func.func @open_and_priority(
// CHECK:         loom.shard %{{.*}} as <@mesh, [{"dp"}, {}]>
// CHECK:         loom.shard %{{.*}} as <@mesh, [{"dp", ?}, {}]>
// CHECK:         loom.shard %{{.*}} as <@mesh, [{"dp", ?}p0, {}]>
func.func @open_and_priority(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
  %1 = loom.shard %0 as <@mesh, [{"dp", ?}, {}]> : tensor<8x16xf32>
  %2 = loom.shard %1 as <@mesh, [{"dp", ?}p0, {}]> : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// The fold looks only at the direct operand: a shard separated from an equal
// one by a different constraint stays.
// CHECK-LABEL: func.func @not_adjacent(
// CHECK-COUNT-3: loom.shard
// CHECK-NOT:     loom.shard
func.func @not_adjacent(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
  %1 = loom.shard %0 as <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
  %2 = loom.shard %1 as <@mesh, [{"dp"}, {}]> : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// loom.shard is pure: an unused constraint is erased.
// CHECK-LABEL: func.func @unused(
// CHECK-NOT:     loom.shard
// CHECK:         return
func.func @unused(%x: tensor<8x16xf32>) {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  return
}
