// RUN: loom-opt %s --loom-propagate-shardings 2>&1 | FileCheck %s
// RUN: loom-opt %s --loom-propagate-shardings 2>&1 | FileCheck %s --check-prefix=ONCE

// Priorities decide: the p0 annotation (dp) wins over the p1 one (tp) on
// the add, and the loser is resharded explicitly with a remark naming both.
// Open function arguments take the sharding they meet; closed dimensions
// are never changed.

loom.mesh @m ["dp" = 2, "tp" = 2, "pp" = 2] manual ["pp"]

// An operand moves at most once for its op. %g moves to %o's (tp, dp);
// then the result's own (dp, tp) moves %o. Moving %g again (it is cheaper
// than %o) would start a swing between the two sides; instead the reshard
// of %g stays, and the partitioner moves it to the op's layout.
func.func @T(%o: tensor<16x16xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp", "dp"}]>},
             %g: tensor<16xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}]>}) -> tensor<16x16xf32> attributes {loom.model} {
  %p = loom.mul %o, %g {loom.sharding = [#loom.sharding<@m, [{}, {"dp", "tp"}]>]} : tensor<16x16xf32>, tensor<16xf32> -> tensor<16x16xf32>
  return %p : tensor<16x16xf32>
}
// ONCE: loom-propagate-shardings.mlir:[[@LINE-3]]:8: remark: reshard of argument 1 for loom.mul: its dimension 0 is {"dp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-4]]:14 but {"tp", "dp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-5]]:14; moving argument 1 (16 elements): it costs fewer bytes
// ONCE: loom-propagate-shardings.mlir:[[@LINE-4]]:8: remark: reshard of argument 0 for loom.mul: its dimension 1 is {"tp", "dp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-6]]:14 but {"dp", "tp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-4]]:8; moving argument 0 (256 elements): the other is the op's result
// ONCE-NOT: for loom.mul
// ONCE-LABEL: func.func @T
// ONCE: %[[G:.*]] = loom.shard %arg1 as <@m, [{"tp", "dp"}]>
// ONCE: %[[O:.*]] = loom.shard %arg0 as <@m, [{}, {"dp", "tp"}]>
// ONCE-NEXT: loom.mul %[[O]], %[[G]] {loom.sharding = [#loom.sharding<@m, [{}, {"dp", "tp"}]>]}

func.func @P(%a: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{?}, {?}]>},
             %b: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{?}, {?}]>}) -> tensor<8x16xf32> attributes {loom.model} {
  %x = loom.shard %a as <@m, [{"tp"}p1, {?}]> : tensor<8x16xf32>
  %y = loom.shard %b as <@m, [{"dp"}p0, {?}]> : tensor<8x16xf32>
  %z = loom.add %x, %y : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  %w = loom.exp %z : tensor<8x16xf32>
  return %w : tensor<8x16xf32>
}

// CHECK: loom-propagate-shardings.mlir:[[@LINE-5]]:8: remark: reshard of the result of loom.shard for loom.add: its dimension 0 is {"tp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-7]]:8 but {"dp"} by the annotation at loom-propagate-shardings.mlir:[[@LINE-6]]:8
// CHECK-NOT: remark
// CHECK-LABEL: func.func @P
// CHECK-SAME: loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>
// CHECK-SAME: loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>
// CHECK: %[[R:.*]] = loom.shard %{{.*}} as <@m, [{"dp"}, {}]> {loom.reason = {conflict = "loom-propagate-shardings.mlir:[[@LINE-11]]:8 vs loom-propagate-shardings.mlir:[[@LINE-12]]:8"}
// CHECK: loom.add %[[R]], %{{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}]>]}
// CHECK: loom.exp %{{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}]>]}

// Backward and forward through a matmul: the row-parallel weight's
// contracted dimension reaches the open activation; the batch comes from
// the constraint; a closed replicated dimension stays replicated.
func.func @Q(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{?}, {?}]>},
             %w: tensor<16x4xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>}) -> tensor<8x4xf32> attributes {loom.model} {
  %y = loom.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %z = loom.shard %y as <@m, [{"dp"}, {}]> : tensor<8x4xf32>
  return %z : tensor<8x4xf32>
}
// CHECK-LABEL: func.func @Q
// CHECK-SAME: %{{.*}}: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {"tp"}]>}
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}]>]}

