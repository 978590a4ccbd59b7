// RUN: loom-opt %s -split-input-file -verify-diagnostics
// XFAIL: *

// Known bug: loom-opt crashes (segfault in verifyRegionBranchOpInterface)
// when a loom.repeat has fewer results, or its yield fewer values, than
// carried operands: RepeatOp::getSuccessorRegions and
// YieldOp::getMutableSuccessorOperands take `numCarried` results/operands
// without checking they exist, and the interface verifier runs before
// RepeatOp::verifyRegions. When this test XPASSes, drop the XFAIL line and
// move the cases into invalid.mlir.

func.func @fewer_results_than_carried(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op has fewer results than carried values}}
  loom.repeat 2 carried(%x : tensor<8xf32>) {
  ^bb0(%a: tensor<8xf32>):
    loom.yield
  }
  return
}

// -----

func.func @yield_fewer_than_carried(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body yields 1 value(s) for 2 result(s)}}
  %0:2 = loom.repeat 2 carried(%x, %y : tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>, tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}
