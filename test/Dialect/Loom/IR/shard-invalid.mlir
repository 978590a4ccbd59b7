// RUN: loom-opt %s -split-input-file -verify-diagnostics
// XFAIL: *

// Known bug: loom.shard does not check its sharding against the mesh and the
// operand (no verifier, no verifySymbolUses), so all of these verify today.
// When this test XPASSes, drop the XFAIL line and move the cases into
// invalid.mlir.

loom.mesh @mesh ["dp" = 2]
func.func @shard_unknown_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{sharding refers to unknown mesh @nomesh}}
  %0 = loom.shard %x as <@nomesh, [{}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 2]
func.func @shard_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{sharding has 2 dimension(s) but the value f32[8] has rank 1}}
  %0 = loom.shard %x as <@mesh, [{}, {}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 2]
func.func @shard_unknown_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{sharding uses axis "tp" which mesh @mesh does not have}}
  %0 = loom.shard %x as <@mesh, [{"tp"}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 4]
func.func @shard_not_divisible(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{dimension 0 of size 6 is not divisible by 4, the number of devices it is split over; pad it to 8}}
  %0 = loom.shard %x as <@mesh, [{"dp"}]> : tensor<6xf32>
  return %0 : tensor<6xf32>
}
