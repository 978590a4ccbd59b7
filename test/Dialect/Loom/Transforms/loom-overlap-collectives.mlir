// RUN: loom-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(loom-overlap-collectives))' | FileCheck %s

// A gather whose operand is an argument starts at the top of the function;
// its wait goes just before the matmul that reads it, so the two kernels
// in between run while it communicates.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @hoist_to_top
// CHECK-SAME: (%[[W:.*]]: tensor<64x128xbf16>, %[[X:.*]]: tensor<8x128xbf16>)
// CHECK-NEXT: %[[F:.*]] = loom.start -> !loom.future<tensor<128x128xbf16>> {
// CHECK-NEXT:   %[[G:.*]] = loom.all_gather %[[W]] on @m ["dp"] dim 0
// CHECK-NEXT:   loom.yield %[[G]] : tensor<128x128xbf16>
// CHECK-NEXT: }
// CHECK-NEXT: %[[A:.*]] = loom.gelu %[[X]]
// CHECK-NEXT: %[[B:.*]] = loom.relu %[[A]]
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]] : !loom.future<tensor<128x128xbf16>>
// CHECK-NEXT: loom.matmul %[[B]], %[[V]]
func.func @hoist_to_top(%w: tensor<64x128xbf16>, %x: tensor<8x128xbf16>) -> tensor<8x128xbf16> {
  %a = loom.gelu %x : tensor<8x128xbf16>
  %b = loom.relu %a : tensor<8x128xbf16>
  %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<64x128xbf16> -> tensor<128x128xbf16>
  %y = loom.matmul %b, %g : tensor<8x128xbf16>, tensor<128x128xbf16> -> tensor<8x128xbf16>
  return %y : tensor<8x128xbf16>
}

// -----

// A start goes after the op that makes its operand, never before it.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @after_operand
// CHECK: %[[P:.*]] = loom.matmul
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_reduce %[[P]] on @m ["tp"] sum
// CHECK: loom.exp
// CHECK-NEXT: loom.wait %[[F]]
// CHECK-NEXT: loom.add
func.func @after_operand(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %z: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %p = loom.matmul %x, %w : tensor<8x64xf32>, tensor<64x32xf32> -> tensor<8x32xf32>
  %e = loom.exp %z : tensor<8x32xf32>
  %r = loom.all_reduce %p on @m ["tp"] sum : tensor<8x32xf32>
  %s = loom.add %r, %e : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  return %s : tensor<8x32xf32>
}

// -----

