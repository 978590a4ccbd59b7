// RUN: loom-opt %s | loom-opt | FileCheck %s

// loom.gelu round trips through its custom form only; the generic form is
// covered by gelu-generic.mlir, which is XFAIL until #loom.gelu_approximation
// has a generic syntax that parses back.

// CHECK-LABEL: func.func @gelu(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf16>)
// CHECK:         loom.gelu %[[X]] : tensor<4x8xf16>
// CHECK:         loom.gelu %[[X]] : tensor<4x8xf16>
// CHECK:         loom.gelu %[[X]] approximate tanh : tensor<4x8xf16>
func.func @gelu(%x: tensor<4x8xf16>) {
  %0 = loom.gelu %x : tensor<4x8xf16>
  %1 = loom.gelu %x approximate none : tensor<4x8xf16>
  %2 = loom.gelu %x approximate tanh : tensor<4x8xf16>
  return
}
