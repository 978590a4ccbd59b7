// RUN: loom-opt %s --split-input-file --loom-fuse-elementwise | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse-elementwise=max-inputs=3 | FileCheck %s --check-prefix=CAP
// RUN: not loom-opt %s --split-input-file --loom-fuse-elementwise=max-inputs=0 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: loom-fuse-elementwise: max-inputs must be at least 1

// A chain of element-wise ops with one use each becomes one group; the scalar
// constant is copied in; the reduction stays outside and starts a new group
// for its consumers; a value used twice (%2) ends a group and is its result.
// CHECK-LABEL: func.func @chain
// CHECK:       %[[G0:.*]] = loom.fused(%arg0, %arg1 : tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16> {
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<4x8xbf16>, %[[B:.*]]: tensor<8xbf16>):
// CHECK-NEXT:    %[[A:.*]] = loom.add %[[X]], %[[B]]
// CHECK-NEXT:    %[[C:.*]] = loom.constant dense<2.000000e+00> : tensor<bf16>
// CHECK-NEXT:    %[[M:.*]] = loom.mul %[[A]], %[[C]]
// CHECK-NEXT:    %[[G:.*]] = loom.gelu %[[M]] approximate tanh
// CHECK-NEXT:    loom.yield %[[G]]
// CHECK:       %[[S:.*]] = loom.sum %[[G0]] dims = [1] keepdim
// CHECK:       %[[G1:.*]] = loom.fused(%[[G0]], %[[S]] : tensor<4x8xbf16>, tensor<4x1xbf16>) -> tensor<4x8xbf16> {
// CHECK:         loom.sub
// CHECK-NEXT:    loom.exp
// CHECK-NEXT:    loom.yield
// CHECK-NOT:   loom.constant
// CHECK:       return %[[G1]], %[[G0]]
func.func @chain(%x: tensor<4x8xbf16>, %b: tensor<8xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %c = loom.constant dense<2.0> : tensor<bf16>
  %0 = loom.add %x, %b : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
  %1 = loom.mul %0, %c : tensor<4x8xbf16>, tensor<bf16> -> tensor<4x8xbf16>
  %2 = loom.gelu %1 approximate tanh : tensor<4x8xbf16>
  %3 = loom.sum %2 dims = [1] keepdim : tensor<4x8xbf16> -> tensor<4x1xbf16>
  %4 = loom.sub %2, %3 : tensor<4x8xbf16>, tensor<4x1xbf16> -> tensor<4x8xbf16>
  %5 = loom.exp %4 : tensor<4x8xbf16>
  return %5, %2 : tensor<4x8xbf16>, tensor<4x8xbf16>
}

// -----

// Producers of another shape (a broadcast operand computed separately) are
// not pulled in: a group has one iteration space. A lone element-wise op is
// no group. Ops inside a repeat body are grouped there.
// CHECK-LABEL: func.func @shapes
// CHECK:       %[[N:.*]] = loom.neg %arg1 : tensor<8xf32>
// CHECK-NOT:   loom.fused
// CHECK:       loom.add %arg0, %[[N]]
// CHECK:       loom.repeat 2
// CHECK:         loom.fused
// CHECK:           loom.relu
// CHECK-NEXT:      loom.sqrt
func.func @shapes(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %n = loom.neg %b : tensor<8xf32>
  %0 = loom.add %x, %n : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = loom.repeat 2 carried(%0 : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%h: tensor<4x8xf32>):
    %2 = loom.relu %h : tensor<4x8xf32>
    %3 = loom.sqrt %2 : tensor<4x8xf32>
    loom.yield %3 : tensor<4x8xf32>
  }
  return %1 : tensor<4x8xf32>
}

// -----

