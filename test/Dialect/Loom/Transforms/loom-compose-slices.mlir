// RUN: loom-opt %s --split-input-file --loom-compose-slices | FileCheck %s

// Halves of a third of one projection: slices of the projection. The
// split that made the third stays for its other reader (k).
// CHECK-LABEL: func.func @halves_of_a_third
// CHECK-NEXT:  %[[QK:.*]]:2 = loom.split %arg0 dim = 2 sizes = [8, 8]
// CHECK-NEXT:  %[[A:.*]] = loom.slice %arg0 [0, 0, 0] to [4, 6, 4] : tensor<4x6x16xf32> -> tensor<4x6x4xf32>
// CHECK-NEXT:  %[[B:.*]] = loom.slice %arg0 [0, 0, 4] to [4, 6, 8] : tensor<4x6x16xf32> -> tensor<4x6x4xf32>
// CHECK-NEXT:  return %[[A]], %[[B]], %[[QK]]#1
func.func @halves_of_a_third(%x: tensor<4x6x16xf32> {loom.input = "x"}) -> (tensor<4x6x4xf32>, tensor<4x6x4xf32>, tensor<4x6x8xf32>) attributes {loom.model} {
  %q, %k = loom.split %x dim = 2 sizes = [8, 8] : tensor<4x6x16xf32> -> tensor<4x6x8xf32>, tensor<4x6x8xf32>
  %a, %b = loom.split %q dim = 2 sizes = [4, 4] : tensor<4x6x8xf32> -> tensor<4x6x4xf32>, tensor<4x6x4xf32>
  return %a, %b, %k : tensor<4x6x4xf32>, tensor<4x6x4xf32>, tensor<4x6x8xf32>
}

// -----

// A chain of three, over two dimensions: one slice of the first input,
// starting at the sum of the starts; the ops in between have no reader
// left and go.
// CHECK-LABEL: func.func @chain
// CHECK-NEXT:  %[[S:.*]] = loom.slice %arg0 [3, 5] to [5, 7] : tensor<8x16xf32> -> tensor<2x2xf32>
// CHECK-NEXT:  return %[[S]]
func.func @chain(%x: tensor<8x16xf32> {loom.input = "x"}) -> tensor<2x2xf32> attributes {loom.model} {
  %a = loom.slice %x [2, 0] to [8, 16] : tensor<8x16xf32> -> tensor<6x16xf32>
  %b, %c = loom.split %a dim = 1 sizes = [4, 12] : tensor<6x16xf32> -> tensor<6x4xf32>, tensor<6x12xf32>
  %d = loom.slice %c [1, 1] to [3, 3] : tensor<6x12xf32> -> tensor<2x2xf32>
  return %d : tensor<2x2xf32>
}

// -----

// A piece read in a loop's body is sliced there from the input made
// outside it.
// CHECK-LABEL: func.func @in_a_loop
// CHECK:       loom.repeat
// CHECK:       loom.slice %arg0 [0, 2] to [4, 4] : tensor<4x8xf32> -> tensor<4x2xf32>
// CHECK-NOT:   loom.split
func.func @in_a_loop(%x: tensor<4x8xf32> {loom.input = "x"}, %y: tensor<4x2xf32> {loom.input = "y"}) -> tensor<4x2xf32> attributes {loom.model} {
  %a, %b = loom.split %x dim = 1 sizes = [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  %r = loom.repeat 2 carried(%y : tensor<4x2xf32>) -> tensor<4x2xf32> {
  ^bb0(%h: tensor<4x2xf32>):
    %p = loom.slice %a [0, 2] to [4, 4] : tensor<4x4xf32> -> tensor<4x2xf32>
    %s = loom.add %h, %p : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<4x2xf32>
    loom.yield %s : tensor<4x2xf32>
  }
  return %r : tensor<4x2xf32>
}

// -----

// Left alone: a slice of an argument, and a slice of the rank's piece of
// a replicated value (where that starts depends on the rank).
loom.mesh @m ["dp" = 2]
// CHECK-LABEL: func.func @left_alone
// CHECK-NEXT:  loom.slice %arg0 [0, 0] to [4, 4]
// CHECK-NEXT:  loom.all_slice
// CHECK-NEXT:  loom.slice %{{.*}} [0, 0] to [2, 4]
func.func @left_alone(%x: tensor<4x8xf32> {loom.input = "x"}) -> (tensor<4x4xf32>, tensor<2x4xf32>) attributes {loom.model} {
  %a = loom.slice %x [0, 0] to [4, 4] : tensor<4x8xf32> -> tensor<4x4xf32>
  %r = loom.all_slice %a on @m ["dp"] dim 0 : tensor<4x4xf32> -> tensor<2x4xf32>
  %b = loom.slice %r [0, 0] to [2, 4] : tensor<2x4xf32> -> tensor<2x4xf32>
  return %a, %b : tensor<4x4xf32>, tensor<2x4xf32>
}
