// RUN: loom-opt %s --loom-frontend-cleanup | FileCheck %s

// The pipeline loomc runs for --emit=loom, registered in loom-opt: nested block
// signatures repeat a constraint, which folds; identical constants merge;
// values nothing uses go.

loom.mesh @m ["dp" = 2]

// CHECK-LABEL: func.func @cleanup
// CHECK-SAME: (%[[X:.*]]: tensor<8x4xf32>)
func.func @cleanup(%x: tensor<8x4xf32>) -> tensor<8x4xf32> {
  // CHECK-DAG: %[[S:.*]] = loom.shard %[[X]] as <@m, [{"dp"}, {?}]>
  // CHECK-DAG: %[[C:.*]] = loom.constant dense<2.000000e+00> : tensor<f32>
  // CHECK-NOT: loom.shard
  // CHECK-NOT: loom.constant
  %a = loom.shard %x as <@m, [{"dp"}, {?}]> : tensor<8x4xf32>
  %b = loom.shard %a as <@m, [{"dp"}, {?}]> : tensor<8x4xf32>
  %c1 = loom.constant dense<2.0> : tensor<f32>
  %c2 = loom.constant dense<2.0> : tensor<f32>
  // CHECK-NOT: loom.relu
  %unused = loom.relu %b : tensor<8x4xf32>
  // CHECK: %[[M:.*]] = loom.mul %[[S]], %[[C]]
  // CHECK: %[[N:.*]] = loom.mul %[[M]], %[[C]]
  %m = loom.mul %b, %c1 : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf32>
  %n = loom.mul %m, %c2 : tensor<8x4xf32>, tensor<f32> -> tensor<8x4xf32>
  // CHECK: return %[[N]]
  return %n : tensor<8x4xf32>
}
