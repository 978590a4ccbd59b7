// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s

// Round trip of #loom.sharding, #loom.init and the loom.* attributes on
// functions, their arguments and results, and op results.

loom.mesh @mesh ["dp" = 2, "tp" = 4]

// Closed (replicated) and open dimensions.
// CHECK-LABEL: func.func @closed_and_open(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{}, {?}]>
func.func @closed_and_open(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{}, {?}]>}) {
  return
}

// An open dimension that already has an axis, and a rank-0 value.
// CHECK-LABEL: func.func @open_with_axis(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"dp", ?}, {}]>
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, []>
func.func @open_with_axis(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp", ?}, {}]>},
                          %s: tensor<f32> {loom.sharding = #loom.sharding<@mesh, []>}) {
  return
}

// Two axes on one dimension, major to minor; the order is kept.
// CHECK-LABEL: func.func @multi_axis(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"tp", "dp"}, {}]>
func.func @multi_axis(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"tp", "dp"}, {}]>}) {
  return
}

// Priorities on closed, open and open-with-axis dimensions.
// CHECK-LABEL: func.func @priority(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"dp"}p1, {?}p0, {"tp", ?}p12]>
func.func @priority(%x: tensor<8x16x4xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}p1, {?}p0, {"tp", ?}p12]>}) {
  return
}

// CHECK-LABEL: func.func @partial(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"dp"}, {}], partial = sum("tp")>
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{}, {}], partial = max("dp", "tp")>
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{?}, {}], partial = min("tp")>
func.func @partial(%a: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {}], partial = sum("tp")>},
                   %b: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{}, {}], partial = max("dp", "tp")>},
                   %c: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{?}, {}], partial = min("tp")>}) {
  return
}

// Floats print in their shortest form; integers would not parse (see
// invalid.mlir).
// CHECK-LABEL: func.func @init(
// CHECK-SAME:      loom.init = #loom.init<normal(0.0, 0.02)>
// CHECK-SAME:      loom.init = #loom.init<uniform(-0.5, 0.0015)>
// CHECK-SAME:      loom.init = #loom.init<zeros>
// CHECK-SAME:      loom.init = #loom.init<ones>
// CHECK-SAME:      loom.init = #loom.init<normal(-1.0, 2.5)>
func.func @init(%a: tensor<4xf32> {loom.init = #loom.init<normal(0.0, 0.02)>},
                %b: tensor<4xf32> {loom.init = #loom.init<uniform(-0.5, 1.5e-3)>},
                %c: tensor<4xf32> {loom.init = #loom.init<zeros>},
                %d: tensor<4xf32> {loom.init = #loom.init<ones>},
                %e: tensor<4xf32> {loom.init = #loom.init<normal(-1.0, 2.5)>}) {
  return
}

// Numbers whose shortest form has an exponent keep a '.' in the mantissa,
// which MLIR's float syntax needs to parse them back.
// CHECK-LABEL: func.func @init_exponent(
// CHECK-SAME:      loom.init = #loom.init<normal(0.0, 1.0e-20)>
// CHECK-SAME:      loom.init = #loom.init<uniform(-1.0e+30, 2.5e+07)>
func.func @init_exponent(%a: tensor<4xf32> {loom.init = #loom.init<normal(0.0, 1.0e-20)>},
                         %b: tensor<4xf32> {loom.init = #loom.init<uniform(-1.0e30, 2.5e+7)>}) {
  return
}

// Everything a model function carries. Attribute dictionaries print sorted.
// CHECK-LABEL: func.func @Model(
// CHECK-SAME:      %{{[^:]*}}: tensor<8x16xf32> {loom.input = "x", loom.sharding = #loom.sharding<@mesh, [{"dp"}, {?}]>},
// CHECK-SAME:      %{{[^:]*}}: tensor<16x16xf32> {loom.init = #loom.init<normal(0.0, 0.02)>, loom.param = "w", loom.sharding = #loom.sharding<@mesh, [{}, {"tp"}]>})
// CHECK-SAME:      -> (tensor<8x16xf32> {loom.output = "y", loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"tp"}]>})
// CHECK-SAME:      attributes {loom.model}
func.func @Model(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {?}]>, loom.input = "x"},
                 %w: tensor<16x16xf32> {loom.param = "w", loom.init = #loom.init<normal(0.0, 0.02)>, loom.sharding = #loom.sharding<@mesh, [{}, {"tp"}]>})
    -> (tensor<8x16xf32> {loom.output = "y", loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"tp"}]>})
    attributes {loom.model} {
  %0 = loom.matmul %x, %w : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// loom.sharding on an op lists one sharding per result.
// CHECK-LABEL: func.func @op_results(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x16xf32>, %[[W:[^:]*]]: tensor<16x16xf32>)
// CHECK:         %[[M:.*]] = loom.matmul %[[X]], %[[W]] {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}], partial = sum("tp")>]} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
// CHECK:         loom.split %[[M]] dim = 1 sizes = [8, 8] {loom.sharding = [#loom.sharding<@mesh, [{"dp"}p0, {}]>, #loom.sharding<@mesh, [{?}, {"tp"}]>]} : tensor<8x16xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
func.func @op_results(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) {
  %0 = loom.matmul %x, %w {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}], partial = sum("tp")>]} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %1:2 = loom.split %0 dim = 1 sizes = [8, 8] {loom.sharding = [#loom.sharding<@mesh, [{"dp"}p0, {}]>, #loom.sharding<@mesh, [{?}, {"tp"}]>]} : tensor<8x16xf32> -> tensor<8x8xf32>, tensor<8x8xf32>
  return
}

// The shard op prints its sharding without the #loom.sharding prefix.
// CHECK-LABEL: func.func @shard_op(
// CHECK:         loom.shard %{{.*}} as <@mesh, [{"dp", ?}p2, {}], partial = max("tp")> : tensor<8x16xf32>
func.func @shard_op(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp", ?}p2, {}], partial = max("tp")> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Loom attributes under a name outside the loom. namespace are not checked
// by the dialect; #loom.dim prints standalone.
// CHECK-LABEL: func.func @standalone(
// CHECK-SAME:      attributes {test.dim = #loom.dim<{"dp", ?}p2>}
func.func @standalone() attributes {test.dim = #loom.dim<{"dp", ?}p2>} {
  return
}
