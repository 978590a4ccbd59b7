// RUN: loom-opt %s --split-input-file --loom-plan-memory | FileCheck %s

// Arguments live throughout; a value's bytes are reused once its last user
// is done, and not while an op reads it, but for an element-wise op, which
// writes over an input of its type that it is the last to read (the add
// over the relu, the exp over the sum; not the sum over the add); offsets
// are 64-byte aligned. The arena is at its live bound, the most bytes
// alive at one op: the inputs, the add's result and the sum's.
// CHECK-LABEL: func.func @reuse
// CHECK-SAME:  loom.offset = 0 : i64
// CHECK-SAME:  loom.offset = 64 : i64
// CHECK-SAME:  loom.arena_bound = 256 : i64, loom.arena_bytes = 256 : i64
// CHECK:       loom.relu %arg0 {loom.offsets = array<i64: 128>}
// CHECK:       loom.add {{.*}} {loom.offsets = array<i64: 128>}
// CHECK:       loom.sum {{.*}} {loom.offsets = array<i64: 192>}
// CHECK:       loom.exp {{.*}} {loom.offsets = array<i64: 192>}
func.func @reuse(%x: tensor<4x4xf32> {loom.input = "x"}, %b: tensor<4xf32> {loom.input = "b"}) -> tensor<4xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x4xf32>
  %1 = loom.add %0, %b : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x4xf32>
  %2 = loom.sum %1 dims = [1] : tensor<4x4xf32> -> tensor<4xf32>
  %3 = loom.exp %2 : tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// In a repeat: the carried value has one buffer for all iterations, and the
// stacked operand lives until the loop ends; body values are reused across
// iterations; reshapes and slices are views (-1). The initial value (read
// by the repeat alone) and the value each iteration yields (written after
// the iteration's last read of the carried one) are placed in the carried
// buffer, so nothing is copied into it. The add after the loop writes
// over the carried buffer, which it is the last to read.
// CHECK-LABEL: func.func @loop
// CHECK-SAME:  loom.offset = 0 : i64
// CHECK-SAME:  loom.offset = 256 : i64
// CHECK-SAME:  loom.arena_bytes = 3840 : i64
// CHECK:       loom.relu %arg0 {loom.offsets = array<i64: 3328>}
// CHECK:       loom.repeat 3 {{.*}} attributes {loom.offsets = array<i64: 3328>}
// CHECK:         loom.matmul {{.*}} {loom.offsets = array<i64: 3584>}
// CHECK:         loom.tanh {{.*}} {loom.offsets = array<i64: 3328>}
// CHECK:         loom.reshape {{.*}} {loom.offsets = array<i64: -1>}
// CHECK:       loom.add {{.*}} {loom.offsets = array<i64: 3328>}
func.func @loop(%x: tensor<4x16xf32> {loom.input = "x"}, %w: tensor<3x16x16xf32> {loom.param = "w", loom.init = #loom.init<zeros>}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x16xf32>
  %1 = loom.repeat 3 carried(%0 : tensor<4x16xf32>) stacked(%w : tensor<3x16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %wi: tensor<16x16xf32>):
    %2 = loom.matmul %h, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %3 = loom.tanh %2 : tensor<4x16xf32>
    %4 = loom.reshape %3 : tensor<4x16xf32> -> tensor<64xf32>
    %5 = loom.reshape %4 : tensor<64xf32> -> tensor<4x16xf32>
    loom.yield %5 : tensor<4x16xf32>
  }
  %6 = loom.add %1, %x : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %6 : tensor<4x16xf32>
}

// -----

