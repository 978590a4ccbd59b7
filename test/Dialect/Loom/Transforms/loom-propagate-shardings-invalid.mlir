// RUN: loom-opt %s --split-input-file --loom-propagate-shardings --verify-diagnostics

// Propagation needs the one mesh the shardings refer to.
// expected-error @below {{sharding propagation needs exactly one loom.mesh in the module, found 0}}
func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
}

// -----

// A fusion group's body has no sharding of its own: propagation wrote
// loom.body_shardings onto the group, which then failed to verify.
loom.mesh @m ["dp" = 2]
func.func @fused(%x: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {loom.model} {
  // expected-error @below {{loom-propagate-shardings runs on the global model, before loom-fuse-elementwise makes loom.fused groups}}
  %0 = loom.fused(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    %1 = loom.exp %a : tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}
