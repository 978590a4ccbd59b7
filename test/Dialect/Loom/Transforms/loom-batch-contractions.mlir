// RUN: loom-opt %s --split-input-file --loom-batch-contractions | FileCheck %s

// Three projections of one activation with weights and results equally
// spaced in the arena: one loom.batched_einsum in the last one's place,
// with the results' offsets. The views of the results between them move
// after it, in their order.
// CHECK-LABEL: func.func @qkv
// CHECK-NEXT:  %[[R:.*]]:3 = loom.batched_einsum "bsd,de->bse" %arg0, %arg1, %arg2, %arg3 {loom.offsets = array<i64: 512, 640, 768>} : tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
// CHECK-NEXT:  %[[Q:.*]] = loom.reshape %[[R]]#0
// CHECK-NEXT:  %[[K:.*]] = loom.reshape %[[R]]#1
// CHECK-NEXT:  %[[V:.*]] = loom.reshape %[[R]]#2
// CHECK-NEXT:  return %[[Q]], %[[K]], %[[V]]
func.func @qkv(%x: tensor<2x4x8xbf16> {loom.offset = 0 : i64}, %wq: tensor<8x8xbf16> {loom.offset = 128 : i64}, %wk: tensor<8x8xbf16> {loom.offset = 256 : i64}, %wv: tensor<8x8xbf16> {loom.offset = 384 : i64}) -> (tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>) {
  %q = loom.einsum "bsd,de->bse" %x, %wq {loom.offsets = array<i64: 512>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %qv = loom.reshape %q {loom.offsets = array<i64: -1>} : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %k = loom.einsum "bsd,de->bse" %x, %wk {loom.offsets = array<i64: 640>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %kv = loom.reshape %k {loom.offsets = array<i64: -1>} : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  %v = loom.einsum "bsd,de->bse" %x, %wv {loom.offsets = array<i64: 768>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %vv = loom.reshape %v {loom.offsets = array<i64: -1>} : tensor<2x4x8xbf16> -> tensor<8x8xbf16>
  return %qv, %kv, %vv : tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>
}

// -----

// Members go in order of their results' offsets, whatever their order in
// the program; each use gets its own result. Matmuls batch as their
// einsum spec.
// CHECK-LABEL: func.func @matmuls_by_offset
// CHECK-NEXT:  %[[R:.*]]:2 = loom.batched_einsum "abc,cd->abd" %arg0, %arg2, %arg1 {loom.offsets = array<i64: 768, 1024>}
// CHECK-NEXT:  return %[[R]]#1, %[[R]]#0
func.func @matmuls_by_offset(%x: tensor<2x4x8xf32> {loom.offset = 0 : i64}, %w1: tensor<8x8xf32> {loom.offset = 512 : i64}, %w2: tensor<8x8xf32> {loom.offset = 256 : i64}) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %a = loom.matmul %x, %w1 {loom.offsets = array<i64: 1024>} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  %b = loom.matmul %x, %w2 {loom.offsets = array<i64: 768>} : tensor<2x4x8xf32>, tensor<8x8xf32> -> tensor<2x4x8xf32>
  return %a, %b : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Weights 128, then 256 bytes apart: the first two are a batch, the third
// stays alone.
// CHECK-LABEL: func.func @chains
// CHECK-NEXT:  loom.batched_einsum "bsd,de->bse" %arg0, %arg1, %arg2 {loom.offsets = array<i64: 640, 768>}
// CHECK-NEXT:  loom.einsum "bsd,de->bse" %arg0, %arg3 {loom.offsets = array<i64: 896>}
func.func @chains(%x: tensor<2x4x8xbf16> {loom.offset = 0 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}, %w3: tensor<8x8xbf16> {loom.offset = 512 : i64}) -> (tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>) {
  %a = loom.einsum "bsd,de->bse" %x, %w1 {loom.offsets = array<i64: 640>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %b = loom.einsum "bsd,de->bse" %x, %w2 {loom.offsets = array<i64: 768>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  %c = loom.einsum "bsd,de->bse" %x, %w3 {loom.offsets = array<i64: 896>} : (tensor<2x4x8xbf16>, tensor<8x8xbf16>) -> tensor<2x4x8xbf16>
  return %a, %b, %c : tensor<2x4x8xbf16>, tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
}

// -----

// A repeat's stacked weights: their slices move by the same bytes each
// iteration, and the stacks lie 256 bytes apart.
// CHECK-LABEL: func.func @stacked
// CHECK:       loom.repeat
// CHECK-NEXT:  ^bb0
// CHECK-NEXT:  loom.batched_einsum "sd,de->se" %arg0, %arg4, %arg5 {loom.offsets = array<i64: 640, 704>}
func.func @stacked(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %wq: tensor<2x8x8xbf16> {loom.offset = 128 : i64}, %wk: tensor<2x8x8xbf16> {loom.offset = 384 : i64}) -> tensor<4x8xbf16> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xbf16>) stacked(%wq, %wk : tensor<2x8x8xbf16>, tensor<2x8x8xbf16>) -> tensor<4x8xbf16> attributes {loom.offsets = array<i64: 1024>} {
  ^bb0(%h: tensor<4x8xbf16>, %a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>):
    %q = loom.einsum "sd,de->se" %x, %a {loom.offsets = array<i64: 640>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %k = loom.einsum "sd,de->se" %x, %b {loom.offsets = array<i64: 704>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %s = loom.add %q, %k {loom.offsets = array<i64: 768>} : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    loom.yield %s : tensor<4x8xbf16>
  }
  return %r : tensor<4x8xbf16>
}

// -----

// Kept apart: different first operands; a result read (not as a view)
// before the last member; results over an operand; weights in the
// opposite order to the results; a stacked weight with an unstacked one;
// a letter of one operand only (summed before the product).
// CHECK-LABEL: func.func @different_lhs
// CHECK-NOT:   loom.batched_einsum
// CHECK-LABEL: func.func @read_between
// CHECK-NOT:   loom.batched_einsum
// CHECK-LABEL: func.func @over_an_operand
// CHECK-NOT:   loom.batched_einsum
// CHECK-LABEL: func.func @weights_descending
// CHECK-NOT:   loom.batched_einsum
// CHECK-LABEL: func.func @stacked_and_not
// CHECK-NOT:   loom.batched_einsum
// CHECK-LABEL: func.func @summed_letter
// CHECK-NOT:   loom.batched_einsum
func.func @different_lhs(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %y: tensor<4x8xbf16> {loom.offset = 64 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %a = loom.einsum "sd,de->se" %x, %w1 {loom.offsets = array<i64: 384>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %b = loom.einsum "sd,de->se" %y, %w2 {loom.offsets = array<i64: 448>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16>
}
func.func @read_between(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %a = loom.einsum "sd,de->se" %x, %w1 {loom.offsets = array<i64: 384>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %t = loom.tanh %a {loom.offsets = array<i64: 576>} : tensor<4x8xbf16>
  %b = loom.einsum "sd,de->se" %x, %w2 {loom.offsets = array<i64: 448>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %t, %b : tensor<4x8xbf16>, tensor<4x8xbf16>
}
func.func @over_an_operand(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %a = loom.einsum "sd,de->se" %x, %w1 {loom.offsets = array<i64: 192>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %b = loom.einsum "sd,de->se" %x, %w2 {loom.offsets = array<i64: 320>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16>
}
func.func @weights_descending(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %a = loom.einsum "sd,de->se" %x, %w1 {loom.offsets = array<i64: 448>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %b = loom.einsum "sd,de->se" %x, %w2 {loom.offsets = array<i64: 384>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16>
}
func.func @stacked_and_not(%x: tensor<4x8xbf16> {loom.offset = 0 : i64}, %wq: tensor<2x8x8xbf16> {loom.offset = 128 : i64}, %wk: tensor<8x8xbf16> {loom.offset = 384 : i64}) -> tensor<4x8xbf16> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xbf16>) stacked(%wq : tensor<2x8x8xbf16>) -> tensor<4x8xbf16> attributes {loom.offsets = array<i64: 1024>} {
  ^bb0(%h: tensor<4x8xbf16>, %a: tensor<8x8xbf16>):
    %q = loom.einsum "sd,de->se" %x, %a {loom.offsets = array<i64: 640>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %k = loom.einsum "sd,de->se" %x, %wk {loom.offsets = array<i64: 704>} : (tensor<4x8xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
    %s = loom.add %q, %k {loom.offsets = array<i64: 768>} : tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xbf16>
    loom.yield %s : tensor<4x8xbf16>
  }
  return %r : tensor<4x8xbf16>
}
func.func @summed_letter(%x: tensor<4x8x2xbf16> {loom.offset = 0 : i64}, %w1: tensor<8x8xbf16> {loom.offset = 128 : i64}, %w2: tensor<8x8xbf16> {loom.offset = 256 : i64}) -> (tensor<4x8xbf16>, tensor<4x8xbf16>) {
  %a = loom.einsum "sdz,de->se" %x, %w1 {loom.offsets = array<i64: 384>} : (tensor<4x8x2xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  %b = loom.einsum "sdz,de->se" %x, %w2 {loom.offsets = array<i64: 448>} : (tensor<4x8x2xbf16>, tensor<8x8xbf16>) -> tensor<4x8xbf16>
  return %a, %b : tensor<4x8xbf16>, tensor<4x8xbf16>
}