// No sharing where it would make an op read a buffer it writes, or lose a
// value still to be read: the initial value has another reader (the add
// after the loop); the residual add reads the carried value it would
// overwrite; the yield reads %h after %s is written, so %s cannot take %h's
// place either. Each of those values keeps a buffer of its own.
// CHECK-LABEL: func.func @loop_kept_apart
// CHECK:       loom.relu %arg0 {loom.offsets = array<i64: [[INIT:[0-9]+]]>}
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: [[H:[0-9]+]], [[G:[0-9]+]]>}
// CHECK-NOT:   array<i64: [[INIT]]>
// CHECK:         loom.tanh %arg{{[0-9]+}} {loom.offsets = array<i64: [[T:[0-9]+]]>}
// CHECK-NOT:     array<i64: [[H]]>
// CHECK-NOT:     array<i64: [[G]]>
// CHECK:         loom.add {{.*}} {loom.offsets = array<i64: [[S:[0-9]+]]>}
// CHECK:         loom.yield
// CHECK:       loom.add %{{[0-9]+}}#0, %0
func.func @loop_kept_apart(%x: tensor<4x16xf32> {loom.input = "x"}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x16xf32>
  %1:2 = loom.repeat 2 carried(%0, %x : tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>, tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %g: tensor<4x16xf32>):
    %2 = loom.tanh %h : tensor<4x16xf32>
    %3 = loom.add %2, %h : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
    loom.yield %3, %h : tensor<4x16xf32>, tensor<4x16xf32>
  }
  %4 = loom.add %1#0, %0 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %4 : tensor<4x16xf32>
}

// -----