// A reduction whose operand is an element-wise chain over its input's shape
// ends that chain's group: sum(exp(x - m)) reads x once.
// CHECK-LABEL: func.func @reduction
// CHECK:       %[[G:.*]] = loom.fused(%arg0, %arg1 : tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4xf32> {
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<4x8xf32>, %[[M:.*]]: tensor<4x1xf32>):
// CHECK-NEXT:    %[[D:.*]] = loom.sub %[[X]], %[[M]]
// CHECK-NEXT:    %[[E:.*]] = loom.exp %[[D]]
// CHECK-NEXT:    %[[S:.*]] = loom.sum %[[E]] dims = [1]
// CHECK-NEXT:    loom.yield %[[S]] : tensor<4xf32>
// CHECK:       return %[[G]]
func.func @reduction(%x: tensor<4x8xf32>, %m: tensor<4x1xf32>) -> tensor<4xf32> {
  %0 = loom.sub %x, %m : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %1 = loom.exp %0 : tensor<4x8xf32>
  %2 = loom.sum %1 dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A cast with several users is recomputed in each user's group instead of
// stored; a pick reads the cast's input when the cast widens to f32.
// CHECK-LABEL: func.func @casts
// CHECK-NOT:   loom.cast %arg0 {{.*}}-> tensor<4x8xf32>{{$}}
// CHECK:       %[[MAX:.*]] = loom.fused(%arg0 : tensor<4x8xbf16>) -> tensor<4xf32> {
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<4x8xbf16>):
// CHECK-NEXT:    %[[W:.*]] = loom.cast %[[X]] : tensor<4x8xbf16> -> tensor<4x8xf32>
// CHECK-NEXT:    %[[M:.*]] = loom.max %[[W]] dims = [1]
// CHECK:       loom.fused(%arg0, %{{.*}} : tensor<4x8xbf16>, tensor<4x1xf32>) -> tensor<4xf32> {
// CHECK:         loom.cast
// CHECK-NEXT:    loom.sub
// CHECK-NEXT:    loom.exp
// CHECK-NEXT:    loom.sum
// CHECK:       loom.pick %arg0, %arg1 : tensor<4x8xbf16>, tensor<4xi32> -> tensor<4xf32>
func.func @casts(%x: tensor<4x8xbf16>, %t: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %w = loom.cast %x : tensor<4x8xbf16> -> tensor<4x8xf32>
  %m = loom.max %w dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %m1 = loom.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
  %d = loom.sub %w, %m1 : tensor<4x8xf32>, tensor<4x1xf32> -> tensor<4x8xf32>
  %e = loom.exp %d : tensor<4x8xf32>
  %s = loom.sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %p = loom.pick %w, %t : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  %r = loom.add %s, %p : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %m, %r : tensor<4xf32>, tensor<4xf32>
}

// -----

// A group reads at most max-inputs values from outside (a CUDA kernel's
// parameters are bounded): with 3, `%t2` would bring a fourth input (`%c`
// beside `%t1`, `%d`, `%e`), so it stays outside and roots its own group.
// The scalar constant is no input. By default all four adds are one group.
// CHECK-LABEL: func.func @bounded
// CHECK:       loom.fused(%arg0, %arg1, %arg2, %arg3, %arg4 :
// CHECK-COUNT-4: loom.add
// CAP-LABEL:   func.func @bounded
// CAP:         %[[G1:.*]] = loom.fused(%arg0, %arg1, %arg2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CAP-COUNT-2:   loom.add
// CAP:         %[[G2:.*]] = loom.fused(%[[G1]], %arg3, %arg4 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CAP-COUNT-2:   loom.add
// CAP-NEXT:      loom.constant
// CAP-NEXT:      loom.mul
// CAP:         return %[[G2]]
func.func @bounded(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>, %d: tensor<4xf32>, %e: tensor<4xf32>) -> tensor<4xf32> {
  %two = loom.constant dense<2.0> : tensor<f32>
  %t1 = loom.add %a, %b : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t2 = loom.add %t1, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t3 = loom.add %t2, %d : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %t4 = loom.add %t3, %e : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %r = loom.mul %t4, %two : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}
