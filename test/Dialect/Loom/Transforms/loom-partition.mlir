// RUN: loom-opt %s --split-input-file --loom-partition --verify-diagnostics | FileCheck %s

// Per-device types, and a partial value kept partial through a sum before
// its one all_reduce (with why it exists).
loom.mesh @m ["tp" = 2]
func.func @sum_of_partials(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>},
                           %w: tensor<8x6xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>})
    -> (tensor<4x6xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>}) attributes {loom.model} {
  %p = loom.matmul %x, %w {loom.sharding = [#loom.sharding<@m, [{}, {}]>]} : tensor<4x8xf32>, tensor<8x6xf32> -> tensor<4x6xf32>
  %q = loom.add %p, %p {loom.sharding = [#loom.sharding<@m, [{}, {}]>]} : tensor<4x6xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
  return %q : tensor<4x6xf32>
}
// CHECK-LABEL: func.func @sum_of_partials
// CHECK-SAME: (%[[X:.*]]: tensor<4x4xf32> {{.*}}, %[[W:.*]]: tensor<4x6xf32> {{.*}}) -> (tensor<4x6xf32> {{.*}}) attributes {loom.model, loom.spmd}
// CHECK-NEXT: %[[P:.*]] = loom.matmul %[[X]], %[[W]] : tensor<4x4xf32>, tensor<4x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: %[[Q:.*]] = loom.add %[[P]], %[[P]]
// CHECK-NEXT: %[[R:.*]] = loom.all_reduce %[[Q]] on @m ["tp"] sum {loom.reason = {consumer = "func.return at loom-partition.mlir:11:3", from = #loom.sharding<@m, [{}, {}], partial = sum("tp")>, producer = "loom.add at loom-partition.mlir:10:8", to = #loom.sharding<@m, [{}, {}]>, value = "the result of loom.add"}} : tensor<4x6xf32>
// CHECK-NEXT: return %[[R]]

// -----

// The layer dimension of a stacked operand is only ever split by the
// pipeline's manual axis.
loom.mesh @m ["dp" = 2]
func.func @stacked(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>},
                   %w: tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}, {}]>}) -> tensor<8xf32> attributes {loom.model} {
  // expected-error @below {{the layer dimension of stacked operand argument 1 is split over 'dp'; only the pipeline schedule's manual axis may split it}}
  %r = loom.repeat 4 carried(%x : tensor<8xf32>) stacked(%w : tensor<4x8xf32>) -> tensor<8xf32> attributes {loom.body_shardings = [#loom.sharding<@m, [{}]>, #loom.sharding<@m, [{}]>]} {
  ^bb0(%c: tensor<8xf32>, %s: tensor<8xf32>):
    %a = loom.add %c, %s : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    loom.yield %a : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// No collective ever runs over a manual axis.
loom.mesh @m ["pp" = 2, "dp" = 2] manual ["pp"]
func.func @manual(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{"pp"}]>})
    -> (tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>}) attributes {loom.model} {
  // expected-error @below {{moving argument 0 from [{"pp"}] to [{}] needs a collective over the manual axis 'pp', which only the pipeline schedule may use}}
  return %x : tensor<8xf32>
}

// -----

// A target layout over a manual axis is refused before anything moves.
loom.mesh @m ["pp" = 2, "dp" = 2] manual ["pp"]
func.func @to_manual(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>})
    -> (tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{"pp"}]>}) attributes {loom.model} {
  // expected-error @below {{cannot move argument 0 to a layout split over the manual axis 'pp'; only the pipeline schedule uses it}}
  return %x : tensor<8xf32>
}

// -----

// Partitioning needs propagation's shardings of repeat bodies.
loom.mesh @m ["dp" = 2]
func.func @unpropagated(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  // expected-error @below {{loom.repeat has no body shardings; run loom-propagate-shardings first}}
  %r = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%c: tensor<8xf32>):
    loom.yield %c : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// A constraint whose result propagation never saw (no recorded sharding)