// Carried values that trade places: the iteration's moves park one of them
// in a scratch buffer alive only at the yield (loom.scratch_offset), here
// in the bytes of the body's dead tanh.
// CHECK-LABEL: func.func @loop_trading_places
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: {{[0-9]+}}, {{[0-9]+}}>, loom.scratch_offset = [[T:[0-9]+]] : i64}
// CHECK:         loom.tanh {{.*}} {loom.offsets = array<i64: [[T]]>}
func.func @loop_trading_places(%x: tensor<4x16xf32> {loom.input = "x"}, %y: tensor<4x16xf32> {loom.input = "y"}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x16xf32>
  %1 = loom.relu %y : tensor<4x16xf32>
  %2:2 = loom.repeat 2 carried(%0, %1 : tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>, tensor<4x16xf32> {
  ^bb0(%a: tensor<4x16xf32>, %b: tensor<4x16xf32>):
    %3 = loom.tanh %a : tensor<4x16xf32>
    loom.yield %b, %a : tensor<4x16xf32>, tensor<4x16xf32>
  }
  %4 = loom.add %2#0, %2#1 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %4 : tensor<4x16xf32>
}

// -----

// A transpose read only by contractions is a view (-1): the matmul reads its
// input with permuted strides, so %w lives until the matmul. One also read
// element-wise gets a buffer.
// CHECK-LABEL: func.func @transpose_views
// CHECK:       loom.transpose %arg1 {{.*}} {loom.offsets = array<i64: -1>}
// CHECK:       loom.matmul {{.*}} {loom.offsets = array<i64: [[M:[0-9]+]]>}
// CHECK:       loom.transpose %arg0 {{.*}} {loom.offsets = array<i64: {{[0-9]+}}>}
// CHECK:       loom.relu
func.func @transpose_views(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<6x8xf32> {loom.input = "w"}) -> (tensor<4x6xf32>, tensor<8x4xf32>) attributes {loom.model} {
  %0 = loom.transpose %w perm = [1, 0] : tensor<6x8xf32> -> tensor<8x6xf32>
  %1 = loom.matmul %x, %0 : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %2 = loom.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %3 = loom.relu %2 : tensor<8x4xf32>
  %4 = loom.matmul %2, %1 : tensor<8x4xf32>, tensor<4x6xf32> -> tensor<8x6xf32>
  return %1, %3 : tensor<4x6xf32>, tensor<8x4xf32>
}

// -----

// loom.add_norm writes its normalised rows over its second addend when it
// is that addend's last reader (rows are read whole before they are
// written): here an arena of 832 bytes instead of 1088. Where the addend
// is read later, the result gets a buffer of its own.
// CHECK-LABEL: func.func @add_norm_in_place
// CHECK-SAME:  loom.arena_bytes = 832 : i64
// CHECK:       loom.tanh {{.*}} {loom.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK:       loom.add_norm {{.*}} {loom.offsets = array<i64: {{[0-9]+}}, [[A]]>}
// CHECK-LABEL: func.func @add_norm_addend_read_later
// CHECK:       loom.tanh {{.*}} {loom.offsets = array<i64: [[B:[0-9]+]]>}
// CHECK-NOT:   loom.add_norm {{.*}} {loom.offsets = array<i64: {{[0-9]+}}, [[B]]>}
func.func @add_norm_in_place(%x: tensor<4x16xf32> {loom.input = "x"}, %g: tensor<16xf32> {loom.input = "g"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) attributes {loom.model} {
  %a = loom.tanh %x : tensor<4x16xf32>
  %s, %y = loom.add_norm %x, %a, %g eps = 1.0e-05 rms : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
  return %s, %y : tensor<4x16xf32>, tensor<4x16xf32>
}
func.func @add_norm_addend_read_later(%x: tensor<4x16xf32> {loom.input = "x"}, %g: tensor<16xf32> {loom.input = "g"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) attributes {loom.model} {
  %a = loom.tanh %x : tensor<4x16xf32>
  %s, %y = loom.add_norm %x, %a, %g eps = 1.0e-05 rms : tensor<4x16xf32>, tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>, tensor<4x16xf32>
  %z = loom.add %y, %a : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %s, %z : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// Sizes in bytes: 2^58 f32 elements are 2^60 bytes, where elements times
// bits (2^63) overflowed and every buffer went to offset 0. (The add
// writes over the exp.)
// CHECK-LABEL: func.func @huge
// CHECK-SAME: loom.offset = 0
// CHECK-SAME: loom.arena_bytes = 3458764513820540928
// CHECK: loom.relu {{.*}}loom.offsets = array<i64: 1152921504606846976>
// CHECK: loom.exp {{.*}}loom.offsets = array<i64: 2305843009213693952>
// CHECK: loom.add {{.*}}loom.offsets = array<i64: 2305843009213693952>
func.func @huge(%x: tensor<288230376151711744xf32> {loom.input = "x"}) -> tensor<288230376151711744xf32> attributes {loom.model, loom.spmd} {
  %0 = loom.relu %x : tensor<288230376151711744xf32>
  %1 = loom.exp %0 : tensor<288230376151711744xf32>
  %2 = loom.add %1, %0 : tensor<288230376151711744xf32>, tensor<288230376151711744xf32> -> tensor<288230376151711744xf32>
  return %2 : tensor<288230376151711744xf32>
}

// -----

// A fusion group writes its result over an input of the result's type,
// laid out as the result, whose last reader it is: here a product that
// only its bias and GELU read (every backend's kernel reads an element of
// it before writing that element, and a CUDA GEMM epilogue writes the
// result where the product would go): an arena of 960 bytes instead of
// 1216. Where the input is read later, the result gets a buffer of its own.
// CHECK-LABEL: func.func @group_in_place
// CHECK-SAME:  loom.arena_bytes = 960 : i64
// CHECK:       loom.matmul {{.*}} {loom.offsets = array<i64: [[P:[0-9]+]]>}
// CHECK:       loom.fused({{.*}}) -> tensor<4x16xf32> attributes {loom.offsets = array<i64: [[P]]>}
// CHECK-LABEL: func.func @group_input_read_later
// CHECK-SAME:  loom.arena_bytes = 1216 : i64
// CHECK:       loom.matmul {{.*}} {loom.offsets = array<i64: [[Q:[0-9]+]]>}
// CHECK-NOT:   loom.fused({{.*}}) -> tensor<4x16xf32> attributes {loom.offsets = array<i64: [[Q]]>}
func.func @group_in_place(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x16xf32> {loom.input = "w"}, %b: tensor<16xf32> {loom.input = "b"}) -> tensor<4x16xf32> attributes {loom.model} {
  %p = loom.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = loom.fused(%p, %b : tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<16xf32>):
    %s = loom.add %a0, %a1 : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
    %g = loom.gelu %s approximate tanh : tensor<4x16xf32>
    loom.yield %g : tensor<4x16xf32>
  }
  return %y : tensor<4x16xf32>
}
func.func @group_input_read_later(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x16xf32> {loom.input = "w"}, %b: tensor<16xf32> {loom.input = "b"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) attributes {loom.model} {
  %p = loom.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = loom.fused(%p, %b : tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<16xf32>):
    %s = loom.add %a0, %a1 : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
    %g = loom.gelu %s approximate tanh : tensor<4x16xf32>
    loom.yield %g : tensor<4x16xf32>
  }
  return %y, %p : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// An input of another element type (a cast's source) or another shape (a
// broadcast bias) is not the result's buffer: its elements are not where
// the result's are.
// CHECK-LABEL: func.func @group_input_other_type
// CHECK:       loom.matmul {{.*}} {loom.offsets = array<i64: [[R:[0-9]+]]>}
// CHECK-NOT:   loom.fused({{.*}}) -> tensor<4x16xbf16> attributes {loom.offsets = array<i64: [[R]]>}
func.func @group_input_other_type(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x16xf32> {loom.input = "w"}, %b: tensor<16xf32> {loom.input = "b"}) -> tensor<4x16xbf16> attributes {loom.model} {
  %p = loom.matmul %x, %w : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
  %y = loom.fused(%p, %b : tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xbf16> {
  ^bb0(%a0: tensor<4x16xf32>, %a1: tensor<16xf32>):
    %s = loom.add %a0, %a1 : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
    %c = loom.cast %s : tensor<4x16xf32> -> tensor<4x16xbf16>
    loom.yield %c : tensor<4x16xbf16>
  }
  return %y : tensor<4x16xbf16>
}

// -----

// So does an element-wise op left alone (its reader is a contraction): the
// scaled product goes over the product.
// CHECK-LABEL: func.func @elementwise_in_place
// CHECK:       loom.matmul {{.*}} {loom.offsets = array<i64: [[S:[0-9]+]]>}
// CHECK:       loom.mul {{.*}} {loom.offsets = array<i64: [[S]]>}
func.func @elementwise_in_place(%x: tensor<4x8xf32> {loom.input = "x"}, %w: tensor<8x8xf32> {loom.input = "w"}, %c: tensor<f32> {loom.input = "c"}) -> tensor<4x8xf32> attributes {loom.model} {
  %p = loom.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %q = loom.mul %p, %c : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
  %r = loom.matmul %q, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// A started collective reads its operand until its wait: the exp between
// them does not take the relu's buffer (it would without the start), and
// the gather's result, written in the background, is nobody else's. The
// future and the wait name the gather's buffer.
loom.mesh @m ["dp" = 2]
// CHECK-LABEL: func.func @started
// CHECK-SAME:  loom.offset = 256 : i64
// CHECK-SAME:  loom.arena_bytes = 384 : i64
// CHECK:       loom.relu %arg0 {loom.offsets = array<i64: 128>}
// CHECK:       loom.start {{.*}} attributes {loom.offsets = array<i64: 0>}
// CHECK-NEXT:    loom.all_gather {{.*}} {loom.offsets = array<i64: 0>}
// CHECK:       loom.exp %arg0 {loom.offsets = array<i64: 320>}
// CHECK:       loom.tanh {{.*}} {loom.offsets = array<i64: 320>}
// CHECK:       loom.wait {{.*}} {loom.offsets = array<i64: 0>}
func.func @started(%x: tensor<4x4xf32> {loom.input = "x"}) -> tensor<8x4xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x4xf32>
  %f = loom.start -> !loom.future<tensor<8x4xf32>> {
    %g = loom.all_gather %0 on @m ["dp"] dim 0 : tensor<4x4xf32> -> tensor<8x4xf32>
    loom.yield %g : tensor<8x4xf32>
  }
  %1 = loom.exp %x : tensor<4x4xf32>
  %2 = loom.tanh %1 : tensor<4x4xf32>
  %v = loom.wait %f : !loom.future<tensor<8x4xf32>>
  %3 = loom.concat %2, %2 dim = 0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %4 = loom.add %v, %3 : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  return %4 : tensor<8x4xf32>
}

// -----

// A gather started one iteration ahead (loom.prefetch) writes the next
// iteration's slice while this one's is read: its buffer holds two
// (2 x 1024 bytes), alive from before the loop (the first iteration's
// start) to its end, so the loop's own values go after it.
loom.mesh @m ["dp" = 2]
// CHECK-LABEL: func.func @prefetched
// CHECK-SAME:  loom.arena_bytes = 4352
// CHECK:       loom.repeat {{.*}} attributes {loom.offsets = array<i64: 1792>}
// CHECK:         loom.start {{.*}} attributes {loom.offsets = array<i64: 2048>}
// CHECK-NEXT:      loom.all_gather {{.*}} {loom.offsets = array<i64: 2048>}
// CHECK:         loom.wait {{.*}} {loom.offsets = array<i64: 2048>}
// CHECK-NEXT:    loom.prefetch
// CHECK-NEXT:    loom.matmul {{.*}} {loom.offsets = array<i64: 4096>}
func.func @prefetched(%x: tensor<4x16xf32> {loom.input = "x"}, %ws: tensor<3x8x16xf32> {loom.input = "ws"}) -> tensor<4x16xf32> attributes {loom.model} {
  %r = loom.repeat 3 carried(%x : tensor<4x16xf32>) stacked(%ws : tensor<3x8x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%c: tensor<4x16xf32>, %w: tensor<8x16xf32>):
    %f = loom.start -> !loom.future<tensor<16x16xf32>> {
      %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
      loom.yield %g : tensor<16x16xf32>
    }
    %v = loom.wait %f : !loom.future<tensor<16x16xf32>>
    loom.prefetch %f : !loom.future<tensor<16x16xf32>>
    %y = loom.matmul %c, %v : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %z = loom.relu %y : tensor<4x16xf32>
    loom.yield %z : tensor<4x16xf32>
  }
  return %r : tensor<4x16xf32>
}

// -----

// A carried buffer has a hole in its loop's body: after the iteration's
// last read of the carried value (%a's product) and before its first write
// of the next (%n). A temporary alive only in between (%b) takes those
// bytes in every iteration: an arena of 2816 bytes, where three buffers
// beside the carried one took 3072. %a and %c, alive at the hole's ends,
// do not.
// CHECK-LABEL: func.func @carried_hole
// CHECK-SAME:  loom.arena_bytes = 2816 : i64
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: [[C:[0-9]+]]>}
// CHECK:         loom.matmul {{.*}} {loom.offsets = array<i64: [[A:[0-9]+]]>}
// CHECK-NEXT:    loom.matmul {{.*}} {loom.offsets = array<i64: [[C]]>}
// CHECK-NEXT:    loom.matmul {{.*}} {loom.offsets = array<i64: [[A]]>}
// CHECK-NEXT:    loom.matmul {{.*}} {loom.offsets = array<i64: [[C]]>}
func.func @carried_hole(%x: tensor<4x16xf32> {loom.input = "x"}, %w: tensor<2x16x16xf32> {loom.input = "w"}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.tanh %x : tensor<4x16xf32>
  %r = loom.repeat 2 carried(%0 : tensor<4x16xf32>) stacked(%w : tensor<2x16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %wi: tensor<16x16xf32>):
    %a = loom.matmul %h, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %b = loom.matmul %a, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %c = loom.matmul %b, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %n = loom.matmul %c, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    loom.yield %n : tensor<4x16xf32>
  }
  return %r : tensor<4x16xf32>
}

// -----

// A loop's initial value that a norm reads before the loop (a rotated
// loop's first norm) still goes in the carried buffer: the loop is its
// last reader. Read again after the loop, it keeps a buffer of its own.
// CHECK-LABEL: func.func @initial_read_before
// CHECK:       loom.tanh {{.*}} {loom.offsets = array<i64: [[I:[0-9]+]]>}
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: [[I]]>}
// CHECK-LABEL: func.func @initial_read_after
// CHECK:       loom.tanh {{.*}} {loom.offsets = array<i64: [[J:[0-9]+]]>}
// CHECK-NOT:   loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: [[J]]>}
func.func @initial_read_before(%x: tensor<4x16xf32> {loom.input = "x"}, %g: tensor<16xf32> {loom.input = "g"}, %w: tensor<2x16x16xf32> {loom.input = "w"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) attributes {loom.model} {
  %0 = loom.tanh %x : tensor<4x16xf32>
  %y = loom.rmsnorm %0, %g eps = 1.0e-05 : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  %r = loom.repeat 2 carried(%0 : tensor<4x16xf32>) stacked(%w : tensor<2x16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %wi: tensor<16x16xf32>):
    %a = loom.matmul %h, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    loom.yield %a : tensor<4x16xf32>
  }
  return %r, %y : tensor<4x16xf32>, tensor<4x16xf32>
}
func.func @initial_read_after(%x: tensor<4x16xf32> {loom.input = "x"}, %g: tensor<16xf32> {loom.input = "g"}, %w: tensor<2x16x16xf32> {loom.input = "w"}) -> (tensor<4x16xf32>, tensor<4x16xf32>) attributes {loom.model} {
  %0 = loom.tanh %x : tensor<4x16xf32>
  %r = loom.repeat 2 carried(%0 : tensor<4x16xf32>) stacked(%w : tensor<2x16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %wi: tensor<16x16xf32>):
    %a = loom.matmul %h, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    loom.yield %a : tensor<4x16xf32>
  }
  %y = loom.rmsnorm %0, %g eps = 1.0e-05 : tensor<4x16xf32>, tensor<16xf32> -> tensor<4x16xf32>
  return %r, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A nested loop reads the outer carried value in every one of its
// iterations, so the outer buffer's hole begins after the nested loop
// ends: the nested body's product (%t) must not take the carried bytes,
// which the nested loop's next iteration reads again (it did when the
// hole began at the nested loop's first op).
// CHECK-LABEL: func.func @nested_read
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: [[C:[0-9]+]]>}
// CHECK:       loom.repeat 3
// CHECK-NOT:   loom.matmul {{.*}} {loom.offsets = array<i64: [[C]]>}
// CHECK:       loom.sub
func.func @nested_read(%x: tensor<4x16xf32> {loom.input = "x"}, %w: tensor<2x16x16xf32> {loom.input = "w"}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.tanh %x : tensor<4x16xf32>
  %r = loom.repeat 2 carried(%0 : tensor<4x16xf32>) stacked(%w : tensor<2x16x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>, %wi: tensor<16x16xf32>):
    %y = loom.matmul %h, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %z = loom.repeat 3 carried(%y : tensor<4x16xf32>) -> tensor<4x16xf32> {
    ^bb0(%yi: tensor<4x16xf32>):
      %t = loom.matmul %yi, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
      %u = loom.sub %t, %h : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
      loom.yield %u : tensor<4x16xf32>
    }
    %b = loom.matmul %z, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    %n = loom.matmul %b, %wi : tensor<4x16xf32>, tensor<16x16xf32> -> tensor<4x16xf32>
    loom.yield %n : tensor<4x16xf32>
  }
  return %r : tensor<4x16xf32>
}

