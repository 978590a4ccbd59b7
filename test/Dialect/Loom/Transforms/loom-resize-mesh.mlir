// RUN: loom-opt %s -split-input-file --loom-resize-mesh="axes=dp=4" | FileCheck %s
// RUN: loom-opt %s -split-input-file --loom-resize-mesh="axes=tp=8,dp=4" | FileCheck %s --check-prefix=BOTH
// RUN: loom-opt %s -split-input-file --loom-resize-mesh | FileCheck %s --check-prefix=NOOP
// RUN: not loom-opt %s -split-input-file --loom-resize-mesh="axes=dp=3" 2>&1 | FileCheck %s --check-prefix=PAD
// RUN: not loom-opt %s -split-input-file --loom-resize-mesh="axes=ep=2" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --loom-resize-mesh="axes=dp" 2>&1 | FileCheck %s --check-prefix=NO-SIZE
// RUN: not loom-opt %s --loom-resize-mesh="axes=dp=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --loom-resize-mesh="axes=dp=two" 2>&1 | FileCheck %s --check-prefix=NOT-A-NUMBER
// RUN: not loom-opt %s --loom-resize-mesh="axes=dp=2,dp=4" 2>&1 | FileCheck %s --check-prefix=TWICE

// NO-SIZE: error: loom-resize-mesh: expected axis=size with a positive size, got 'dp'
// ZERO: error: loom-resize-mesh: expected axis=size with a positive size, got 'dp=0'
// NOT-A-NUMBER: error: loom-resize-mesh: expected axis=size with a positive size, got 'dp=two'
// TWICE: error: loom-resize-mesh: axis 'dp' is given twice

// Only the named axes change; shardings are kept and still divide.

// CHECK:   loom.mesh @mesh ["dp" = 4, "tp" = 2]{{$}}
// BOTH:    loom.mesh @mesh ["dp" = 4, "tp" = 8]{{$}}
// NOOP:    loom.mesh @mesh ["dp" = 2, "tp" = 2]{{$}}
// UNKNOWN: loom-resize-mesh.mlir:[[@LINE+1]]:1: error: loom-resize-mesh: mesh @mesh has no axis 'ep'
loom.mesh @mesh ["dp" = 2, "tp" = 2]

// CHECK-LABEL: func.func @model(
// CHECK-SAME:      loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"tp"}]>
// CHECK:         loom.relu %{{.*}} {loom.sharding = [#loom.sharding<@mesh, [{"dp"}, {}]>]}
// PAD: loom-resize-mesh.mlir:[[@LINE+1]]:1: error: dimension 0 of size 8 is not divisible by 3, the number of devices it is split over; pad it to 9
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
// NOOP:  loom.mesh @pipe ["pp" = 2, "dp" = 2, "tp" = 2] manual ["pp"]{{$}}
// NOOP:  loom.mesh @data ["dp" = 1, "tp" = 1]{{$}}
// UNKNOWN: loom-resize-mesh.mlir:[[@LINE+1]]:1: error: loom-resize-mesh: mesh @pipe has no axis 'ep'
loom.mesh @pipe ["pp" = 2, "dp" = 2, "tp" = 2] manual ["pp"]
loom.mesh @data ["dp" = 1, "tp" = 1]

// CHECK-LABEL: func.func @two_meshes(
// CHECK-SAME:      loom.sharding = #loom.sharding<@data, [{"dp"}, {}]>
// PAD: loom-resize-mesh.mlir:[[@LINE+1]]:1: error: dimension 0 of size 4 is not divisible by 3, the number of devices it is split over; pad it to 6
func.func @two_meshes(%x: tensor<4x16xf32> {loom.sharding = #loom.sharding<@data, [{"dp"}, {}]>}) {
  return
}