// is an error; it dereferenced a null sharding.
loom.mesh @m ["dp" = 2]
func.func @shard_not_propagated(%x: tensor<4xf32>) -> tensor<4xf32> attributes {loom.model} {
  // expected-error @below {{the result of loom.shard has no sharding; run loom-propagate-shardings first}}
  %0 = loom.shard %x as <@m, [{"dp"}]> : tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// Collectives are per-device ops: a global model cannot hold one.
loom.mesh @m ["dp" = 2]
func.func @collective_in_global(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  // expected-error @below {{the partitioner does not know how to split this op}}
  %r = loom.all_reduce %x on @m ["dp"] sum : tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// One mesh per module.
loom.mesh @m ["dp" = 2]
loom.mesh @n ["tp" = 2]
// expected-error @below {{partitioning needs exactly one loom.mesh in the module, found 2}}
func.func @two_meshes(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
}

// -----

// Functions that are not models, or already partitioned, are left alone.
loom.mesh @m ["dp" = 2]
// CHECK-LABEL: func.func @helper(%{{.*}}: tensor<8xf32>) -> tensor<8xf32> {
func.func @helper(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
// CHECK-LABEL: func.func @done(%{{.*}}: tensor<4xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}]>}) -> tensor<4xf32> attributes {loom.model, loom.spmd}
func.func @done(%x: tensor<4xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}]>}) -> tensor<4xf32> attributes {loom.model, loom.spmd} {
  return %x : tensor<4xf32>
}

// -----

