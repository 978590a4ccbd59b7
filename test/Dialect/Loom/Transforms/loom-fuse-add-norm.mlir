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
// f32 sum of bf16 addends); a scale made after the add, with another
// reader of the sum before the norm; a norm in another block (inside a
// repeat, the add outside). A scale made after the add with no other
// reader before the norm (a gather of the gains placed just before it):
// fused where the norm was.
// CHECK-LABEL: func.func @broadcast
// CHECK-NOT:   loom.add_norm
// CHECK-LABEL: func.func @promoted
// CHECK-NOT:   loom.add_norm
// CHECK-LABEL: func.func @late_scale
// CHECK-NEXT:  %[[G:.*]] = loom.tanh %arg2
// CHECK-NEXT:  %[[S:.*]], %[[R:.*]] = loom.add_norm %arg0, %arg1, %[[G]], %arg3
// CHECK-NEXT:  loom.mul %[[R]], %[[S]]
// CHECK-LABEL: func.func @late_scale_read_before
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
  %z = loom.mul %y, %s : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
}
func.func @late_scale_read_before(%x: tensor<4x8xbf16>, %a: tensor<4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = loom.add %x, %a : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  %t = loom.tanh %s : tensor<4x8xbf16>
  %g2 = loom.tanh %g : tensor<8xf32>
  %y = loom.layernorm %s, %g2, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  %z = loom.mul %y, %t : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
  return %z : tensor<4x8xbf16>
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

// -----

// A biased projection added to the residual stream, `x + (m + c)` as one
// fusion group, then normalised: one loom.add_norm with `plus c`, the
// group gone. The group in the other order, `(m + c) + x`, adds in another
// order than add_norm does, and is kept.
// CHECK-LABEL: func.func @biased
// CHECK-NEXT:  %[[S:.*]], %[[Y:.*]] = loom.add_norm %arg0, %arg1 plus %arg2, %arg3, %arg4 eps = 1.000000e-05 : tensor<4x8xbf16>, tensor<4x8xbf16> plus tensor<8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK-NEXT:  return %[[S]], %[[Y]]
// CHECK-LABEL: func.func @biased_other_order
// CHECK:       loom.fused
// CHECK-NOT:   loom.add_norm
func.func @biased(%x: tensor<4x8xbf16>, %m: tensor<4x8xbf16>, %c: tensor<8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %s = loom.fused(%m, %c, %x : tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%mi: tensor<4x8xbf16>, %ci: tensor<8xbf16>, %xi: tensor<4x8xbf16>):
    %t = loom.add %mi, %ci : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
    %u = loom.add %xi, %t : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    loom.yield %u : tensor<4x8xbf16>
  }
  %y = loom.layernorm %s, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  return %s, %y : tensor<4x8xbf16>, tensor<4x8xbf16>
}
func.func @biased_other_order(%x: tensor<4x8xbf16>, %m: tensor<4x8xbf16>, %c: tensor<8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xbf16> {
  %s = loom.fused(%m, %c, %x : tensor<4x8xbf16>, tensor<8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  ^bb0(%mi: tensor<4x8xbf16>, %ci: tensor<8xbf16>, %xi: tensor<4x8xbf16>):
    %t = loom.add %mi, %ci : tensor<4x8xbf16>, tensor<8xbf16> -> tensor<4x8xbf16>
    %u = loom.add %t, %xi : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    loom.yield %u : tensor<4x8xbf16>
  }
  %y = loom.layernorm %s, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

// A pre-norm stack: each layer normalises x first and ends with x + f(h);
// a final norm reads the last x. The loop is rotated: layer 0's norm runs
// before it (gains sliced off the stack), each iteration ends with the next
// layer's norm, fused with the sum, its gains the stack shifted by one with
// the final norm's last, and the final norm is the loop's second result.
// The stacked gains that only the first norm read are gone.
// CHECK-LABEL: func.func @rotated
// CHECK-SAME:  (%[[X:.*]]: tensor<4x8xbf16>, %[[W:.*]]: tensor<3x8x8xbf16>, %[[G:.*]]: tensor<3x8xf32>, %[[B:.*]]: tensor<3x8xf32>, %[[GF:.*]]: tensor<8xf32>, %[[BF:.*]]: tensor<8xf32>)
// CHECK:       %[[G0:.*]] = loom.slice %[[G]] [0, 0] to [1, 8] : tensor<3x8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:  %[[G0V:.*]] = loom.reshape %[[G0]] : tensor<1x8xf32> -> tensor<8xf32>
// CHECK-NEXT:  %[[GFR:.*]] = loom.reshape %[[GF]] : tensor<8xf32> -> tensor<1x8xf32>
// CHECK-NEXT:  %[[GR:.*]] = loom.slice %[[G]] [1, 0] to [3, 8] : tensor<3x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:  %[[GN:.*]] = loom.concat %[[GR]], %[[GFR]] dim = 0 : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<3x8xf32>
// CHECK:       %[[BN:.*]] = loom.concat
// CHECK-NEXT:  %[[H0:.*]] = loom.layernorm %[[X]], %[[G0V]], %{{.*}} eps = 1.000000e-05
// CHECK-NEXT:  %[[R:.*]]:2 = loom.repeat 3 carried(%[[X]], %[[H0]] : tensor<4x8xbf16>, tensor<4x8xbf16>) stacked(%[[W]], %[[GN]], %[[BN]] : tensor<3x8x8xbf16>, tensor<3x8xf32>, tensor<3x8xf32>)
// CHECK-NEXT:  ^bb0(%[[XI:.*]]: tensor<4x8xbf16>, %[[HI:.*]]: tensor<4x8xbf16>, %[[WI:.*]]: tensor<8x8xbf16>, %[[GI:.*]]: tensor<8xf32>, %[[BI:.*]]: tensor<8xf32>):
// CHECK-NEXT:    %[[F:.*]] = loom.matmul %[[HI]], %[[WI]]
// CHECK-NEXT:    %[[S:.*]], %[[Y:.*]] = loom.add_norm %[[XI]], %[[F]], %[[GI]], %[[BI]] eps = 1.000000e-05
// CHECK-NEXT:    loom.yield %[[S]], %[[Y]]
// CHECK:       return %[[R]]#1
// CHECK-NOT:   loom.layernorm
func.func @rotated(%x: tensor<4x8xbf16>, %w: tensor<3x8x8xbf16>, %g: tensor<3x8xf32>, %b: tensor<3x8xf32>, %gf: tensor<8xf32>, %bf: tensor<8xf32>) -> tensor<4x8xbf16> {
  %r = loom.repeat 3 carried(%x : tensor<4x8xbf16>) stacked(%g, %w, %b : tensor<3x8xf32>, tensor<3x8x8xbf16>, tensor<3x8xf32>) -> tensor<4x8xbf16> {
  ^bb0(%xi: tensor<4x8xbf16>, %gi: tensor<8xf32>, %wi: tensor<8x8xbf16>, %bi: tensor<8xf32>):
    %h = loom.layernorm %xi, %gi, %bi eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
    %f = loom.matmul %h, %wi : tensor<4x8xbf16>, tensor<8x8xbf16> -> tensor<4x8xbf16>
    %s = loom.add %xi, %f : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    loom.yield %s : tensor<4x8xbf16>
  }
  %y = loom.layernorm %r, %gf, %bf eps = 1.0e-05 : tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}

// -----

// One layer: the shifted gains are the final norm's alone (a reshape, no
// slice of the stack). An RMS norm whose gain comes from outside the loop
// and is the final norm's too needs no stack.
// CHECK-LABEL: func.func @one_layer
// CHECK:       %[[GN:.*]] = loom.reshape %arg3 : tensor<8xf32> -> tensor<1x8xf32>
// CHECK-NOT:   loom.concat
// CHECK:       loom.repeat 1 carried({{.*}}) stacked(%arg1, %[[GN]] :
// CHECK:       loom.add_norm {{.*}} rms
// CHECK-LABEL: func.func @invariant_gain
// CHECK:       %[[H0:.*]] = loom.rmsnorm %arg0, %arg2
// CHECK-NEXT:  loom.repeat 2 carried(%arg0, %[[H0]] : {{.*}}) stacked(%arg1 : tensor<2x8x8xf32>)
// CHECK:       loom.add_norm {{.*}}, %arg2 eps = {{.*}} rms
func.func @one_layer(%x: tensor<4x8xf32>, %w: tensor<1x8x8xf32>, %g: tensor<1x8xf32>, %gf: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 1 carried(%x : tensor<4x8xf32>) stacked(%w, %g : tensor<1x8x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %wi: tensor<8x8xf32>, %gi: tensor<8xf32>):
    %h = loom.rmsnorm %xi, %gi eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %f = loom.matmul %h, %wi : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %f : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %gf eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @invariant_gain(%x: tensor<4x8xf32>, %w: tensor<2x8x8xf32>, %g: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%w : tensor<2x8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %wi: tensor<8x8xf32>):
    %h = loom.rmsnorm %xi, %g eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %f = loom.matmul %h, %wi : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %f : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %g eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// Not rotated: the final value has another reader; the final norm has
// another eps; another kind of norm; a gain made inside the loop; an
// invariant gain that the final norm does not share.
// CHECK-LABEL: func.func @final_read_twice
// CHECK:       loom.repeat 2 carried(%arg0 : tensor<4x8xf32>)
// CHECK-LABEL: func.func @other_eps
// CHECK:       loom.repeat 2 carried(%arg0 : tensor<4x8xf32>)
// CHECK-LABEL: func.func @other_kind
// CHECK:       loom.repeat 2 carried(%arg0 : tensor<4x8xf32>)
// CHECK-LABEL: func.func @gain_made_inside
// CHECK:       loom.repeat 2 carried(%arg0 : tensor<4x8xf32>)
// CHECK-LABEL: func.func @other_invariant_gain
// CHECK:       loom.repeat 2 carried(%arg0 : tensor<4x8xf32>)
func.func @final_read_twice(%x: tensor<4x8xf32>, %g: tensor<2x8xf32>, %gf: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%g : tensor<2x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %gi: tensor<8xf32>):
    %h = loom.rmsnorm %xi, %gi eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %gf eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y, %r : tensor<4x8xf32>, tensor<4x8xf32>
}
func.func @other_eps(%x: tensor<4x8xf32>, %g: tensor<2x8xf32>, %gf: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%g : tensor<2x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %gi: tensor<8xf32>):
    %h = loom.rmsnorm %xi, %gi eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %gf eps = 1.0e-05 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @other_kind(%x: tensor<4x8xf32>, %g: tensor<2x8xf32>, %gf: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%g : tensor<2x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %gi: tensor<8xf32>):
    %h = loom.rmsnorm %xi, %gi eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.layernorm %r, %gf, %gf eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @gain_made_inside(%x: tensor<4x8xf32>, %g: tensor<2x8xf32>, %gf: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%g : tensor<2x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>, %gi: tensor<8xf32>):
    %g2 = loom.tanh %gi : tensor<8xf32>
    %h = loom.rmsnorm %xi, %g2 eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %gf eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
func.func @other_invariant_gain(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %gf: tensor<8xf32>) -> tensor<4x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%xi: tensor<4x8xf32>):
    %h = loom.rmsnorm %xi, %g eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    %s = loom.add %xi, %h : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %s : tensor<4x8xf32>
  }
  %y = loom.rmsnorm %r, %gf eps = 1.0e-06 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