// Through repeat: the carried value, the body argument, the yield and the
// result share one sharding; a stacked operand's slice keeps the stack's
// sharding without the layer dimension, which may only be on a manual axis.
func.func @R(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>},
             %w: tensor<4x16x16xf32> {loom.sharding = #loom.sharding<@m, [{"pp"}, {}, {"tp"}]>}) -> tensor<8x16xf32> attributes {loom.model} {
  %r = loom.repeat 4 carried(%x : tensor<8x16xf32>) stacked(%w : tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%c: tensor<8x16xf32>, %s: tensor<16x16xf32>):
    %m = loom.matmul %c, %s : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    loom.yield %m : tensor<8x16xf32>
  }
  return %r : tensor<8x16xf32>
}
// CHECK-LABEL: func.func @R
// CHECK-NOT: "pp"}]>]
// CHECK: loom.repeat 4
// The product takes the weight's column split, and so does the loop: the
// replicated, closed initial value uses tp nowhere else, so it enters the
// loop by a local slice rather than being gathered at every yield.
// CHECK-SAME: loom.body_shardings = [#loom.sharding<@m, [{"dp"}, {"tp"}]>, #loom.sharding<@m, [{}, {"tp"}]>]
// CHECK-SAME: loom.sharding = [#loom.sharding<@m, [{"dp"}, {"tp"}]>]
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {"tp"}]>]}

// Sequence parallelism in a repeat: the carried activation is split over tp
// along the sequence, and each layer's slice of the column-parallel stack
// holds tp from the start (the stack's closed axes), so the product weighs
// both (2.3) and the weight, the heavier per device, keeps tp: the activation
// is gathered, not every layer's weight. (Tying the slice only after the
// body's ops, the product gave tp to the sequence before it saw the weight's.)
func.func @SequenceParallelRepeat(%x: tensor<4x16x8xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {"tp"}, {}]>},
             %w: tensor<3x8x128xf32> {loom.sharding = #loom.sharding<@m, [{}, {}, {"tp"}]>}) -> tensor<3x4x16x128xf32> attributes {loom.model} {
  %r:2 = loom.repeat 3 carried(%x : tensor<4x16x8xf32>) stacked(%w : tensor<3x8x128xf32>) -> tensor<4x16x8xf32>, tensor<3x4x16x128xf32> {
  ^bb0(%c: tensor<4x16x8xf32>, %s: tensor<8x128xf32>):
    %c2 = loom.shard %c as <@m, [{"dp"}, {"tp"}, {}]> : tensor<4x16x8xf32>
    %h = loom.matmul %c2, %s : tensor<4x16x8xf32>, tensor<8x128xf32> -> tensor<4x16x128xf32>
    loom.yield %c2, %h : tensor<4x16x8xf32>, tensor<4x16x128xf32>
  }
  return %r#1 : tensor<3x4x16x128xf32>
}
// CHECK-LABEL: func.func @SequenceParallelRepeat
// CHECK: loom.repeat 3
// CHECK-SAME: loom.body_shardings = [#loom.sharding<@m, [{"dp"}, {"tp"}, {}]>, #loom.sharding<@m, [{}, {"tp"}]>]
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}, {"tp"}]>]}

// A weight split over dp for storage (ZeRO-3, FSDP) meets an activation
// whose batch dp splits: the contracted factor and the batch contend for dp
// (2.3). The weight is the heavier holder (4 KiB against 1 KiB a device),
// but the contracted factor keeping dp would also move the activation and
// leave the product partial over dp, an 8 KiB result to reduce: the batch
// keeps dp and the weight is gathered.
func.func @StorageSplitWeight(%x: tensor<32x16xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>},
             %w: tensor<16x64xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>}) -> tensor<32x64xf32> attributes {loom.model} {
  %h = loom.relu %x : tensor<32x16xf32>
  %y = loom.matmul %h, %w : tensor<32x16xf32>, tensor<16x64xf32> -> tensor<32x64xf32>
  return %y : tensor<32x64xf32>
}
// CHECK-LABEL: func.func @StorageSplitWeight
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}]>]}

// A replicated, closed operand meeting a split one is no conflict: it keeps
// its piece by a local slice, so no reshard and no remark.
func.func @S(%x: tensor<8x64xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>},
             %w: tensor<64x16xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>}) -> tensor<8x16xf32> attributes {loom.model} {
  %y = loom.matmul %x, %w : tensor<8x64xf32>, tensor<64x16xf32> -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
// CHECK-LABEL: func.func @S
// CHECK-NOT: loom.shard %
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{}, {}]>]}


// Axes do not flow through a softmax's reduced dimension: the partitioner
// computes it whole along that dimension, so a consumer's split there (an
// expert-split gate, tp) would only make the logits split and then
// gathered back. The logits keep dp alone; the gate's split is a local
// slice of the softmax's result.
func.func @SoftmaxReducedDim(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>},
             %w: tensor<16x4xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>},
             %e: tensor<8x4xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {"tp"}]>}) -> tensor<8x4xf32> attributes {loom.model} {
  %l = loom.matmul %x, %w : tensor<8x16xf32>, tensor<16x4xf32> -> tensor<8x4xf32>
  %g = loom.softmax %l dim = 1 : tensor<8x4xf32>
  %y = loom.mul %g, %e : tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
// CHECK-LABEL: func.func @SoftmaxReducedDim
// CHECK: loom.matmul {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {}]>]}
// CHECK: loom.softmax {{.*}} {loom.sharding = [#loom.sharding<@m, [{"dp"}, {"tp"}]>]}
