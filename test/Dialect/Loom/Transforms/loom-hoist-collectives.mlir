// RUN: loom-opt %s --split-input-file --loom-hoist-collectives | FileCheck %s

// Sequence parallelism's k and v: gathered along s where they lie
// ([b, s, h, e]), and the transposes moved after the gathers, just before
// attention, which reads them through strides (so that
// loom-combine-collectives still sees the gathers first read there). The reason names the transpose's
// input and its maker (here an argument), its layouts in the input's order.
loom.mesh @m ["sp" = 2]
// CHECK-LABEL: func.func @gathers_for_attention
// CHECK-NEXT:  %[[K:.*]] = loom.all_gather %arg1 on @m ["sp"] dim 1 {loom.reason = {consumer = "loom.attention at a.loom:9:7", from = #loom.sharding<@m, [{}, {"sp"}, {}, {}]>, producer = "argument 1 at {{.*}}", to = #loom.sharding<@m, [{}, {}, {}, {}]>, value = "the input of loom.transpose at {{.*}}"}} : tensor<2x4x3x8xf32> -> tensor<2x8x3x8xf32>
// CHECK-NEXT:  %[[V:.*]] = loom.all_gather %arg2 on @m ["sp"] dim 1 : tensor<2x4x3x8xf32> -> tensor<2x8x3x8xf32>
// CHECK-NEXT:  %[[KT:.*]] = loom.transpose %[[K]] perm = [0, 2, 1, 3] : tensor<2x8x3x8xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT:  %[[VT:.*]] = loom.transpose %[[V]] perm = [0, 2, 1, 3] : tensor<2x8x3x8xf32> -> tensor<2x3x8x8xf32>
// CHECK-NEXT:  loom.attention %arg0, %[[KT]], %[[VT]]
func.func @gathers_for_attention(%q: tensor<2x3x8x8xf32> {loom.input = "q"}, %k: tensor<2x4x3x8xf32> {loom.input = "k"}, %v: tensor<2x4x3x8xf32> {loom.input = "v"}) -> tensor<2x3x8x8xf32> attributes {loom.model} {
  %kt = loom.transpose %k perm = [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
  %kg = loom.all_gather %kt on @m ["sp"] dim 2 {loom.reason = {value = "the result of loom.transpose", from = #loom.sharding<@m, [{}, {}, {"sp"}, {}]>, to = #loom.sharding<@m, [{}, {}, {}, {}]>, producer = "loom.transpose at a.loom:6:7", consumer = "loom.attention at a.loom:9:7"}} : tensor<2x3x4x8xf32> -> tensor<2x3x8x8xf32>
  %vt = loom.transpose %v perm = [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
  %vg = loom.all_gather %vt on @m ["sp"] dim 2 : tensor<2x3x4x8xf32> -> tensor<2x3x8x8xf32>
  %o = loom.attention %q, %kg, %vg causal scale = 1.250000e-01 : tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32> -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}

// -----

// An all_to_all's two dimensions and an all_reduce, each before a
// transpose that a contraction then reads through strides.
loom.mesh @m ["tp" = 2]
// CHECK-LABEL: func.func @exchanged_and_reduced
// CHECK-NEXT:  %[[A:.*]] = loom.all_to_all %arg0 on @m ["tp"] split 0 concat 1 : tensor<4x6xf32> -> tensor<2x12xf32>
// CHECK-NEXT:  %[[R:.*]] = loom.all_reduce %arg1 on @m ["tp"] sum : tensor<2x5xf32>
// CHECK-NEXT:  %[[AT:.*]] = loom.transpose %[[A]] perm = [1, 0] : tensor<2x12xf32> -> tensor<12x2xf32>
// CHECK-NEXT:  loom.matmul %[[AT]], %arg2
// CHECK-NEXT:  %[[RT:.*]] = loom.transpose %[[R]] perm = [1, 0] : tensor<2x5xf32> -> tensor<5x2xf32>
// CHECK-NEXT:  loom.matmul %[[RT]], %arg3
func.func @exchanged_and_reduced(%x: tensor<4x6xf32> {loom.input = "x"}, %y: tensor<2x5xf32> {loom.input = "y"}, %w: tensor<2x3xf32> {loom.input = "w"}, %u: tensor<2x3xf32> {loom.input = "u"}) -> (tensor<12x3xf32>, tensor<5x3xf32>) attributes {loom.model} {
  %t = loom.transpose %x perm = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
  %a = loom.all_to_all %t on @m ["tp"] split 1 concat 0 : tensor<6x4xf32> -> tensor<12x2xf32>
  %s = loom.transpose %y perm = [1, 0] : tensor<2x5xf32> -> tensor<5x2xf32>
  %r = loom.all_reduce %s on @m ["tp"] sum : tensor<5x2xf32>
  %p = loom.matmul %a, %w : tensor<12x2xf32>, tensor<2x3xf32> -> tensor<12x3xf32>
  %q = loom.matmul %r, %u : tensor<5x2xf32>, tensor<2x3xf32> -> tensor<5x3xf32>
  return %p, %q : tensor<12x3xf32>, tensor<5x3xf32>
}

// -----

// Left alone: a gather whose reader does not take permuted strides (the
// transpose after it would copy the gathered value, twice the bytes), and
// a transpose that another op reads too.
loom.mesh @m ["sp" = 2]
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT:  %[[T:.*]] = loom.transpose %arg0 perm = [1, 0]
// CHECK-NEXT:  %[[G:.*]] = loom.all_gather %[[T]] on @m ["sp"] dim 0
// CHECK-NEXT:  loom.add %[[G]], %arg1
// CHECK-NEXT:  %[[U:.*]] = loom.transpose %arg2 perm = [1, 0]
// CHECK-NEXT:  %[[H:.*]] = loom.all_gather %[[U]] on @m ["sp"] dim 0
// CHECK-NEXT:  loom.matmul %[[H]], %[[U]]
func.func @left_alone(%x: tensor<3x4xf32> {loom.input = "x"}, %y: tensor<8x3xf32> {loom.input = "y"}, %z: tensor<4x4xf32> {loom.input = "z"}) -> (tensor<8x3xf32>, tensor<8x4xf32>) attributes {loom.model} {
  %t = loom.transpose %x perm = [1, 0] : tensor<3x4xf32> -> tensor<4x3xf32>
  %g = loom.all_gather %t on @m ["sp"] dim 0 : tensor<4x3xf32> -> tensor<8x3xf32>
  %s = loom.add %g, %y : tensor<8x3xf32>, tensor<8x3xf32> -> tensor<8x3xf32>
  %u = loom.transpose %z perm = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %h = loom.all_gather %u on @m ["sp"] dim 0 : tensor<4x4xf32> -> tensor<8x4xf32>
  %p = loom.matmul %h, %u : tensor<8x4xf32>, tensor<4x4xf32> -> tensor<8x4xf32>
  return %s, %p : tensor<8x3xf32>, tensor<8x4xf32>
}