// Collectives over a shared axis keep their order: the gather over tp
// starts after the all_reduce over tp, though its operand exists from the
// top (on one communicator, the all_reduce would wait behind it). The
// all_reduce, read at once, with nothing to hide behind, stays as it is.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @in_order
// CHECK-NEXT: loom.exp
// CHECK-NEXT: %[[R:.*]] = loom.all_reduce
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather
// CHECK: loom.add %[[R]]
// CHECK-NEXT: loom.relu
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.matmul {{.*}}, %[[V]]
func.func @in_order(%a: tensor<8x32xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %e = loom.exp %a : tensor<8x32xf32>
  %r = loom.all_reduce %e on @m ["tp"] sum : tensor<8x32xf32>
  %s = loom.add %r, %e : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %t = loom.relu %s : tensor<8x32xf32>
  %g = loom.all_gather %w on @m ["tp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %t, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// A blocking collective over other axes is passed: it runs beside the
// started one (on the compute stream, over another communicator), so the
// gather over dp starts at the top and the exp hides it too. The gather
// over tp and dp shares an axis with each, so it starts after the
// all_reduce over tp, and it is issued after the first start.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @passes_other_axes
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg1 on @m ["dp"]
// CHECK:      loom.exp
// CHECK-NEXT: %[[R:.*]] = loom.all_reduce {{.*}} ["tp"]
// CHECK-NEXT: %[[F2:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg2 on @m ["tp", "dp"]
// CHECK:      loom.add %[[R]]
// CHECK-NEXT: loom.relu
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.matmul {{.*}}, %[[V]]
// CHECK-NEXT: loom.exp
// CHECK-NEXT: %[[V2:.*]] = loom.wait %[[F2]]
// CHECK-NEXT: loom.matmul {{.*}}, %[[V2]]
func.func @passes_other_axes(%a: tensor<8x32xf32>, %w: tensor<16x32xf32>, %w2: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %e = loom.exp %a : tensor<8x32xf32>
  %r = loom.all_reduce %e on @m ["tp"] sum : tensor<8x32xf32>
  %s = loom.add %r, %e : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
  %t = loom.relu %s : tensor<8x32xf32>
  %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %t, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %u = loom.exp %y : tensor<8x32xf32>
  %h = loom.all_gather %w2 on @m ["tp", "dp"] dim 0 : tensor<8x32xf32> -> tensor<32x32xf32>
  %z = loom.matmul %u, %h : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %z : tensor<8x32xf32>
}

// -----

// A combined collective is started as one; all of its results are waited
// for before the first op that reads any of them.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @combined
// CHECK-NEXT: %[[F:.*]]:2 = loom.start -> !loom.future<tensor<32x32xf32>>, !loom.future<tensor<32x32xf32>> {
// CHECK-NEXT:   %[[C:.*]]:2 = loom.combined
// CHECK:        loom.yield %[[C]]#0, %[[C]]#1
// CHECK-NEXT: }
// CHECK-NEXT: loom.exp
// CHECK-NEXT: %[[V0:.*]] = loom.wait %[[F]]#0
// CHECK-NEXT: %[[V1:.*]] = loom.wait %[[F]]#1
// CHECK-NEXT: loom.add %[[V0]], %[[V1]]
func.func @combined(%a: tensor<8x32xf32>, %u: tensor<16x32xf32>, %v: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %e = loom.exp %a : tensor<8x32xf32>
  %g:2 = loom.combined -> (tensor<32x32xf32>, tensor<32x32xf32>) {
    %0 = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %1 = loom.all_gather %v on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    loom.yield %0, %1 : tensor<32x32xf32>, tensor<32x32xf32>
  }
  %s = loom.add %g#0, %g#1 : tensor<32x32xf32>, tensor<32x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %e, %s : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// A combined collective whose members are read at different places is
// split: the member read first alone, the two read later together, started
// after it and waited for where the first of them is read, so that the
// first product runs while they arrive.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @split
// CHECK-NEXT: %[[F:.*]] = loom.start -> !loom.future<tensor<32x32xf32>> {
// CHECK-NEXT:   loom.all_gather %arg1
// CHECK:      %[[G:.*]]:2 = loom.start -> !loom.future<tensor<32x32xf32>>, !loom.future<tensor<32x32xf32>> {
// CHECK-NEXT:   %[[C:.*]]:2 = loom.combined
// CHECK-NEXT:     loom.all_gather %arg2
// CHECK-NEXT:     loom.all_gather %arg3
// CHECK:      loom.exp
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: %[[Y:.*]] = loom.matmul {{.*}}, %[[V]]
// CHECK-NEXT: %[[W1:.*]] = loom.wait %[[G]]#0
// CHECK-NEXT: %[[W2:.*]] = loom.wait %[[G]]#1
// CHECK-NEXT: %[[Z:.*]] = loom.matmul %[[Y]], %[[W1]]
// CHECK-NEXT: loom.matmul %[[Z]], %[[W2]]
func.func @split(%a: tensor<8x32xf32>, %u: tensor<16x32xf32>, %v: tensor<16x32xf32>, %w: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %e = loom.exp %a : tensor<8x32xf32>
  %g:3 = loom.combined -> (tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>) {
    %0 = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %1 = loom.all_gather %v on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %2 = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    loom.yield %0, %1, %2 : tensor<32x32xf32>, tensor<32x32xf32>, tensor<32x32xf32>
  }
  %y = loom.matmul %e, %g#0 : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %z = loom.matmul %y, %g#1 : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %t = loom.matmul %z, %g#2 : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %t : tensor<8x32xf32>
}

// -----

// Read inside a loop: the wait goes before the loop. Inside a loop's
// iteration the same holds within the iteration: a start is never moved
// out of its block, and a block's argument is made at its top. The gather
// of the iteration's stacked slice is also started one iteration ahead,
// after its wait, where the two products hide it.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @loops
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg0
// CHECK: loom.exp
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.repeat 2
// CHECK-NEXT: ^bb0(%[[X:.*]]: tensor<8x32xf32>, %[[W:.*]]: tensor<16x32xf32>):
// CHECK-NEXT:   %[[G:.*]] = loom.start
// CHECK-NEXT:     loom.all_gather %[[W]]
// CHECK:        loom.relu %[[X]]
// CHECK-NEXT:   %[[H:.*]] = loom.wait %[[G]]
// CHECK-NEXT:   loom.prefetch %[[G]]
// CHECK-NEXT:   loom.matmul {{.*}}, %[[H]]
// CHECK:        loom.matmul {{.*}}, %[[V]]
func.func @loops(%u: tensor<16x32xf32>, %a: tensor<8x32xf32>, %ws: tensor<2x16x32xf32>) -> tensor<8x32xf32> {
  %e = loom.exp %a : tensor<8x32xf32>
  %g = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %out = loom.repeat 2 carried(%e : tensor<8x32xf32>) stacked(%ws : tensor<2x16x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>):
    %r = loom.relu %x : tensor<8x32xf32>
    %h = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %y = loom.matmul %r, %h : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    %z = loom.matmul %y, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    loom.yield %z : tensor<8x32xf32>
  }
  return %out : tensor<8x32xf32>
}

// -----

// A loop whose collectives share an axis is not passed: the gather after
// the loop starts after it. Views and constants hide nothing; a result
// nothing reads is not waited for.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @not_passed
// CHECK: loom.repeat
// CHECK: loom.all_reduce
// CHECK: loom.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg0
// CHECK: loom.exp
// CHECK-NEXT: loom.wait %[[F]]
// CHECK-NOT: loom.start
// CHECK: loom.all_reduce %arg0 on @m ["dp"]
// CHECK-NEXT: loom.all_gather %arg0 on @m ["dp"] dim 1
// CHECK-NEXT: loom.reshape
// CHECK-NEXT: loom.matmul
func.func @not_passed(%u: tensor<16x32xf32>, %a: tensor<8x32xf32>) -> (tensor<8x32xf32>, tensor<8x32xf32>) {
  %out = loom.repeat 2 carried(%a : tensor<8x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>):
    %r = loom.all_reduce %x on @m ["dp"] sum : tensor<8x32xf32>
    loom.yield %r : tensor<8x32xf32>
  }
  %e = loom.exp %out : tensor<8x32xf32>
  %g = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %e, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  %unread = loom.all_reduce %u on @m ["dp"] sum : tensor<16x32xf32>
  %h = loom.all_gather %u on @m ["dp"] dim 1 : tensor<16x32xf32> -> tensor<16x64xf32>
  %v = loom.reshape %h : tensor<16x64xf32> -> tensor<32x32xf32>
  %z = loom.matmul %y, %v : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %y, %z : tensor<8x32xf32>, tensor<8x32xf32>
}

// -----

// A loop whose collectives are all over other axes is passed like one of
// them: the gather over dp starts before it, and the loop hides it.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @passes_loop
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg0 on @m ["dp"]
// CHECK:      loom.repeat
// CHECK:        loom.all_reduce {{.*}} ["tp"]
// CHECK:      loom.exp
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.matmul {{.*}}, %[[V]]
func.func @passes_loop(%u: tensor<16x32xf32>, %a: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %out = loom.repeat 2 carried(%a : tensor<8x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>):
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8x32xf32>
    loom.yield %r : tensor<8x32xf32>
  }
  %e = loom.exp %out : tensor<8x32xf32>
  %g = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %e, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// An all_slice sends nothing: a gather over its axes passes it.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @passes_all_slice
// CHECK-NEXT: %[[F:.*]] = loom.start
// CHECK-NEXT:   loom.all_gather %arg1 on @m ["dp"]
// CHECK:      loom.all_slice %arg0 on @m ["dp"]
// CHECK-NEXT: loom.exp
// CHECK-NEXT: %[[V:.*]] = loom.wait %[[F]]
// CHECK-NEXT: loom.matmul {{.*}}, %[[V]]
func.func @passes_all_slice(%a: tensor<8x32xf32>, %w: tensor<16x32xf32>) -> tensor<4x32xf32> {
  %s = loom.all_slice %a on @m ["dp"] dim 0 : tensor<8x32xf32> -> tensor<4x32xf32>
  %e = loom.exp %s : tensor<4x32xf32>
  %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
  %y = loom.matmul %e, %g : tensor<4x32xf32>, tensor<32x32xf32> -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}

// -----

// No split where nothing would hide the later members: only a view and a
// collective come between their readers and the first one's.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @no_split
// CHECK-NOT: loom.start
// CHECK: loom.combined
// CHECK-NEXT: loom.all_gather %arg0
// CHECK-NEXT: loom.all_gather %arg1
// CHECK-NOT: loom.start
func.func @no_split(%u: tensor<16x32xf32>, %v: tensor<16x32xf32>) -> (tensor<32x32xf32>, tensor<64x16xf32>) {
  %g:2 = loom.combined -> (tensor<32x32xf32>, tensor<32x32xf32>) {
    %0 = loom.all_gather %u on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %1 = loom.all_gather %v on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    loom.yield %0, %1 : tensor<32x32xf32>, tensor<32x32xf32>
  }
  %r = loom.all_reduce %g#0 on @m ["tp"] sum : tensor<32x32xf32>
  %s = loom.reshape %g#1 : tensor<32x32xf32> -> tensor<64x16xf32>
  return %r, %s : tensor<32x32xf32>, tensor<64x16xf32>
}

// -----

// FSDP: a layer's gather is read at once, so within the iteration nothing
// would hide it; started one iteration ahead, the layer's products hide
// the next layer's. Through a view (a reshape of the slice) too.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @prefetch_fsdp
// CHECK:      ^bb0(%[[X:.*]]: tensor<8x32xf32>, %[[W:.*]]: tensor<512xf32>):
// CHECK-NEXT:   %[[R:.*]] = loom.reshape %[[W]]
// CHECK-NEXT:   %[[F:.*]] = loom.start -> !loom.future<tensor<32x32xf32>> {
// CHECK-NEXT:     loom.all_gather %[[R]] on @m ["dp"] dim 0
// CHECK:        %[[G:.*]] = loom.wait %[[F]]
// CHECK-NEXT:   loom.prefetch %[[F]] : !loom.future<tensor<32x32xf32>>
// CHECK-NEXT:   %[[Y:.*]] = loom.matmul %[[X]], %[[G]]
// CHECK-NEXT:   loom.relu %[[Y]]
func.func @prefetch_fsdp(%a: tensor<8x32xf32>, %ws: tensor<4x512xf32>) -> tensor<8x32xf32> {
  %out = loom.repeat 4 carried(%a : tensor<8x32xf32>) stacked(%ws : tensor<4x512xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %w: tensor<512xf32>):
    %r = loom.reshape %w : tensor<512xf32> -> tensor<16x32xf32>
    %g = loom.all_gather %r on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %y = loom.matmul %x, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    %z = loom.relu %y : tensor<8x32xf32>
    loom.yield %z : tensor<8x32xf32>
  }
  return %out : tensor<8x32xf32>
}

