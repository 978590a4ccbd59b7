// RUN: loom-opt %s --split-input-file --loom-plan-memory --verify-diagnostics

// Buffers that add up past 2^63 - 1 bytes (the second of 2^62 bytes) are refused: no
// offset of the plan may overflow.
func.func @too_big(%x: tensor<1152921504606846976xf32> {loom.input = "x"}) -> tensor<1152921504606846976xf32> attributes {loom.model, loom.spmd} {
  // expected-error @below {{loom-plan-memory: the buffers of this function add up to more than 2^63 - 1 bytes}}
  %0 = loom.relu %x : tensor<1152921504606846976xf32>
  %1 = loom.exp %0 : tensor<1152921504606846976xf32>
  %2 = loom.add %1, %0 : tensor<1152921504606846976xf32>, tensor<1152921504606846976xf32> -> tensor<1152921504606846976xf32>
  return %2 : tensor<1152921504606846976xf32>
}
