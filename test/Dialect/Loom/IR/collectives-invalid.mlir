// RUN: loom-opt %s -split-input-file -verify-diagnostics

// One case per collective verifier message, plus the ODS constraints the
// collectives add. "pp" is the manual (pipeline) axis.

//===----------------------------------------------------------------------===//
// Groups: the mesh and its axes (every collective)
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @unknown_mesh(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_reduce' op refers to unknown mesh @nomesh}}
  %0 = loom.all_reduce %x on @nomesh ["tp"] sum : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @unknown_axis(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_gather' op runs over axis 'sp', which mesh @mesh does not have}}
  %0 = loom.all_gather %x on @mesh ["tp", "sp"] dim 0 : tensor<8x16xf32> -> tensor<32x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @axis_twice(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.reduce_scatter' op lists axis 'tp' twice}}
  %0 = loom.reduce_scatter %x on @mesh ["tp", "dp", "tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x1xf32>
  return
}

// -----

// Only send and recv run between pipeline stages.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_reduce_over_manual_axis(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_reduce' op cannot run over the manual axis 'pp'}}
  %0 = loom.all_reduce %x on @mesh ["dp", "pp"] sum : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_over_manual_axis(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op cannot run over the manual axis 'pp'}}
  %0 = loom.collective_permute %x on @mesh ["pp"] pairs [0, 1, 1, 0] : tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// send and recv: one manual axis, another stage
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @send_over_non_manual_axis(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.send' op runs between pipeline stages, over a manual axis, not 'dp'}}
  loom.send %x on @mesh ["dp"] offset 1 : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @recv_over_non_manual_axis() {
  // expected-error @+1 {{'loom.recv' op runs between pipeline stages, over a manual axis, not 'tp'}}
  %0 = loom.recv on @mesh ["tp"] offset -1 : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @send_two_axes(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.send' op runs along exactly one axis, got 2}}
  loom.send %x on @mesh ["pp", "dp"] offset 1 : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @recv_no_axis() {
  // expected-error @+1 {{'loom.recv' op runs along exactly one axis, got 0}}
  %0 = loom.recv on @mesh [] offset 1 : tensor<8x16xf32>
  return
}

// -----

// The offset counts modulo the axis size: 2 steps along "pp" = 2 is home.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @send_to_itself(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.send' op offset 2 reaches the rank itself (axis size 2)}}
  loom.send %x on @mesh ["pp"] offset 2 : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @recv_from_itself() {
  // expected-error @+1 {{'loom.recv' op offset 0 reaches the rank itself (axis size 2)}}
  %0 = loom.recv on @mesh ["pp"] offset 0 : tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// all_gather, reduce_scatter, all_slice: `dim` scales by the group size
//===----------------------------------------------------------------------===//

// ["dp", "tp"] is a group of 2 * 4 = 8.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_gather_wrong_result(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_gather' op result must be f32[64, 16] for a group of 8, got f32[16, 16]}}
  %0 = loom.all_gather %x on @mesh ["dp", "tp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
  return
}

// -----

// Out-of-range dimensions name the op by its mnemonic.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_gather_dim_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{all_gather: dimension 2 is out of range for a rank-2 value}}
  %0 = loom.all_gather %x on @mesh ["tp"] dim 2 : tensor<8x16xf32> -> tensor<8x64xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @reduce_scatter_not_divisible(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'loom.reduce_scatter' op dimension 1 of f32[8, 6] is not divisible by the group size 4}}
  %0 = loom.reduce_scatter %x on @mesh ["tp"] dim 1 sum : tensor<8x6xf32> -> tensor<8x1xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @reduce_scatter_wrong_result(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.reduce_scatter' op result must be f32[8, 4] for a group of 4, got f32[2, 16]}}
  %0 = loom.reduce_scatter %x on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<2x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @reduce_scatter_negative_dim(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{reduce_scatter: dimension -1 is out of range for a rank-2 value}}
  %0 = loom.reduce_scatter %x on @mesh ["tp"] dim -1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_slice_not_divisible(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'loom.all_slice' op dimension 1 of f32[8, 6] is not divisible by the group size 4}}
  %0 = loom.all_slice %x on @mesh ["tp"] dim 1 : tensor<8x6xf32> -> tensor<8x1xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_slice_wrong_result(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'loom.all_slice' op result must be f32[1, 6] for a group of 8, got f32[4, 6]}}
  %0 = loom.all_slice %x on @mesh ["dp", "tp"] dim 0 : tensor<8x6xf32> -> tensor<4x6xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_slice_dim_out_of_range(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{all_slice: dimension 5 is out of range for a rank-2 value}}
  %0 = loom.all_slice %x on @mesh ["tp"] dim 5 : tensor<8x6xf32> -> tensor<8x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// all_to_all: split one dimension by n, concatenate another n times
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_not_divisible(%x: tensor<8x6xf32>) {
  // expected-error @+1 {{'loom.all_to_all' op split dimension 1 of f32[8, 6] is not divisible by the group size 4}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 0 : tensor<8x6xf32> -> tensor<32x1xf32>
  return
}

// -----

// Split and concat swapped: 32x4 would be right, 2x64 is the other way round.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_wrong_result(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_to_all' op result must be f32[32, 4] for a group of 4, got f32[2, 64]}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 0 : tensor<8x16xf32> -> tensor<2x64xf32>
  return
}

// -----

// The pieces' order must be of the same axes.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_split_axes_not_the_axes(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_to_all' op split_axes ["tp", "pp"] must be the axes ["dp", "tp"] in some order}}
  %0 = loom.all_to_all %x on @mesh ["dp", "tp"] as ["tp", "pp"] split 1 concat 0 : tensor<8x16xf32> -> tensor<64x2xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_split_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{all_to_all: dimension 2 is out of range for a rank-2 value}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 2 concat 0 : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_concat_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{all_to_all: dimension 3 is out of range for a rank-2 value}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 3 : tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// collective_permute: (source, target) pairs within the group
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_odd_pairs(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op pairs must list (source, target) ranks, got an odd count 3}}
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 2] : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_target_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op rank 4 is outside the group of 4}}
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 3, 4] : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_negative_source(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op rank -1 is outside the group of 2}}
  %0 = loom.collective_permute %x on @mesh ["dp"] pairs [-1, 0] : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_sends_twice(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op rank 0 sends twice}}
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 0, 2] : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_receives_twice(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op rank 1 receives twice}}
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 2, 1] : tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// broadcast: the root is a rank of the group
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @broadcast_root_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.broadcast' op root 8 is outside the group of 8}}
  %0 = loom.broadcast %x on @mesh ["dp", "tp"] root 8 : tensor<8x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @broadcast_negative_root(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.broadcast' op root -1 is outside the group of 2}}
  %0 = loom.broadcast %x on @mesh ["dp"] root -1 : tensor<8x16xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// ODS constraints
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_gather_element_type(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_gather' op requires the same element type for all operands and results}}
  %0 = loom.all_gather %x on @mesh ["tp"] dim 1 : tensor<8x16xf32> -> tensor<8x64xbf16>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_to_all_element_type(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_to_all' op requires the same element type for all operands and results}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 0 : tensor<8x16xf32> -> tensor<32x4xi32>
  return
}

// -----

// The custom form has one type; the generic form can disagree.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @all_reduce_type(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.all_reduce' op requires the same type for all operands and results}}
  %0 = "loom.all_reduce"(%x) <{axes = ["tp"], mesh = @mesh, reduction = 0 : i32}> : (tensor<8x16xf32>) -> tensor<8x16xbf16>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @permute_type(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'loom.collective_permute' op requires the same type for all operands and results}}
  %0 = "loom.collective_permute"(%x) <{axes = ["tp"], mesh = @mesh, pairs = array<i64: 0, 1>}> : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @send_element_type(%x: tensor<8x16xi8>) {
  // expected-error @+1 {{'loom.send' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<8x16xi8>'}}
  loom.send %x on @mesh ["pp"] offset 1 : tensor<8x16xi8>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @recv_dynamic_shape() {
  // expected-error @+1 {{'loom.recv' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x16xf32>'}}
  %0 = loom.recv on @mesh ["pp"] offset 1 : tensor<?x16xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @unknown_reduction(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{custom op 'loom.all_reduce' expected string or keyword containing one of the following enum values for attribute 'reduction' [sum, max, min]}}
  %0 = loom.all_reduce %x on @mesh ["tp"] prod : tensor<8x16xf32>
  return
}

// -----

// In the generic form the reduction is its integer value: 0, 1 or 2.
loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
func.func @reduction_generic_out_of_range(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{invalid properties {axes = ["tp"], dim = 1 : i64, mesh = @mesh, reduction = 3 : i32} for op loom.reduce_scatter: Invalid attribute `reduction` in property conversion: 3 : i32}}
  %0 = "loom.reduce_scatter"(%x) <{axes = ["tp"], dim = 1 : i64, mesh = @mesh, reduction = 3 : i32}> : (tensor<8x16xf32>) -> tensor<8x4xf32>
  return
}
