// RUN: loom-opt %s --split-input-file --loom-combine-collectives | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-combine-collectives="max-bytes=0" | FileCheck %s --check-prefix=NONE
// RUN: loom-opt %s --split-input-file --loom-combine-collectives="max-bytes=200" | FileCheck %s --check-prefix=SMALL

// NONE-NOT: loom.combined

loom.mesh @m ["dp" = 2, "tp" = 4]

// Two gathers of weights (FSDP) over one axis, along different dimensions:
// one loom.combined just before the first reader of either, members in
// program order; its results replace theirs.
// CHECK-LABEL: func.func @weights
// CHECK-NEXT:  %[[R:.*]] = loom.relu %arg0
// CHECK-NEXT:  %[[C:.*]]:2 = loom.combined -> (tensor<8x16xbf16>, tensor<16x4xbf16>) {
// CHECK-NEXT:    %[[A:.*]] = loom.all_gather %arg1 on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT:    %[[B:.*]] = loom.all_gather %arg2 on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
// CHECK-NEXT:    loom.yield %[[A]], %[[B]] : tensor<8x16xbf16>, tensor<16x4xbf16>
// CHECK-NEXT:  }
// CHECK-NEXT:  %[[X:.*]] = loom.matmul %[[R]], %[[C]]#0
// CHECK-NEXT:  loom.matmul %[[X]], %[[C]]#1
// SMALL-LABEL: func.func @weights
// SMALL-NOT:   loom.combined
func.func @weights(%x: tensor<4x8xbf16>, %w1: tensor<4x16xbf16>, %w2: tensor<16x2xbf16>) -> tensor<4x4xbf16> {
  %r = loom.relu %x : tensor<4x8xbf16>
  %g1 = loom.all_gather %w1 on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
  %h = loom.matmul %r, %g1 : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  %g2 = loom.all_gather %w2 on @m ["dp"] dim 1 : tensor<16x2xbf16> -> tensor<16x4xbf16>
  %y = loom.matmul %h, %g2 : tensor<4x16xbf16>, tensor<16x4xbf16> -> tensor<4x4xbf16>
  return %y : tensor<4x4xbf16>
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

// A sum whose operand is made after the first sum's place, but before
// either result is read: the group goes after that operand, before the
// first reader. Under 200 bytes, so SMALL combines it too.
// CHECK-LABEL: func.func @sums
// CHECK:       %[[E:.*]] = loom.exp %arg1
// CHECK-NEXT:  %[[C:.*]]:2 = loom.combined -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    loom.all_reduce %arg0 on @m ["tp"] sum : tensor<4xf32>
// CHECK-NEXT:    loom.all_reduce %[[E]] on @m ["tp"] sum : tensor<4xf32>
// CHECK-NEXT:    loom.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  loom.sub %[[C]]#0, %[[C]]#1
// SMALL-LABEL: func.func @sums
// SMALL:       loom.combined
func.func @sums(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %s = loom.all_reduce %a on @m ["tp"] sum : tensor<4xf32>
  %e = loom.exp %b : tensor<4xf32>
  %t = loom.all_reduce %e on @m ["tp"] sum : tensor<4xf32>
  %d = loom.sub %s, %t : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

// Nothing to combine: another axis, another reduction, another element
// type, another kind; a sum whose operand reads the first sum's result;
// an all_reduce that feeds an all_gather.
// CHECK-LABEL: func.func @apart
// CHECK-NOT:   loom.combined
// CHECK:       return
func.func @apart(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xbf16>, %d: tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>) {
  %0 = loom.all_reduce %a on @m ["tp"] sum : tensor<4xf32>
  %1 = loom.all_reduce %b on @m ["dp"] sum : tensor<4xf32>
  %2 = loom.all_reduce %b on @m ["tp"] max : tensor<4xf32>
  %3 = loom.all_reduce %c on @m ["tp"] sum : tensor<4xbf16>
  %4 = loom.all_gather %d on @m ["tp"] dim 0 : tensor<2xf32> -> tensor<8xf32>
  %e = loom.exp %0 : tensor<4xf32>
  %5 = loom.all_reduce %e on @m ["tp"] sum : tensor<4xf32>
  %6 = loom.all_reduce %d on @m ["dp"] sum : tensor<2xf32>
  %7 = loom.all_gather %6 on @m ["tp"] dim 0 : tensor<2xf32> -> tensor<8xf32>
  return %0, %1, %2, %3, %4, %5, %7 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xbf16>, tensor<8xf32>, tensor<4xf32>, tensor<8xf32>
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

// Inside a repeat, each iteration's three reduce_scatters of its partial
// sums are one, and so are the two gathers of what is made of them.
// CHECK-LABEL: func.func @in_repeat
// CHECK:       loom.repeat 2
// CHECK:         %[[S:.*]]:3 = loom.combined -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<4x2xf32>) {
// CHECK-NEXT:      loom.reduce_scatter {{.*}} dim 0 sum
// CHECK-NEXT:      loom.reduce_scatter {{.*}} dim 0 sum
// CHECK-NEXT:      loom.reduce_scatter {{.*}} dim 1 sum
// CHECK-NEXT:      loom.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[A:.*]] = loom.add %[[S]]#0, %[[S]]#1
// CHECK-NEXT:    %[[N:.*]] = loom.neg %[[S]]#2
// CHECK-NEXT:    %[[G:.*]]:2 = loom.combined -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK-NEXT:      loom.all_gather %[[A]] on @m ["tp"] dim 0
// CHECK-NEXT:      loom.all_gather %[[N]] on @m ["tp"] dim 1
// CHECK-NEXT:      loom.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    loom.add %[[G]]#0, %[[G]]#1
func.func @in_repeat(%x: tensor<4x8xf32>, %w: tensor<2x8x8xf32>) -> tensor<1x8xf32> {
  %r = loom.repeat 2 carried(%x : tensor<4x8xf32>) stacked(%w : tensor<2x8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%h: tensor<4x8xf32>, %wi: tensor<8x8xf32>):
    %p = loom.matmul %h, %wi : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %q = loom.relu %h : tensor<4x8xf32>
    %s1 = loom.reduce_scatter %p on @m ["tp"] dim 0 sum : tensor<4x8xf32> -> tensor<1x8xf32>
    %s2 = loom.reduce_scatter %q on @m ["tp"] dim 0 sum : tensor<4x8xf32> -> tensor<1x8xf32>
    %s3 = loom.reduce_scatter %p on @m ["tp"] dim 1 sum : tensor<4x8xf32> -> tensor<4x2xf32>
    %a = loom.add %s1, %s2 : tensor<1x8xf32>, tensor<1x8xf32> -> tensor<1x8xf32>
    %g = loom.all_gather %a on @m ["tp"] dim 0 : tensor<1x8xf32> -> tensor<4x8xf32>
    %n = loom.neg %s3 : tensor<4x2xf32>
    %b = loom.all_gather %n on @m ["tp"] dim 1 : tensor<4x2xf32> -> tensor<4x8xf32>
    %y = loom.add %g, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    loom.yield %y : tensor<4x8xf32>
  }
  %o = loom.all_slice %r on @m ["tp"] dim 0 : tensor<4x8xf32> -> tensor<1x8xf32>
  return %o : tensor<1x8xf32>
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

// Gathers of different element types (an f32 gain, a bf16 weight) move
// bits and share a collective; sums of different types do not (@apart).
// CHECK-LABEL: func.func @mixed_types
// CHECK:       loom.combined -> (tensor<8xf32>, tensor<8x16xbf16>)
func.func @mixed_types(%x: tensor<4x8xbf16>, %g: tensor<4xf32>, %w: tensor<4x16xbf16>) -> tensor<4x16xbf16> {
  %gg = loom.all_gather %g on @m ["dp"] dim 0 : tensor<4xf32> -> tensor<8xf32>
  %n = loom.rmsnorm %x, %gg eps = 1.0e-06 : tensor<4x8xbf16>, tensor<8xf32> -> tensor<4x8xbf16>
  %wg = loom.all_gather %w on @m ["dp"] dim 0 : tensor<4x16xbf16> -> tensor<8x16xbf16>
  %y = loom.matmul %n, %wg : tensor<4x8xbf16>, tensor<8x16xbf16> -> tensor<4x16xbf16>
  return %y : tensor<4x16xbf16>
}