// -----

// A prefetch goes right after its wait, so that the rest of the iteration
// hides it: it passes a blocking collective over other axes (the
// tensor-parallel all_reduce, on the compute stream and another
// communicator), but follows one over a shared axis (its communicator runs
// operations in order) and one started in the iteration (started
// collectives share one stream). A gather of the carried value (made by
// the iteration before), a loop of one iteration, and a gather whose
// prefetch would follow the iteration's last computation (after an
// all_reduce over dp) are not prefetched.
loom.mesh @m ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @prefetch_passes_other_axes
// CHECK:        %[[F:.*]] = loom.start
// CHECK-NEXT:     loom.all_gather %{{.*}} on @m ["dp"]
// CHECK:        %[[G:.*]] = loom.wait %[[F]]
// CHECK-NEXT:   loom.prefetch %[[F]]
// CHECK-NEXT:   %[[Y:.*]] = loom.matmul %{{.*}}, %[[G]]
// CHECK-NEXT:   %[[S:.*]] = loom.all_reduce %[[Y]] on @m ["tp"]
// CHECK-NEXT:   loom.add %[[S]]
// CHECK-LABEL: func.func @prefetch_after_shared_axis
// CHECK:        %[[F:.*]] = loom.start
// CHECK:        loom.wait %[[F]]
// CHECK-NEXT:   %[[Y:.*]] = loom.matmul
// CHECK-NEXT:   %[[S:.*]] = loom.all_reduce %[[Y]] on @m ["dp", "tp"]
// CHECK-NEXT:   loom.prefetch %[[F]]
// CHECK-NEXT:   loom.add %[[S]]
// CHECK-LABEL: func.func @prefetch_after_started
// CHECK:        %[[F:.*]] = loom.start
// CHECK-NEXT:     loom.all_gather %{{.*}} on @m ["dp"]
// CHECK:        loom.wait %[[F]]
// CHECK-NEXT:   %[[Y:.*]] = loom.matmul
// CHECK-NEXT:   %[[T:.*]] = loom.start
// CHECK-NEXT:     loom.all_reduce %[[Y]] on @m ["tp"]
// CHECK:        loom.prefetch %[[F]]
// CHECK-NEXT:   %[[R:.*]] = loom.relu
// CHECK-NEXT:   %[[S:.*]] = loom.wait %[[T]]
// CHECK-NEXT:   loom.add %[[S]], %[[R]]
// CHECK-LABEL: func.func @not_prefetched
// CHECK-NOT:    loom.prefetch
// CHECK:        loom.all_gather %{{.*}} on @m ["tp"]
// CHECK-NOT:    loom.prefetch
// CHECK:        return
func.func @prefetch_passes_other_axes(%a: tensor<8x32xf32>, %ws: tensor<4x16x32xf32>, %bias: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %out = loom.repeat 4 carried(%a : tensor<8x32xf32>) stacked(%ws : tensor<4x16x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>):
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %y = loom.matmul %x, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    %s = loom.all_reduce %y on @m ["tp"] sum : tensor<8x32xf32>
    %z = loom.add %s, %bias : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
    loom.yield %z : tensor<8x32xf32>
  }
  return %out : tensor<8x32xf32>
}
func.func @prefetch_after_shared_axis(%a: tensor<8x32xf32>, %ws: tensor<4x16x32xf32>, %bias: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %out = loom.repeat 4 carried(%a : tensor<8x32xf32>) stacked(%ws : tensor<4x16x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>):
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %y = loom.matmul %x, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    %s = loom.all_reduce %y on @m ["dp", "tp"] sum : tensor<8x32xf32>
    %z = loom.add %s, %bias : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
    loom.yield %z : tensor<8x32xf32>
  }
  return %out : tensor<8x32xf32>
}
func.func @prefetch_after_started(%a: tensor<8x32xf32>, %ws: tensor<4x16x32xf32>) -> tensor<8x32xf32> {
  %out = loom.repeat 4 carried(%a : tensor<8x32xf32>) stacked(%ws : tensor<4x16x32xf32>) -> tensor<8x32xf32> {
  ^bb0(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>):
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<16x32xf32> -> tensor<32x32xf32>
    %y = loom.matmul %x, %g : tensor<8x32xf32>, tensor<32x32xf32> -> tensor<8x32xf32>
    %s = loom.all_reduce %y on @m ["tp"] sum : tensor<8x32xf32>
    %r = loom.relu %x : tensor<8x32xf32>
    %z = loom.add %s, %r : tensor<8x32xf32>, tensor<8x32xf32> -> tensor<8x32xf32>
    loom.yield %z : tensor<8x32xf32>
  }
  return %out : tensor<8x32xf32>
}
func.func @not_prefetched(%a: tensor<8x16xf32>, %ws: tensor<1x8x16xf32>, %ws4: tensor<4x8x16xf32>) -> tensor<8x16xf32> {
  %c = loom.repeat 4 carried(%a : tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%x: tensor<8x16xf32>):
    %g = loom.all_gather %x on @m ["tp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
    %y = loom.relu %g : tensor<16x16xf32>
    %h = loom.slice %y [0, 0] to [8, 16] : tensor<16x16xf32> -> tensor<8x16xf32>
    loom.yield %h : tensor<8x16xf32>
  }
  %once = loom.repeat 1 carried(%c : tensor<8x16xf32>) stacked(%ws : tensor<1x8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%x: tensor<8x16xf32>, %w: tensor<8x16xf32>):
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
    %y = loom.matmul %x, %g : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    %z = loom.relu %y : tensor<8x16xf32>
    loom.yield %z : tensor<8x16xf32>
  }
  %last = loom.repeat 4 carried(%once : tensor<8x16xf32>) stacked(%ws4 : tensor<4x8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%x: tensor<8x16xf32>, %w: tensor<8x16xf32>):
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
    %y = loom.matmul %x, %g : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    %s = loom.all_reduce %y on @m ["dp"] sum : tensor<8x16xf32>
    loom.yield %s : tensor<8x16xf32>
  }
  return %last : tensor<8x16xf32>
}
