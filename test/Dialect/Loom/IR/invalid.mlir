// RUN: loom-opt %s -split-input-file -verify-diagnostics

// One case per Loom verifier, parser and type-inference error. Type
// inference errors appear twice: the inference message, then MLIR's
// "failed to infer returned types".

//===----------------------------------------------------------------------===//
// loom.mesh
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.mesh' op has 1 axis names but 2 sizes}}
"loom.mesh"() <{axis_names = ["dp"], axis_sizes = array<i64: 2, 4>, sym_name = "mesh"}> : () -> ()

// -----

// expected-error @+1 {{'loom.mesh' op needs at least one axis}}
loom.mesh @mesh []

// -----

// expected-error @+1 {{'loom.mesh' op declares axis 'dp' twice}}
loom.mesh @mesh ["dp" = 2, "dp" = 4]

// -----

// expected-error @+1 {{'loom.mesh' op axis 'tp' must have a positive size, got 0}}
loom.mesh @mesh ["dp" = 2, "tp" = 0]

// -----

// expected-error @+1 {{'loom.mesh' op axis 'dp' must have a positive size, got -2}}
loom.mesh @mesh ["dp" = -2]

// -----

// Device counts fit MPI's int ranks (and never overflow int64_t).
// expected-error @+1 {{'loom.mesh' op has more than 2^31 - 1 devices}}
loom.mesh @mesh ["dp" = 65536, "tp" = 32768]

// -----

// expected-error @+1 {{'loom.mesh' op has more than 2^31 - 1 devices}}
loom.mesh @mesh ["a" = 4294967296, "b" = 4294967296]

// -----

// expected-error @+1 {{'loom.mesh' op manual axis "pp" is not an axis of the mesh}}
loom.mesh @mesh ["dp" = 2] manual ["pp"]

// -----

func.func @mesh_in_function() {
  // expected-error @+1 {{'loom.mesh' op expects parent op 'builtin.module'}}
  loom.mesh @mesh ["dp" = 2]
  return
}

// -----

//===----------------------------------------------------------------------===//
// #loom.sharding: parser and attribute verifier
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{mesh axis "dp" is used more than once in one sharding}}
func.func @axis_twice(%x: tensor<8x8xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {"dp"}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{mesh axis "dp" is used more than once in one sharding}}
func.func @axis_twice_in_dim(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp", "dp"}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{mesh axis "dp" is used more than once in one sharding}}
func.func @axis_sharded_and_partial(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}], partial = sum("dp")>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{expected a priority such as 'p0'}}
func.func @bad_priority(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}q1]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{expected a priority such as 'p0'}}
func.func @priority_not_a_number(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}px]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{expected sum, max or min}}
func.func @bad_partial_kind(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{}], partial = avg("dp")>}) {
  return
}

// -----