// -----

// A value that initialises a loop but is read through a view after it
// keeps its own buffer: sharing the carried one, the exp would read the
// loop's result (both were at 256 before 2026-12-06).
// CHECK-LABEL: func.func @initial_viewed_after
// CHECK:       loom.relu %arg0 {loom.offsets = array<i64: 256>}
// CHECK:       loom.repeat 2 {{.*}} attributes {loom.offsets = array<i64: 512>}
// CHECK:       loom.exp %1 {loom.offsets = array<i64: 768>}
func.func @initial_viewed_after(%x: tensor<4x16xf32> {loom.input = "x"}) -> (tensor<4x16xf32>, tensor<64xf32>) attributes {loom.model} {
  %t = loom.relu %x : tensor<4x16xf32>
  %r = loom.reshape %t : tensor<4x16xf32> -> tensor<64xf32>
  %1 = loom.repeat 2 carried(%t : tensor<4x16xf32>) -> tensor<4x16xf32> {
  ^bb0(%h: tensor<4x16xf32>):
    %2 = loom.tanh %h : tensor<4x16xf32>
    loom.yield %2 : tensor<4x16xf32>
  }
  %s = loom.exp %r : tensor<64xf32>
  return %1, %s : tensor<4x16xf32>, tensor<64xf32>
}

