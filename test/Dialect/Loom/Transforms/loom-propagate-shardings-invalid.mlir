// RUN: loom-opt %s --split-input-file --loom-propagate-shardings --verify-diagnostics

// Propagation needs the one mesh the shardings refer to.
// expected-error @below {{sharding propagation needs exactly one loom.mesh in the module, found 0}}
func.func @no_mesh(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
}