// Reduction kinds are written only inside #loom.sharding (partial = sum(...));
// there is no attribute of their own.
// expected-error @+1 {{unknown attribute `reduction` in dialect `loom`}}
func.func @no_reduction_attr() attributes {test.kind = #loom.reduction<sum>} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// #loom.sharding against the value and the mesh
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding applies to statically shaped tensors, not 'f32'}}
func.func @not_a_tensor(%x: f32 {loom.sharding = #loom.sharding<@mesh, []>}) {
  return
}

// -----

// Loom shapes are static: a dynamic dimension cannot be checked for
// divisibility.
loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding applies to statically shaped tensors, not 'tensor<?x4xf32>'}}
func.func @dynamic_shape(%x: tensor<?x4xf32> {loom.sharding = #loom.sharding<@mesh, [{"dp"}, {}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding refers to unknown mesh @other}}
func.func @unknown_mesh(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@other, [{}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding has 1 dimension(s) but the value f32[8, 16] has rank 2}}
func.func @rank_mismatch(%x: tensor<8x16xf32> {loom.sharding = #loom.sharding<@mesh, [{}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding uses axis "tp" which mesh @mesh does not have}}
func.func @unknown_axis(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{"tp"}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
// expected-error @+1 {{sharding uses axis "tp" which mesh @mesh does not have}}
func.func @unknown_partial_axis(%x: tensor<8xf32> {loom.sharding = #loom.sharding<@mesh, [{}], partial = sum("tp")>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 2, "tp" = 4]
// expected-error @+1 {{dimension 1 of size 6 is not divisible by 8, the number of devices it is split over; pad it to 8}}
func.func @not_divisible(%x: tensor<8x6xf32> {loom.sharding = #loom.sharding<@mesh, [{}, {"dp", "tp"}]>}) {
  return
}

// -----

loom.mesh @mesh ["dp" = 4]
func.func @not_divisible_result(%x: tensor<6xf32>) {
  // expected-error @+1 {{dimension 0 of size 6 is not divisible by 4, the number of devices it is split over; pad it to 8}}
  %0 = loom.relu %x {loom.sharding = [#loom.sharding<@mesh, [{"dp"}]>]} : tensor<6xf32>
  return
}

// -----

func.func @unknown_mesh_on_result(%x: tensor<8xf32>) {
  // expected-error @+1 {{sharding refers to unknown mesh @mesh}}
  %0 = loom.relu %x {loom.sharding = [#loom.sharding<@mesh, [{}]>]} : tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.shard: its sharding against the mesh and the operand
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["dp" = 2]
func.func @shard_unknown_mesh(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.shard' op sharding refers to unknown mesh @nomesh}}
  %0 = loom.shard %x as <@nomesh, [{}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 2]
func.func @shard_rank(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.shard' op sharding has 2 dimension(s) but the value f32[8] has rank 1}}
  %0 = loom.shard %x as <@mesh, [{}, {}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 2]
func.func @shard_unknown_axis(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.shard' op sharding uses axis "tp" which mesh @mesh does not have}}
  %0 = loom.shard %x as <@mesh, [{"tp"}]> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @mesh ["dp" = 4]
func.func @shard_not_divisible(%x: tensor<6xf32>) -> tensor<6xf32> {
  // expected-error @+1 {{'loom.shard' op dimension 0 of size 6 is not divisible by 4, the number of devices it is split over; pad it to 8}}
  %0 = loom.shard %x as <@mesh, [{"dp"}]> : tensor<6xf32>
  return %0 : tensor<6xf32>
}

// -----

//===----------------------------------------------------------------------===//
// loom.* attributes on ops
//===----------------------------------------------------------------------===//

loom.mesh @mesh ["dp" = 2]
func.func @sharding_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.sharding' must list one #loom.sharding per result (2)}}
  %0:2 = loom.split %x dim = 0 sizes = [4, 4] {loom.sharding = [#loom.sharding<@mesh, [{}]>]} : tensor<8xf32> -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

loom.mesh @mesh ["dp" = 2]
func.func @sharding_not_array(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.sharding' must list one #loom.sharding per result (1)}}
  %0 = loom.relu %x {loom.sharding = #loom.sharding<@mesh, [{"dp"}]>} : tensor<8xf32>
  return
}

// -----

func.func @sharding_not_sharding(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.sharding' must list #loom.sharding attributes}}
  %0 = loom.relu %x {loom.sharding = ["dp"]} : tensor<8xf32>
  return
}

// -----

func.func @model_on_op(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.model' only applies to functions}}
  %0 = loom.relu %x {loom.model} : tensor<8xf32>
  return
}

// -----

// The passes partition, plan and run one block over static tensors: a
// declaration crashed propagation and partitioning, a scalar, dynamic or
// index-typed argument the memory plan, and a second block stayed global.
// expected-error @+1 {{a 'loom.model' function needs a body}}
func.func private @model_declaration(tensor<8xf32>) -> tensor<8xf32> attributes {loom.model}

// -----

// expected-error @+1 {{a 'loom.model' function's argument 1 must be a statically shaped tensor of integers or floats, not 'i32'}}
func.func @model_scalar_argument(%x: tensor<8xf32>, %n: i32) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
}

// -----

// expected-error @+1 {{a 'loom.model' function's argument 0 must be a statically shaped tensor of integers or floats, not 'tensor<?x4xf32>'}}
func.func @model_dynamic_argument(%x: tensor<?x4xf32>) -> tensor<?x4xf32> attributes {loom.model} {
  return %x : tensor<?x4xf32>
}

// -----

// expected-error @+1 {{a 'loom.model' function's result 0 must be a statically shaped tensor of integers or floats, not 'tensor<4xindex>'}}
func.func private @model_index_result(%x: tensor<4xf32>) -> tensor<4xindex> attributes {loom.model} {
  %0 = loom.constant dense<0> : tensor<4xindex>
  return %0 : tensor<4xindex>
}

// -----

// expected-error @+1 {{a 'loom.model' function has one block, not 2}}
func.func @model_two_blocks(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
^unreachable:
  %0 = loom.exp %x : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @unknown_op_attr(%x: tensor<8xf32>) {
  // expected-error @+1 {{unknown Loom attribute 'loom.foo'}}
  %0 = loom.relu %x {loom.foo = 1 : i64} : tensor<8xf32>
  return
}

// -----

// loom.stacked was once reserved; it is not a Loom attribute.
// expected-error @+1 {{unknown Loom attribute 'loom.stacked'}}
func.func @unknown_function_attr() attributes {loom.stacked} {
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.* attributes on function arguments and results
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'loom.sharding' must be a #loom.sharding}}
func.func @arg_sharding_not_sharding(%x: tensor<8xf32> {loom.sharding = "dp"}) {
  return
}

// -----

// expected-error @+1 {{'loom.init' must be a #loom.init on an argument}}
func.func @init_on_result() -> (tensor<8xf32> {loom.init = #loom.init<zeros>}) {
  %0 = loom.constant dense<0.0> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+1 {{'loom.init' must be a #loom.init on an argument}}
func.func @init_not_init(%x: tensor<8xf32> {loom.init = "zeros"}) {
  return
}

// -----

// expected-error @+1 {{'loom.param' must be a non-empty string}}
func.func @empty_param(%x: tensor<8xf32> {loom.param = ""}) {
  return
}

// -----

// expected-error @+1 {{'loom.input' must be a non-empty string}}
func.func @input_not_string(%x: tensor<8xf32> {loom.input = 3 : i64}) {
  return
}

// -----

// expected-error @+1 {{'loom.output' must be a non-empty string}}
func.func @empty_output() -> (tensor<8xf32> {loom.output = ""}) {
  %0 = loom.constant dense<0.0> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+1 {{unknown Loom argument attribute 'loom.output'}}
func.func @output_on_argument(%x: tensor<8xf32> {loom.output = "y"}) {
  return
}

// -----

// expected-error @+1 {{unknown Loom result attribute 'loom.param'}}
func.func @param_on_result() -> (tensor<8xf32> {loom.param = "w"}) {
  %0 = loom.constant dense<0.0> : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @+1 {{unknown Loom argument attribute 'loom.weight'}}
func.func @unknown_arg_attr(%x: tensor<8xf32> {loom.weight = "w"}) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// #loom.init parser
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expected normal, uniform, zeros or ones}}
func.func @init_unknown_kind(%x: tensor<8xf32> {loom.init = #loom.init<gaussian(0.0, 1.0)>}) {
  return
}

// -----

// expected-error @+1 {{expected '('}}
func.func @init_missing_arguments(%x: tensor<8xf32> {loom.init = #loom.init<normal>}) {
  return
}

// -----

// expected-error @+2 {{unexpected decimal integer literal for a floating point value}}
// expected-note @+1 {{add a trailing dot to make the literal a float}}
func.func @init_integer_arguments(%x: tensor<8xf32> {loom.init = #loom.init<uniform(0, 1)>}) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// ODS constraints and inferred result types
//===----------------------------------------------------------------------===//

func.func @constant_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.constant' op failed to verify that all of {value, result} have same type}}
  %0 = "loom.constant"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xbf16>
  return
}

// -----

func.func @unary_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'loom.relu' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xi32>'}}
  %0 = loom.relu %x : tensor<4xi32>
  return
}

// -----

func.func @gelu_unknown_approximation(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'loom.gelu' expected string or keyword containing one of the following enum values for attribute 'approximate' [none, tanh]}}
  %0 = loom.gelu %x approximate exact : tensor<4xf32>
  return
}

// -----

// In the generic form the approximation is its integer value: 0 or 1.
func.func @gelu_generic_out_of_range(%x: tensor<4xf32>) {
  // expected-error @+1 {{invalid properties {approximate = 2 : i32} for op loom.gelu: Invalid attribute `approximate` in property conversion: 2 : i32}}
  %0 = "loom.gelu"(%x) <{approximate = 2 : i32}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @dynamic_operand(%x: tensor<?x4xf32>, %y: tensor<3x4xf32>) {
  // expected-error @+1 {{'loom.add' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x4xf32>'}}
  %0 = loom.add %x, %y : tensor<?x4xf32>, tensor<3x4xf32> -> tensor<3x4xf32>
  return
}

// -----

func.func @dynamic_reshape(%x: tensor<?x4xf32>) {
  // expected-error @+1 {{'loom.reshape' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?x4xf32>'}}
  %0 = loom.reshape %x : tensor<?x4xf32> -> tensor<8xf32>
  return
}

// -----

func.func @dynamic_result(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'loom.reshape' op result #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values, but got 'tensor<?xf32>'}}
  %0 = loom.reshape %x : tensor<2x4xf32> -> tensor<?xf32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.cast' op requires the same shape for all operands and results}}
  %0 = loom.cast %x : tensor<4xf32> -> tensor<8xbf16>
  return
}

// -----

func.func @result_type_mismatch(%a: tensor<4x8xf32>, %b: tensor<8xbf16>) {
  // expected-error @+2 {{'loom.add' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<4x8xbf16>'}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : tensor<4x8xf32>, tensor<8xbf16> -> tensor<4x8xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise: promotion and broadcasting
//===----------------------------------------------------------------------===//

func.func @promote_int_float(%a: tensor<4xi32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{+: element types i32 and f32 do not mix; only f32 with bf16/f16 promotes implicitly, use cast() for the rest}}
  // expected-error @+1 {{'loom.add' op failed to infer returned types}}
  %0 = loom.add %a, %b : tensor<4xi32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @promote_bf16_f16(%a: tensor<4xbf16>, %b: tensor<4xf16>) {
  // expected-error @+2 {{*: element types bf16 and f16 do not mix}}
  // expected-error @+1 {{'loom.mul' op failed to infer returned types}}
  %0 = loom.mul %a, %b : tensor<4xbf16>, tensor<4xf16> -> tensor<4xf32>
  return
}

// -----

func.func @promote_i32_i64(%a: tensor<4xi32>, %b: tensor<4xi64>) {
  // expected-error @+2 {{/: element types i32 and i64 do not mix}}
  // expected-error @+1 {{'loom.div' op failed to infer returned types}}
  %0 = loom.div %a, %b : tensor<4xi32>, tensor<4xi64> -> tensor<4xi64>
  return
}

// -----

func.func @broadcast(%a: tensor<4x8xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{-: shapes [4, 8] and [4] do not broadcast (dimension 1 is 8 vs 4)}}
  // expected-error @+1 {{'loom.sub' op failed to infer returned types}}
  %0 = loom.sub %a, %b : tensor<4x8xf32>, tensor<4xf32> -> tensor<4x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.matmul
//===----------------------------------------------------------------------===//

func.func @matmul_vector(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{matmul needs operands of rank 2 or more, got f32[8] @ f32[8, 4]; reshape vectors to matrices first}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : tensor<8xf32>, tensor<8x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_inner(%a: tensor<4x8xf32>, %b: tensor<6x4xf32>) {
  // expected-error @+2 {{matmul inner dimensions differ: f32[4, 8] @ f32[6, 4] (8 vs 6)}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : tensor<4x8xf32>, tensor<6x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_promotion(%a: tensor<4x8xf16>, %b: tensor<8x4xbf16>) {
  // expected-error @+2 {{matmul: element types f16 and bf16 do not mix}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : tensor<4x8xf16>, tensor<8x4xbf16> -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) {
  // expected-error @+2 {{matmul batch dimensions: shapes [2] and [3] do not broadcast (dimension 0 is 2 vs 3)}}
  // expected-error @+1 {{'loom.matmul' op failed to infer returned types}}
  %0 = loom.matmul %a, %b : tensor<2x4x8xf32>, tensor<3x8x4xf32> -> tensor<2x4x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.einsum
//===----------------------------------------------------------------------===//

func.func @einsum_no_output(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum spec 'ij' needs an explicit output, as in "ij,jk->ik"}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij" %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @einsum_operand_count(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum spec 'ij,jk->ik' names 2 operand(s) but 1 were given}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij,jk->ik" %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @einsum_no_operands() {
  // expected-error @+2 {{einsum spec '->' names 1 operand(s) but 0 were given}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "->" : () -> tensor<f32>
  return
}

// -----

func.func @einsum_three_operands(%a: tensor<4x4xf32>) {
  // expected-error @+2 {{einsum takes one or two operands, got 3}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij,jk,kl->il" %a, %a, %a : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @einsum_rank(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum operand 0 has rank 2 (f32[4, 8]) but its subscripts 'ijk' name 3 dimension(s)}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ijk->ij" %a : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @einsum_size(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum subscript 'j' has size 8 in one place and 4 in another}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij,jk->ik" %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @einsum_promotion(%a: tensor<4x8xf16>, %b: tensor<8x4xbf16>) {
  // expected-error @+2 {{einsum: element types f16 and bf16 do not mix}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij,jk->ik" %a, %b : (tensor<4x8xf16>, tensor<8x4xbf16>) -> tensor<4x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.batched_einsum
//===----------------------------------------------------------------------===//

func.func @batched_einsum_one(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.batched_einsum' op needs at least two second operands, got 1}}
  %0 = loom.batched_einsum "ij,jk->ik" %a, %b : tensor<4x8xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_einsum_results(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.batched_einsum' op has 1 results for 2 second operands}}
  %0 = loom.batched_einsum "ij,jk->ik" %a, %b, %b : tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_einsum_one_operand_spec(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.batched_einsum' op needs a two-operand spec, got 'ij->ji'}}
  %0:2 = loom.batched_einsum "ij->ji" %a, %b, %b : tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x4xf32> -> tensor<8x4xf32>, tensor<8x4xf32>
  return
}

// -----

func.func @batched_einsum_type(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8x2xf32>) {
  // expected-error @+1 {{'loom.batched_einsum' op result f32[4, 4] is not the einsum's f32[4, 2]}}
  %0:2 = loom.batched_einsum "ij,jk->ik" %a, %b, %c : tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x2xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @batched_einsum_spec(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+1 {{einsum subscript 'j' has size 8 in one place and 4 in another}}
  %0:2 = loom.batched_einsum "ij,jk->ik" %a, %b, %b : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  return
}

// -----

func.func @einsum_bad_input_letter(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum subscript 'J' is not a lower-case letter}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "iJ->i" %a : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @einsum_bad_output_letter(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum subscript 'I' is not a lower-case letter}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij->I" %a : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @einsum_repeated_output(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum output subscript 'i' appears twice}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij->ii" %a : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @einsum_output_not_in_inputs(%a: tensor<4x8xf32>) {
  // expected-error @+2 {{einsum output subscript 'k' does not appear in any operand}}
  // expected-error @+1 {{'loom.einsum' op failed to infer returned types}}
  %0 = loom.einsum "ij->ik" %a : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalisations, softmax and reductions
//===----------------------------------------------------------------------===//

func.func @softmax_dim(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{softmax: dimension 2 is out of range for a rank-2 value}}
  %0 = loom.softmax %x dim = 2 : tensor<2x4xf32>
  return
}

// -----

func.func @softmax_negative_dim(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{softmax: dimension -1 is out of range for a rank-2 value}}
  %0 = loom.softmax %x dim = -1 : tensor<2x4xf32>
  return
}

// -----

func.func @norm_scale_shape(%x: tensor<2x8xbf16>, %g: tensor<4xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{layernorm: scale/bias f32[4] must match the trailing dimensions of the input bf16[2, 8]}}
  // expected-error @+1 {{'loom.layernorm' op failed to infer returned types}}
  %0 = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<2x8xbf16>, tensor<4xf32>, tensor<8xf32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @norm_scale_bias_differ(%x: tensor<2x8xbf16>, %g: tensor<8xf32>, %b: tensor<2x8xf32>) {
  // expected-error @+2 {{layernorm: scale f32[8] and bias f32[2, 8] have different shapes}}
  // expected-error @+1 {{'loom.layernorm' op failed to infer returned types}}
  %0 = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<2x8xbf16>, tensor<8xf32>, tensor<2x8xf32> -> tensor<2x8xbf16>
  return
}

// -----

// The kernels read scale and bias as one type; the front end widens the
// narrower (docs/language.md 12.4).
func.func @norm_scale_bias_types(%x: tensor<2x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xf32>) {
  // expected-error @+2 {{layernorm: scale bf16[8] and bias f32[8] have different element types}}
  // expected-error @+1 {{'loom.layernorm' op failed to infer returned types}}
  %0 = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<2x8xbf16>, tensor<8xbf16>, tensor<8xf32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @norm_scale_rank0(%x: tensor<2x8xbf16>, %g: tensor<f32>) {
  // expected-error @+2 {{rmsnorm: scale/bias f32[] must match the trailing dimensions of the input bf16[2, 8]}}
  // expected-error @+1 {{'loom.rmsnorm' op failed to infer returned types}}
  %0 = loom.rmsnorm %x, %g eps = 1.0e-05 : tensor<2x8xbf16>, tensor<f32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @norm_scale_too_big(%x: tensor<2x8xbf16>, %g: tensor<3x2x8xf32>) {
  // expected-error @+2 {{rmsnorm: scale/bias f32[3, 2, 8] must match the trailing dimensions of the input bf16[2, 8]}}
  // expected-error @+1 {{'loom.rmsnorm' op failed to infer returned types}}
  %0 = loom.rmsnorm %x, %g eps = 1.0e-05 : tensor<2x8xbf16>, tensor<3x2x8xf32> -> tensor<2x8xbf16>
  return
}

// -----

func.func @norm_scale_dtype(%x: tensor<2x8xbf16>, %g: tensor<8xf16>) {
  // expected-error @+2 {{rmsnorm: scale/bias element type f16 must be the input's (bf16) or f32}}
  // expected-error @+1 {{'loom.rmsnorm' op failed to infer returned types}}
  %0 = loom.rmsnorm %x, %g eps = 1.0e-05 : tensor<2x8xbf16>, tensor<8xf16> -> tensor<2x8xbf16>
  return
}

// -----

func.func @reduce_out_of_range(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{sum: dimension 2 is out of range for a rank-2 value}}
  // expected-error @+1 {{'loom.sum' op failed to infer returned types}}
  %0 = loom.sum %x dims = [2] : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_negative(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{max: dimension -1 is out of range for a rank-2 value}}
  // expected-error @+1 {{'loom.max' op failed to infer returned types}}
  %0 = loom.max %x dims = [-1] : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @reduce_unsorted(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{mean: reduced dimensions must be sorted and distinct}}
  // expected-error @+1 {{'loom.mean' op failed to infer returned types}}
  %0 = loom.mean %x dims = [1, 0] : tensor<2x8xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_repeated(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{max: reduced dimensions must be sorted and distinct}}
  // expected-error @+1 {{'loom.max' op failed to infer returned types}}
  %0 = loom.max %x dims = [1, 1] : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @mean_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{'loom.mean' op operand #0 must be statically shaped tensor of 32-bit float or bfloat16 type or 16-bit float values, but got 'tensor<4xi32>'}}
  %0 = loom.mean %x dims = [0] : tensor<4xi32> -> tensor<i32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @reshape_element_type(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'loom.reshape' op changes the element type from f32 to bf16; use loom.cast}}
  %0 = loom.reshape %x : tensor<2x4xf32> -> tensor<8xbf16>
  return
}

// -----

func.func @reshape_element_count(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{'loom.reshape' op cannot reshape f32[2, 4] (8 elements) to f32[3, 3] (9 elements)}}
  %0 = loom.reshape %x : tensor<2x4xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @transpose_length(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{transpose: permutation has 3 entries for a rank-2 value}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm = [1, 0, 2] : tensor<2x8xf32> -> tensor<8x2xf32>
  return
}

// -----

func.func @transpose_repeated(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{transpose: [0, 0] is not a permutation of 0..1}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm = [0, 0] : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @transpose_out_of_range(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{transpose: [0, 2] is not a permutation of 0..1}}
  // expected-error @+1 {{'loom.transpose' op failed to infer returned types}}
  %0 = loom.transpose %x perm = [0, 2] : tensor<2x8xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @concat_empty() {
  // expected-error @+2 {{concat needs at least one operand}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat dim = 0 : () -> tensor<2xf32>
  return
}

// -----

func.func @concat_dim(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{concat: dimension 2 is out of range for a rank-2 value}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %x, %x dim = 2 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_element_type(%x: tensor<2x8xf32>, %y: tensor<2x8xbf16>) {
  // expected-error @+2 {{concat: operands have element types f32 and bf16}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %x, %y dim = 1 : (tensor<2x8xf32>, tensor<2x8xbf16>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_shape(%x: tensor<2x8xf32>, %y: tensor<3x8xf32>) {
  // expected-error @+2 {{concat: f32[2, 8] and f32[3, 8] differ outside dimension 1}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %x, %y dim = 1 : (tensor<2x8xf32>, tensor<3x8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_rank(%x: tensor<2x8xf32>, %y: tensor<8xf32>) {
  // expected-error @+2 {{concat: f32[2, 8] and f32[8] differ outside dimension 0}}
  // expected-error @+1 {{'loom.concat' op failed to infer returned types}}
  %0 = loom.concat %x, %y dim = 0 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @split_dim(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{split: dimension 2 is out of range for a rank-2 value}}
  // expected-error @+1 {{'loom.split' op failed to infer returned types}}
  %0:2 = loom.split %x dim = 2 sizes = [1, 1] : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x8xf32>
  return
}

// -----

func.func @split_empty_piece(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{split: piece sizes must be positive, got 0}}
  // expected-error @+1 {{'loom.split' op failed to infer returned types}}
  %0:2 = loom.split %x dim = 1 sizes = [8, 0] : tensor<2x8xf32> -> tensor<2x8xf32>, tensor<2x0xf32>
  return
}

// -----

func.func @split_sum(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{split: piece sizes add up to 7 but dimension 1 of f32[2, 8] is 8}}
  // expected-error @+1 {{'loom.split' op failed to infer returned types}}
  %0:2 = loom.split %x dim = 1 sizes = [3, 4] : tensor<2x8xf32> -> tensor<2x3xf32>, tensor<2x4xf32>
  return
}

// -----

func.func @slice_rank(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice: bounds must have one entry per dimension of f32[2, 8]}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %x [0] to [2] : tensor<2x8xf32> -> tensor<2xf32>
  return
}

// -----

func.func @slice_empty(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice: [4, 4) is not a non-empty range inside dimension 1 of size 8}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %x [0, 4] to [2, 4] : tensor<2x8xf32> -> tensor<2x0xf32>
  return
}

// -----

func.func @slice_past_end(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice: [4, 9) is not a non-empty range inside dimension 1 of size 8}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %x [0, 4] to [2, 9] : tensor<2x8xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @slice_negative_start(%x: tensor<2x8xf32>) {
  // expected-error @+2 {{slice: [-1, 2) is not a non-empty range inside dimension 0 of size 2}}
  // expected-error @+1 {{'loom.slice' op failed to infer returned types}}
  %0 = loom.slice %x [-1, 0] to [2, 8] : tensor<2x8xf32> -> tensor<3x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Model-level ops
//===----------------------------------------------------------------------===//

func.func @embedding_table_rank(%ids: tensor<4xi32>, %t: tensor<16xf32>) {
  // expected-error @+2 {{embedding: the table must be [V, D], got f32[16]}}
  // expected-error @+1 {{'loom.embedding' op failed to infer returned types}}
  %0 = loom.embedding %ids, %t : tensor<4xi32>, tensor<16xf32> -> tensor<4xf32>
  return
}

// -----

func.func @embedding_float_ids(%ids: tensor<4xf32>, %t: tensor<16x8xf32>) {
  // expected-error @+1 {{'loom.embedding' op operand #0 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<4xf32>'}}
  %0 = loom.embedding %ids, %t : tensor<4xf32>, tensor<16x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<4x8xf32>, %k: tensor<4x8xf32>, %v: tensor<8xf32>) {
  // expected-error @+2 {{attention: q, k and v must have the same rank (2 or more), got f32[4, 8], f32[4, 8], f32[8]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %k, %v scale = 1.0 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_vectors(%q: tensor<8xf32>) {
  // expected-error @+2 {{attention: q, k and v must have the same rank (2 or more), got f32[8], f32[8], f32[8]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %q, %q scale = 1.0 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
  return
}

// -----

func.func @attention_element_type(%q: tensor<4x8xf32>, %k: tensor<4x8xbf16>) {
  // expected-error @+2 {{attention: q, k and v must share an element type, got f32[4, 8], bf16[4, 8], bf16[4, 8]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %k, %k scale = 1.0 : tensor<4x8xf32>, tensor<4x8xbf16>, tensor<4x8xbf16> -> tensor<4x8xf32>
  return
}

// -----

func.func @attention_batch(%q: tensor<2x4x8xf32>, %k: tensor<3x4x8xf32>) {
  // expected-error @+2 {{attention: batch dimensions differ: f32[2, 4, 8], f32[3, 4, 8], f32[3, 4, 8]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %k, %k scale = 1.0 : tensor<2x4x8xf32>, tensor<3x4x8xf32>, tensor<3x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// -----

func.func @attention_head_dim(%q: tensor<4x8xf32>, %k: tensor<4x16xf32>) {
  // expected-error @+2 {{attention: q and k head dimensions differ: f32[4, 8] vs f32[4, 16]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %k, %k scale = 1.0 : tensor<4x8xf32>, tensor<4x16xf32>, tensor<4x16xf32> -> tensor<4x16xf32>
  return
}

// -----

func.func @attention_sequence(%q: tensor<4x8xf32>, %k: tensor<6x8xf32>, %v: tensor<5x8xf32>) {
  // expected-error @+2 {{attention: k and v sequence lengths differ: f32[6, 8] vs f32[5, 8]}}
  // expected-error @+1 {{'loom.attention' op failed to infer returned types}}
  %0 = loom.attention %q, %k, %v scale = 1.0 : tensor<4x8xf32>, tensor<6x8xf32>, tensor<5x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @cross_entropy_scalar_logits(%l: tensor<f32>, %t: tensor<i32>) {
  // expected-error @+2 {{cross_entropy: logits must be a float tensor [..., V], got f32[]}}
  // expected-error @+1 {{'loom.cross_entropy' op failed to infer returned types}}
  %0 = loom.cross_entropy %l, %t : tensor<f32>, tensor<i32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_targets_shape(%l: tensor<2x16xf32>, %t: tensor<4xi32>) {
  // expected-error @+2 {{cross_entropy: targets i32[4] must have the shape of logits f32[2, 16] without its last dimension}}
  // expected-error @+1 {{'loom.cross_entropy' op failed to infer returned types}}
  %0 = loom.cross_entropy %l, %t : tensor<2x16xf32>, tensor<4xi32> -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_float_targets(%l: tensor<2x16xf32>, %t: tensor<2xf32>) {
  // expected-error @+1 {{'loom.cross_entropy' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<2xf32>'}}
  %0 = loom.cross_entropy %l, %t : tensor<2x16xf32>, tensor<2xf32> -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.repeat and loom.yield
//===----------------------------------------------------------------------===//

func.func @repeat_zero(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op count must be positive, got 0}}
  %0 = loom.repeat 0 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_negative(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op count must be positive, got -1}}
  %0 = loom.repeat -1 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_arg_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body takes 2 argument(s), expected 1 carried + 0 stacked}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

// RepeatOp::verify runs before the RegionBranchOpInterface checks, so
// malformed repeats are reported in the op's own words.
func.func @repeat_carried_arg_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body argument 0 has type 'tensor<8xbf16>', expected the carried type 'tensor<8xf32>'}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xbf16>):
    loom.yield %x : tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_stacked_leading_dim(%w: tensor<3x8xf32>) {
  // expected-error @+1 {{'loom.repeat' op stacked operand 0 of type 'tensor<3x8xf32>' must have a leading dimension of size 4}}
  %0 = loom.repeat 4 stacked(%w : tensor<3x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_stacked_scalar(%w: tensor<f32>) {
  // expected-error @+1 {{'loom.repeat' op stacked operand 0 of type 'tensor<f32>' must have a leading dimension of size 4}}
  loom.repeat 4 stacked(%w : tensor<f32>) {
  ^bb0(%a: tensor<f32>):
    loom.yield
  }
  return
}

// -----

func.func @repeat_slice_type(%w: tensor<4x8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body argument 0 has type 'tensor<4x8xf32>', expected the slice type 'tensor<8xf32>'}}
  %0 = loom.repeat 4 stacked(%w : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    loom.yield %a : tensor<4x8xf32>
  }
  return
}

// -----

func.func @repeat_yield_count(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body yields 2 value(s) for 1 result(s)}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a, %a : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// The carried value changes type across iterations (yield -> body).
func.func @repeat_carried_yield_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op carried value 0 changes type across iterations: 'tensor<8xf32>' in, 'tensor<8xbf16>' yielded, 'tensor<8xf32>' returned}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    %1 = loom.cast %a : tensor<8xf32> -> tensor<8xbf16>
    loom.yield %1 : tensor<8xbf16>
  }
  return
}

// -----

// The carried value is returned with another type (yield -> parent).
func.func @repeat_carried_result_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op carried value 0 changes type across iterations: 'tensor<8xf32>' in, 'tensor<8xf32>' yielded, 'tensor<8xbf16>' returned}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xbf16> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

// Fewer results, or yielded values, than carried values (the interface
// used to crash on these).
func.func @repeat_fewer_results_than_carried(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op has fewer results than carried values}}
  loom.repeat 2 carried(%x : tensor<8xf32>) {
  ^bb0(%a: tensor<8xf32>):
    loom.yield
  }
  return
}

// -----

func.func @repeat_one_result_two_carried(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body yields 2 value(s) for 1 result(s)}}
  %0 = loom.repeat 2 carried(%x, %y : tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    loom.yield %a, %b : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_yield_fewer_than_carried(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op body yields 1 value(s) for 2 result(s)}}
  %0:2 = loom.repeat 2 carried(%x, %y : tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>, tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf32>):
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @repeat_stacked_result_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.repeat' op stacked result 1 has type 'tensor<8xf32>', expected 'tensor<2x8xf32>'}}
  %0:2 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32>, tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>):
    loom.yield %a, %a : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

func.func @yield_outside_repeat(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.yield' op expects parent op to be one of 'loom.repeat, loom.start, loom.fused, loom.combined'}}
  loom.yield %x : tensor<8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.train
//===----------------------------------------------------------------------===//

func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op unknown optimizer 'adam', expected sgd or adamw}}
loom.train @M optimizer = "adam"

// -----

func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op ZeRO stage must be 0, 1, 2 or 3, got 4}}
loom.train @M optimizer = "sgd" {zero_stage = 4 : i64}

// -----

func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op microbatches must be positive, got 0}}
loom.train @M optimizer = "sgd" {microbatches = 0 : i64}

// -----

// zero_stage and microbatches are read as signed numbers.
func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op microbatches must be positive, got -1}}
loom.train @M optimizer = "sgd" {microbatches = -1 : i64}

// -----

func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op ZeRO stage must be 0, 1, 2 or 3, got -1}}
loom.train @M optimizer = "sgd" {zero_stage = -1 : i64}

// -----

func.func @M() {
  return
}
// expected-error @+1 {{'loom.train' op refers to @M, which is not a Loom model}}
loom.train @M optimizer = "sgd"

// -----

// expected-error @+1 {{'loom.train' op refers to @Missing, which is not a Loom model}}
loom.train @Missing optimizer = "sgd"

// -----

loom.mesh @M ["dp" = 2]
// expected-error @+1 {{'loom.train' op refers to @M, which is not a Loom model}}
loom.train @M optimizer = "sgd"

// -----

// Hyper-parameters are numbers (or lists of them, as betas), precisions
// float types, and the named axes a mesh's.
func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op hyper-parameter 'lr' must be a number or a list of numbers, not "x"}}
loom.train @M optimizer = "sgd" {hyper = {lr = "x"}}

// -----

func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op compute_type must be a float type, not 'i32'}}
loom.train @M optimizer = "sgd" {compute_type = i32}

// -----

loom.mesh @m ["dp" = 2]
func.func @M() attributes {loom.model} {
  return
}
// expected-error @+1 {{'loom.train' op names the mesh axis 'zz', which no loom.mesh of the module has}}
loom.train @M optimizer = "sgd" {zero_axes = ["zz"]}

// -----

//===----------------------------------------------------------------------===//
// Vocabulary split over a group: loom.embedding and loom.pick
//===----------------------------------------------------------------------===//

loom.mesh @m ["tp" = 2]
func.func @embedding_vocab_empty(%ids: tensor<4xi32>, %t: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.embedding' op vocabulary axes must not be empty}}
  %0 = loom.embedding %ids, %t vocab on @m [] : tensor<4xi32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @embedding_vocab_no_mesh(%ids: tensor<4xi32>, %t: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.embedding' op needs both a mesh and vocabulary axes, or neither}}
  %0 = "loom.embedding"(%ids, %t) {vocab_axes = ["tp"]} : (tensor<4xi32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

loom.mesh @m ["tp" = 2]
func.func @embedding_vocab_unknown_axis(%ids: tensor<4xi32>, %t: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.embedding' op runs over axis 'tq', which mesh @m does not have}}
  %0 = loom.embedding %ids, %t vocab on @m ["tq"] : tensor<4xi32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

func.func @embedding_vocab_unknown_mesh(%ids: tensor<4xi32>, %t: tensor<8x4xf32>) {
  // expected-error @+1 {{'loom.embedding' op refers to unknown mesh @nowhere}}
  %0 = loom.embedding %ids, %t vocab on @nowhere ["tp"] : tensor<4xi32>, tensor<8x4xf32> -> tensor<4x4xf32>
  return
}

// -----

loom.mesh @m ["pp" = 2, "tp" = 2] manual ["pp"]
func.func @pick_vocab_manual(%x: tensor<4x8xf32>, %t: tensor<4xi32>) {
  // expected-error @+1 {{'loom.pick' op cannot run over the manual axis 'pp'}}
  %0 = loom.pick %x, %t vocab on @m ["pp"] : tensor<4x8xf32>, tensor<4xi32> -> tensor<4xf32>
  return
}

// -----

func.func @pick_targets_shape(%x: tensor<4x8xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{'loom.pick' op targets i32[8] must have the shape of logits f32[4, 8] without its last dimension}}
  %0 = loom.pick %x, %t : tensor<4x8xf32>, tensor<8xi32> -> tensor<8xf32>
  return
}

// -----

func.func @pick_result_shape(%x: tensor<4x8xf32>, %t: tensor<4xi32>) {
  // expected-error @+1 {{'loom.pick' op result must have the shape of the targets}}
  %0 = loom.pick %x, %t : tensor<4x8xf32>, tensor<4xi32> -> tensor<4x1xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attributes of partitioning: loom.body_shardings, loom.reason, loom.spmd
//===----------------------------------------------------------------------===//

loom.mesh @m ["dp" = 2]
func.func @body_shardings_count(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.body_shardings' must list one #loom.sharding per body argument of a loom.repeat}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> attributes {loom.body_shardings = []} {
  ^bb0(%c: tensor<8xf32>):
    loom.yield %c : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @m ["dp" = 2]
func.func @body_shardings_on_other_op(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.body_shardings' must list one #loom.sharding per body argument of a loom.repeat}}
  %0 = loom.relu %x {loom.body_shardings = [#loom.sharding<@m, [{}]>]} : tensor<8xf32>
  return
}

// -----

loom.mesh @m ["dp" = 2]
func.func @body_shardings_not_sharding(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{'loom.body_shardings' must list #loom.sharding attributes}}
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) -> tensor<8xf32> attributes {loom.body_shardings = ["dp"]} {
  ^bb0(%c: tensor<8xf32>):
    loom.yield %c : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// -----

loom.mesh @m ["dp" = 2]
func.func @body_shardings_indivisible(%x: tensor<3xf32>) -> tensor<3xf32> {
  // expected-error @+1 {{dimension 0 of size 3 is not divisible by 2, the number of devices it is split over; pad it to 4}}
  %0 = loom.repeat 2 carried(%x : tensor<3xf32>) -> tensor<3xf32> attributes {loom.body_shardings = [#loom.sharding<@m, [{"dp"}]>]} {
  ^bb0(%c: tensor<3xf32>):
    loom.yield %c : tensor<3xf32>
  }
  return %0 : tensor<3xf32>
}

// -----

func.func @reason_not_dictionary(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.reason' must be a dictionary}}
  %0 = loom.relu %x {loom.reason = "because"} : tensor<8xf32>
  return
}

// -----

func.func @spmd_on_op(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.spmd' is a unit attribute of functions}}
  %0 = loom.relu %x {loom.spmd} : tensor<8xf32>
  return
}

// -----

// In a partitioned model, types are per device: argument shardings are not
// checked for divisibility (a [3] piece of a [6] value split over dp is
// fine), but their axes still are.
loom.mesh @m ["dp" = 2]
// expected-error @+1 {{sharding uses axis "tp" which mesh @m does not have}}
func.func @spmd_axes(%x: tensor<3xf32> {loom.sharding = #loom.sharding<@m, [{"dp"}]>},
                     %y: tensor<3xf32> {loom.sharding = #loom.sharding<@m, [{"tp"}]>}) attributes {loom.spmd} {
  return
}

// -----

// Fusion groups hold element-wise ops over the group's iteration space.
func.func @fused_reduction(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.fused(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    // expected-error @+1 {{'loom.softmax' op cannot be part of a fusion group: only element-wise ops and scalar constants can, and one reduction at its end}}
    %1 = loom.softmax %a dim = 1 : tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fused_shape(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %0 = loom.fused(%x, %b : tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    // expected-error @+1 {{'loom.exp' op result shape 'tensor<8xf32>' differs from the fusion group's iteration space 'tensor<4x8xf32>'}}
    %1 = loom.exp %c : tensor<8xf32>
    %2 = loom.add %a, %1 : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
    loom.yield %2 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fused_arguments(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'loom.fused' op body argument 0 has type 'tensor<4x8xbf16>', expected the input's type 'tensor<4x8xf32>'}}
  %0 = loom.fused(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xbf16>):
    %1 = loom.cast %a : tensor<4x8xbf16> -> tensor<4x8xf32>
    loom.yield %1 : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fused_yield(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'loom.fused' op body must yield one value of the result type 'tensor<4x8xf32>'}}
  %0 = loom.fused(%x : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>):
    loom.yield %a, %a : tensor<4x8xf32>, tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// The memory plan's attributes.
// expected-error @+1 {{'loom.arena_bytes' is a non-negative integer on a function}}
func.func @arena(%x: tensor<4xf32>) attributes {loom.arena_bytes = -4 : i64} {
  return
}

// -----

// expected-error @+1 {{'loom.arena_bound' is a non-negative integer on a function}}
func.func @bound(%x: tensor<4xf32>) attributes {loom.arena_bound = "x"} {
  return
}

// -----

func.func @offsets(%x: tensor<4xf32>) {
  // expected-error @+1 {{'loom.offsets' must list one arena offset per result (1)}}
  %0 = loom.relu %x {loom.offsets = array<i64: 0, 64>} : tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{'loom.scratch_offset' is a non-negative integer on a loom.repeat}}
func.func @scratch(%x: tensor<4xf32>) attributes {loom.scratch_offset = 0 : i64} {
  return
}

// -----

// expected-error @+1 {{'loom.offset' must be a non-negative arena offset}}
func.func @offset(%x: tensor<4xf32> {loom.offset = -2 : i64}) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// loom.add_norm
//===----------------------------------------------------------------------===//

func.func @add_norm_types(%a: tensor<4x8xbf16>, %b: tensor<4x8xf32>, %g: tensor<8xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add_norm' op needs addends, sum and result of one type, got bf16[4, 8] and f32[4, 8]}}
  %s, %y = loom.add_norm %a, %b, %g, %c eps = 1.0e-05 : tensor<4x8xbf16>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  return
}

// -----

func.func @add_norm_rms_bias(%a: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add_norm' op with `rms` takes no bias}}
  %s, %y = loom.add_norm %a, %a, %g, %g eps = 1.0e-05 rms : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @add_norm_no_bias(%a: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add_norm' op needs a bias (or `rms`)}}
  %s, %y = loom.add_norm %a, %a, %g eps = 1.0e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @add_norm_plus_length(%a: tensor<4x8xbf16>, %c: tensor<4xbf16>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add_norm' op needs `plus` a vector of the addends' element type over their last dimension, got bf16[4] for addends bf16[4, 8]}}
  %s, %y = loom.add_norm %a, %a plus %c, %g eps = 1.0e-05 rms : tensor<4x8xbf16>, tensor<4x8xbf16> plus tensor<4xbf16>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  return
}

// -----

func.func @add_norm_plus_type(%a: tensor<4x8xbf16>, %c: tensor<8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'loom.add_norm' op needs `plus` a vector of the addends' element type over their last dimension, got f32[8] for addends bf16[4, 8]}}
  %s, %y = loom.add_norm %a, %a plus %c, %g eps = 1.0e-05 rms : tensor<4x8xbf16>, tensor<4x8xbf16> plus tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  return
}

// -----

func.func @add_norm_scale(%a: tensor<4x8xf32>, %g: tensor<4xf32>) {
  // expected-error @+1 {{layernorm: scale/bias f32[4] must match the trailing dimensions of the input f32[4, 8]}}
  %s, %y = loom.add_norm %a, %a, %g, %g eps = 1.0e-05 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>, tensor<4xf32> -> tensor<4x8xf32>, tensor<4x8xf32>
  return
}