// Two axes of one size trading dimensions: device (x, y) takes the block
// of device (y, x), one collective_permute (each rank receives 24 floats;
// three all_to_alls received 12 + 18 + 12); with search-budget=0 both
// dimensions are gathered and sliced (24 + 48 floats).
loom.mesh @m ["a" = 2, "b" = 2]
func.func @swap(%x: tensor<8x12xf32> {loom.sharding = #loom.sharding<@m, [{"a"}, {"b"}]>})
    -> (tensor<8x12xf32> {loom.sharding = #loom.sharding<@m, [{"b"}, {"a"}]>}) attributes {loom.model} {
  return %x : tensor<8x12xf32>
}
// CHECK-LABEL: func.func @swap
// CHECK-NEXT: %[[P:.*]] = loom.collective_permute %{{.*}} on @m ["a", "b"] pairs [0, 0, 2, 1, 1, 2, 3, 3] {{.*}} : tensor<4x6xf32>
// CHECK-NEXT: return %[[P]] :
// GATHER-LABEL: func.func @swap
// GATHER-NEXT: loom.all_gather %{{.*}} on @m ["b"] dim 1
// GATHER-NEXT: loom.all_gather %{{.*}} on @m ["a"] dim 0
// GATHER-NEXT: loom.all_slice %{{.*}} on @m ["b"] dim 0
// GATHER-NEXT: loom.all_slice %{{.*}} on @m ["a"] dim 1
// GATHER-NEXT: return %

// -----

// A norm whose input arrives split along its normalised dimension
// all-reduces its rows' statistics, in f32, and computes its formula on the
// pieces; the scale is sliced alike. Nothing is gathered.
loom.mesh @m ["tp" = 2]
func.func @norm_split_rows(%x: tensor<4x8xbf16> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>},
                           %g: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>})
    -> (tensor<4x8xbf16> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>}) attributes {loom.model} {
  %y = loom.rmsnorm %x, %g eps = 1.0e-06 {loom.sharding = [#loom.sharding<@m, [{}, {"tp"}]>]} : tensor<4x8xbf16>, tensor<8xf32> -> tensor<4x8xbf16>
  return %y : tensor<4x8xbf16>
}
// CHECK-LABEL: func.func @norm_split_rows
// CHECK-NOT: all_gather
// CHECK: %[[G:.*]] = loom.all_slice %{{.*}} on @m ["tp"] dim 0 {{.*}} : tensor<8xf32> -> tensor<4xf32>
// CHECK: %[[XF:.*]] = loom.cast %{{.*}} : tensor<4x4xbf16> -> tensor<4x4xf32>
// CHECK: %[[SQ:.*]] = loom.mul %[[XF]], %[[XF]]
// CHECK: %[[S:.*]] = loom.sum %[[SQ]] dims = [1] keepdim : tensor<4x4xf32> -> tensor<4x1xf32>
// CHECK: %[[R:.*]] = loom.all_reduce %[[S]] on @m ["tp"] sum {{.*}}value = "the RMS norm's row sums of squares"{{.*}} : tensor<4x1xf32>
// CHECK: %[[MS:.*]] = loom.mul %[[R]], %{{.*}} : tensor<4x1xf32>, tensor<f32>
// CHECK: %[[V:.*]] = loom.add %[[MS]], %{{.*}} : tensor<4x1xf32>, tensor<f32>
// CHECK: %[[D:.*]] = loom.sqrt %[[V]]
// CHECK: %[[N:.*]] = loom.div %[[XF]], %[[D]]
// CHECK: %[[Y:.*]] = loom.mul %[[N]], %[[G]] : tensor<4x4xf32>, tensor<4xf32>
// CHECK: %[[C:.*]] = loom.cast %[[Y]] : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NOT: all_gather
// CHECK: return %[[C]]

// -----

// A whole input is normalised whole, even where its result and its scale
// are split: the scale (split for storage) is gathered and the result
// sliced for free, where splitting the rows would all-reduce statistics.
loom.mesh @m ["tp" = 2]
func.func @norm_whole_input(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>},
                            %g: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}]>},
                            %b: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}]>})
    -> (tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>}) attributes {loom.model} {
  %y = loom.layernorm %x, %g, %b eps = 1.0e-05 {loom.sharding = [#loom.sharding<@m, [{}, {"tp"}]>]} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @norm_whole_input
// CHECK-NOT: all_reduce
// CHECK: loom.all_gather %{{.*}} on @m ["tp"] dim 0 {{.*}} : tensor<4xf32> -> tensor<8xf32>
// CHECK: loom.all_gather %{{.*}} on @m ["tp"] dim 0 {{.*}} : tensor<4xf32> -> tensor<8xf32>
// CHECK: %[[Y:.*]] = loom.layernorm %{{.*}} : tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK: %[[S:.*]] = loom.all_slice %[[Y]] on @m ["tp"] dim 1
// CHECK: return %[[S]]

// -----

// An input split along its rows but a result wanted whole: the rows are
// gathered once and normalised whole, not normalised in pieces (statistics
// all-reduced) and then gathered as well.
loom.mesh @m ["tp" = 2]
func.func @norm_result_wanted_whole(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>},
                                    %g: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>})
    -> (tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>}) attributes {loom.model} {
  %y = loom.rmsnorm %x, %g eps = 1.0e-06 {loom.sharding = [#loom.sharding<@m, [{}, {}]>]} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @norm_result_wanted_whole
// CHECK-NOT: all_reduce
// CHECK: %[[X:.*]] = loom.all_gather %{{.*}} on @m ["tp"] dim 1 {{.*}} : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-NOT: all_reduce
// CHECK: %[[Y:.*]] = loom.rmsnorm %[[X]], %{{.*}} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]]

// -----

// Rows of one element a device: two all-reduces of a float a row would send
// more than gathering the rows, so they are gathered.
loom.mesh @m ["tp" = 2]
func.func @softmax_short_rows(%x: tensor<4x2xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>})
    -> (tensor<4x2xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>}) attributes {loom.model} {
  %p = loom.softmax %x dim = 1 {loom.sharding = [#loom.sharding<@m, [{}, {"tp"}]>]} : tensor<4x2xf32>
  return %p : tensor<4x2xf32>
}
// CHECK-LABEL: func.func @softmax_short_rows
// CHECK-NOT: all_reduce
// CHECK: %[[X:.*]] = loom.all_gather %{{.*}} on @m ["tp"] dim 1 {{.*}} : tensor<4x1xf32> -> tensor<4x2xf32>
// CHECK: %[[P:.*]] = loom.softmax %[[X]] dim = 1 : tensor<4x2xf32>
// CHECK: %[[S:.*]] = loom.all_slice %[[P]] on @m ["tp"] dim 1
// CHECK: return %[[S]]

// -----

// An input that is a slice of a whole value along its rows is normalised
// whole: the gather back folds into the slice (canonicalisation, after
// this pass), and only the result is sliced.
loom.mesh @m ["tp" = 2]
func.func @norm_input_sliced(%x: tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {}]>},
                             %g: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>})
    -> (tensor<4x8xf32> {loom.sharding = #loom.sharding<@m, [{}, {"tp"}]>}) attributes {loom.model} {
  %s = loom.shard %x as <@m, [{}, {"tp"}]> {loom.sharding = [#loom.sharding<@m, [{}, {"tp"}]>]} : tensor<4x8xf32>
  %y = loom.rmsnorm %s, %g eps = 1.0e-06 {loom.sharding = [#loom.sharding<@m, [{}, {"tp"}]>]} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @norm_input_sliced
// CHECK-NOT: all_reduce
// CHECK: %[[S:.*]] = loom.all_slice %arg0 on @m ["tp"] dim 1
// CHECK-NEXT: %[[X:.*]] = loom.all_gather %[[S]] on @m ["tp"] dim 1
// CHECK-NEXT: %[[Y:.*]] = loom.rmsnorm %[[X]], %arg1 {{.*}} : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: loom.all_slice %[[Y]] on @m ["tp"] dim 1
// CHECK-NOT: all_reduce
// CHECK: return

// -----

// A softmax over a split dimension: the rows' maxima all-reduced by max,
// then their sums of exp by sum.
loom.mesh @m ["tp" = 2]
func.func @softmax_split_rows(%x: tensor<8x4xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>})
    -> (tensor<8x4xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}, {}]>}) attributes {loom.model} {
  %p = loom.softmax %x dim = 0 {loom.sharding = [#loom.sharding<@m, [{"tp"}, {}]>]} : tensor<8x4xf32>
  return %p : tensor<8x4xf32>
}
// CHECK-LABEL: func.func @softmax_split_rows
// CHECK: %[[M:.*]] = loom.max %[[X:.*]] dims = [0] keepdim : tensor<4x4xf32> -> tensor<1x4xf32>
// CHECK: %[[MR:.*]] = loom.all_reduce %[[M]] on @m ["tp"] max
// CHECK: %[[D:.*]] = loom.sub %[[X]], %[[MR]] : tensor<4x4xf32>, tensor<1x4xf32>
// CHECK: %[[E:.*]] = loom.exp %[[D]]
// CHECK: %[[S:.*]] = loom.sum %[[E]] dims = [0] keepdim
// CHECK: %[[SR:.*]] = loom.all_reduce %[[S]] on @m ["tp"] sum
// CHECK: %[[P:.*]] = loom.div %[[E]], %[[SR]]
// CHECK: return %[[P]]

// -----

loom.mesh @m ["a" = 2]
// BUDGET: loom-partition.mlir:{{[0-9]+}}:{{[0-9]+}}: error: --loom-partition: search-budget must be 0 or more, not -1
func.func @any(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{"a"}]>})
    -> (tensor<8xf32> {loom.sharding = #loom.sharding<@m, [{}]>}) attributes {loom.model} {
  return %x : tensor<8xf32>
}

// (RUN lines here keep the locations that the checks above name.)
// RUN: loom-opt %s --split-input-file --loom-partition=search-budget=0 --verify-diagnostics | FileCheck %s --check-prefix=GATHER
// RUN: not loom-opt %s --split-input-file --loom-partition=search-budget=-1 2>&1 | FileCheck %s --check-prefix=BUDGET
