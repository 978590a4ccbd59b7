// RUN: loom-opt %s --loom-widen-floats | FileCheck %s

// Every bf16/f16 type becomes f32 (arguments, results, constants, repeat
// bodies); casts between floats vanish; integers stay.
// CHECK-LABEL: func.func @widen
// CHECK-SAME:  (%arg0: tensor<4x8xf32>, %arg1: tensor<8xf32>, %arg2: tensor<4xi32>) -> (tensor<4x8xf32>, tensor<4xf32>)
// CHECK:       %[[C:.*]] = loom.constant dense<5.000000e-01> : tensor<f32>
// CHECK:       %[[A:.*]] = loom.add %arg0, %arg1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK:       loom.repeat 2 carried(%{{.*}} : tensor<4x8xf32>)
// CHECK:       ^bb0(%{{.*}}: tensor<4x8xf32>):
// CHECK-NOT:   loom.cast %{{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK:       loom.cast %arg2 : tensor<4xi32> -> tensor<4xf32>
func.func @widen(%x: tensor<4x8xbf16>, %b: tensor<8xf16>, %i: tensor<4xi32>) -> (tensor<4x8xbf16>, tensor<4xbf16>) {
  %c = loom.constant dense<0.5> : tensor<bf16>
  %bb = loom.cast %b : tensor<8xf16> -> tensor<8xbf16>
  %0 = loom.add %x, %bb : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
  %1 = loom.repeat 2 carried(%0 : tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%h: tensor<4x8xbf16>):
    %2 = loom.mul %h, %c : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
    loom.yield %2 : tensor<4x8xbf16>
  }
  %3 = loom.cast %i : tensor<4xi32> -> tensor<4xbf16>
  return %1, %3 : tensor<4x8xbf16>, tensor<4xbf16>
}

// A collective started early is widened with the value it delivers (the
// future kept bf16 and failed to verify).
// CHECK-LABEL: func.func @future
// CHECK: loom.start -> !loom.future<tensor<8x16xf32>>
// CHECK: loom.all_gather {{.*}} : tensor<4x16xf32> -> tensor<8x16xf32>
// CHECK: loom.wait {{.*}} : !loom.future<tensor<8x16xf32>>
loom.mesh @m ["dp" = 2]
func.func @future(%x: tensor<4x16xbf16>) -> tensor<8x16xbf16> {
  %f = loom.start -> !loom.future<tensor<8x16xbf16>> {
    %g = loom.all_gather %x on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
    loom.yield %g : tensor<8x16xbf16>
  }
  %v = loom.wait %f : !loom.future<tensor<8x16xbf16>>
  return %v : tensor<8x16xbf16>
}