// -----

// A slice view yielded into a carried buffer: the concatenation it views
// is twice the carried value's size and keeps its own buffer (given the
// carried one, it would have written 256 bytes into a 128-byte buffer);
// the slice is copied into the carried buffer when the iteration ends.
// The exponential, read only by the concatenation, is stored in its second
// half (128 bytes on), written in place; the tanh, read twice, is copied.
// CHECK-LABEL: func.func @yielded_slice_view
// CHECK:       loom.repeat 3 {{.*}} attributes {loom.offsets = array<i64: 128>}
// CHECK:       loom.exp {{.*}} {loom.offsets = array<i64: [[#EXP:]]>}
// CHECK:       loom.concat {{.*}} {loom.offsets = array<i64: [[#EXP-128]]>}
// CHECK:       loom.slice {{.*}} {loom.offsets = array<i64: -1>}
func.func @yielded_slice_view(%x: tensor<4x8xf32> {loom.input = "x"}) -> tensor<4x8xf32> attributes {loom.model} {
  %0 = loom.relu %x : tensor<4x8xf32>
  %1 = loom.repeat 3 carried(%0 : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%h: tensor<4x8xf32>):
    %2 = loom.tanh %h : tensor<4x8xf32>
    %3 = loom.exp %2 : tensor<4x8xf32>
    %4 = loom.concat %2, %3 dim = 0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %5 = loom.slice %4 [2, 0] to [6, 8] : tensor<8x8xf32> -> tensor<4x8xf32>
    loom.yield %5 : tensor<4x8xf32>
  }
  return %1 : tensor<4x8xf32>
}

