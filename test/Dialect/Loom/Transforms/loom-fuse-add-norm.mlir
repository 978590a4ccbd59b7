// RUN: loom-opt %s --split-input-file --loom-fuse-add-norm | FileCheck %s

// A residual sum that a layer norm reads and that goes on (the residual
// stream): one loom.add_norm in the add's place (its location the add's
// and the norm's: loomc's kernel list names both); the sum keeps its
// other reader.
// CHECK-LABEL: func.func @residual
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = loom.add_norm %arg0, %arg1, %arg2, %arg3 eps = 1.000000e-05 : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK-NEXT:  %[[T:.*]] = loom.tanh %[[Y]]
// CHECK-NEXT:  loom.add %[[S]], %[[T]]
// CHECK-NOT:   loom.layernorm
func.func @residual(%x: tensor<4x8xbf16>, %a: tensor<4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = loom.add %x, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %y = loom.layernorm %s, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  %t = loom.tanh %y : tensor<4x8xbf16>
  %r = loom.add %s, %t : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %r : tensor<4x8xbf16>
}

// -----

// An RMS norm (no bias) inside a repeat, its gain a stacked slice.
// CHECK-LABEL: func.func @rms_in_repeat
// CHECK:       loom.add_norm %arg2, %arg2, %arg3 eps = {{.*}} rms : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NOT:   loom.rmsnorm
func.func @rms_in_repeat(%x: tensor<4x8xf32>, %g: tensor<2x8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%g : tensor<2x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%h: tensor<4x8xf32>, %gi: tensor<8xf32>):
    %s = loom.add %h, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %y = loom.rmsnorm %s, %gi eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    loom.yield %y : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}

// -----

// Kept apart: a broadcast add; a norm of another type than the sum's (an
// f32 sum of bf16 addends); a scale made after the add; a norm in another
// block (inside a repeat, the add outside).
// CHECK-LABEL: func.func @broadcast
// CHECK-NOT:   loom.add_norm
// CHECK-LABEL: func.func @promoted
// CHECK-NOT:   loom.add_norm
// CHECK-LABEL: func.func @late_scale
// CHECK-NOT:   loom.add_norm
// CHECK-LABEL: func.func @other_block
// CHECK-NOT:   loom.add_norm
func.func @broadcast(%x: tensor<4x8xbf16>, %a: tensor<8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = loom.add %x, %a : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
  %y = loom.layernorm %s, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
func.func @promoted(%x: tensor<4x8xbf16>, %a: tensor<4x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %s = loom.add %x, %a : tensor<4x8xbf16>, tensor<4x8xf32> -> tensor<4x8xf32>
  %y = loom.layernorm %s, %g, %b eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @late_scale(%x: tensor<4x8xbf16>, %a: tensor<4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = loom.add %x, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %g2 = loom.tanh %g : tensor<8xf32>
  %y = loom.layernorm %s, %g2, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
func.func @other_block(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %s = loom.add %x, %x : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%h: tensor<4x8xf32>):
    %y = loom.rmsnorm %s, %g eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %z = loom.add %y, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %z : tensor<4x8xf32>
  }
  return %r : tensor<4x8xf32>
}
