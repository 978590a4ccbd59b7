// RUN: loom-opt %s -split-input-file -verify-diagnostics --loom-resize-mesh="axes=dp=4" | FileCheck %s
// RUN: loom-opt %s -split-input-file -verify-diagnostics --loom-resize-mesh="axes=tp=8,dp=4" | FileCheck %s --check-prefix=BOTH

// Option syntax errors are in loom-resize-mesh-options.mlir.

// Only the named axes change; shardings are kept and still divide.

// CHECK: loom.mesh @mesh ["dp" = 4, "tp" = 2]{{$}}
// BOTH:  loom.mesh @mesh ["dp" = 4, "tp" = 8]{{$}}
loom.mesh @mesh ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @model(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"tp"}]>
// CHECK:         loom.relu %{{.*}} {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}]>]}
// BOTH-LABEL:  func.func @model(
func.func @model(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = loom.relu %x {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}]>]} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Every mesh in the module is resized; manual axes stay manual.

// CHECK: loom.mesh @pipe ["pp" = 2, "dp" = 4, "tp" = 2] manual ["pp"]{{$}}
// CHECK: loom.mesh @data ["dp" = 4, "tp" = 1]{{$}}
// BOTH:  loom.mesh @pipe ["pp" = 2, "dp" = 4, "tp" = 8] manual ["pp"]{{$}}
// BOTH:  loom.mesh @data ["dp" = 4, "tp" = 8]{{$}}
loom.mesh @pipe ["pp" = 2, "dp" = 2, "tp" = 2] manual ["pp"]
loom.mesh @data ["dp" = 1, "tp" = 1]

// -----

// A mesh that lacks a resized axis is an error (the override checks axes in
// the order they are given).
// expected-error-re @+1 {{loom-resize-mesh: mesh @other has no axis '{{dp|tp}}'}}
loom.mesh @other ["x" = 2]

// -----

// 6 divides over dp = 2 but not over dp = 4.
loom.mesh @mesh ["dp" = 2, "tp" = 2]
// expected-error @+1 {{dimension 0 of size 6 is not divisible by 4, the number of devices it is split over; pad it to 8}}
func.func @no_longer_divides(%x: tensor<6xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}]>}) {
  return
}

// -----

// Shardings on op results are checked again too.
loom.mesh @mesh ["dp" = 2, "tp" = 2]
func.func @result_no_longer_divides(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{dimension 0 of size 2 is not divisible by 4, the number of devices it is split over; pad it to 4}}
  %0 = loom.relu %x {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}]>]} : tensor<2x4xf32>
  return
}

// -----

// A partitioned function keeps the per-device shapes and scales of the old
// sizes (a loss twice too large after dp=2 became 4): refused.
loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{loom-resize-mesh: function @partitioned is already partitioned for the mesh's sizes; resize the global model, before loom-partition}}
func.func @partitioned(%x: tensor<2x16xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<2x16xf32> attributes {loom.model, loom.spmd} {
  return %x : tensor<2x16xf32>
}