// -----

// A concatenation of the model's arguments is a view when the plan can
// place them side by side: the stack from its second row on, then the
// final row (a rotated loop's norm gains). %f goes right after %s (256
// bytes on), not after %y, which comes between them in the argument list;
// the slice and the concatenation have no buffers.
// CHECK-LABEL: func.func @concat_view
// CHECK-SAME:  loom.offset = [[#STACK:]] : i64, loom.param = "s"
// CHECK-SAME:  loom.input = "y", loom.offset = {{[0-9]+}} : i64
// CHECK-SAME:  loom.offset = [[#STACK+256]] : i64, loom.param = "f"
// CHECK:       loom.slice {{.*}} {loom.offsets = array<i64: -1>}
// CHECK-NEXT:  loom.concat {{.*}} {loom.offsets = array<i64: -1>}
func.func @concat_view(%x: tensor<4x16xf32> {loom.input = "x"}, %s: tensor<4x16xf32> {loom.param = "s", loom.init = #loom.init<zeros>}, %y: tensor<4x16xf32> {loom.input = "y"}, %f: tensor<1x16xf32> {loom.param = "f", loom.init = #loom.init<zeros>}) -> tensor<4x16xf32> attributes {loom.model} {
  %0 = loom.slice %s [1, 0] to [4, 16] : tensor<4x16xf32> -> tensor<3x16xf32>
  %1 = loom.concat %0, %f dim = 0 : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  %2 = loom.add %x, %1 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %3 = loom.add %2, %y : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return %3 : tensor<4x16xf32>
}

// -----

// Not views: an argument that is a piece of two concatenations (%f), and a
// stack whose rows do not fill whole 64-byte units (4 x 5 f32: the final
// row could not start where the stack ends).
// CHECK-LABEL: func.func @concat_argument_twice
// CHECK:       loom.concat {{.*}} {loom.offsets = array<i64: {{[0-9]+}}>}
// CHECK:       loom.concat {{.*}} {loom.offsets = array<i64: {{[0-9]+}}>}
// CHECK-LABEL: func.func @concat_unaligned
// CHECK:       loom.concat {{.*}} {loom.offsets = array<i64: {{[0-9]+}}>}
func.func @concat_argument_twice(%x: tensor<4x16xf32> {loom.input = "x"}, %s: tensor<4x16xf32> {loom.param = "s", loom.init = #loom.init<zeros>}, %f: tensor<1x16xf32> {loom.param = "f", loom.init = #loom.init<zeros>}) -> (tensor<4x16xf32>, tensor<2x16xf32>) attributes {loom.model} {
  %0 = loom.slice %s [1, 0] to [4, 16] : tensor<4x16xf32> -> tensor<3x16xf32>
  %1 = loom.concat %0, %f dim = 0 : (tensor<3x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  %2 = loom.add %x, %1 : tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  %3 = loom.concat %f, %f dim = 0 : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<2x16xf32>
  return %2, %3 : tensor<4x16xf32>, tensor<2x16xf32>
}
func.func @concat_unaligned(%x: tensor<4x5xf32> {loom.input = "x"}, %s: tensor<4x5xf32> {loom.param = "s", loom.init = #loom.init<zeros>}, %f: tensor<1x5xf32> {loom.param = "f", loom.init = #loom.init<zeros>}) -> tensor<4x5xf32> attributes {loom.model} {
  %0 = loom.slice %s [1, 0] to [4, 5] : tensor<4x5xf32> -> tensor<3x5xf32>
  %1 = loom.concat %0, %f dim = 0 : (tensor<3x5xf32>, tensor<1x5xf32>) -> tensor<4x5xf32>
  %2 = loom.add %x, %1 : tensor<4x5xf32>, tensor<4x5xf32> -> tensor<4x5xf32>
  return %2 : tensor<4x5xf32>
}
