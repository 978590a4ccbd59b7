// RUN: loom-opt %s | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | loom-opt | FileCheck %s
// RUN: loom-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every Loom op through the custom and the generic form.

// CHECK: loom.mesh @mesh ["dp" = 2, "tp" = 4]{{$}}
loom.mesh @mesh ["dp" = 2, "tp" = 4]
// CHECK: loom.mesh @pipe ["pp" = 2, "dp" = 2] manual ["pp"]{{$}}
loom.mesh @pipe ["pp" = 2, "dp" = 2] manual ["pp"]

// CHECK-LABEL: func.func @shard(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK:         %[[S:.*]] = loom.shard %[[X]] as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
// CHECK:         return %[[S]]
func.func @shard(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.shard %x as <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @constant(
// CHECK:         %[[F:.*]] = loom.constant dense<5.000000e-01> : tensor<bf16>
// CHECK:         %[[I:.*]] = loom.constant dense<[1, 2]> : tensor<2xi32>
// CHECK:         return %[[F]], %[[I]]
func.func @constant() -> (tensor<bf16>, tensor<2xi32>) {
  %0 = loom.constant dense<5.000000e-01> : tensor<bf16>
  %1 = loom.constant dense<[1, 2]> : tensor<2xi32>
  return %0, %1 : tensor<bf16>, tensor<2xi32>
}

// Broadcasting ([4, 8] with [8], [4, 1] with [4, 8]) and f32 + bf16
// promotion to f32.
// CHECK-LABEL: func.func @binary(
// CHECK-SAME:      %[[A:[^:]*]]: tensor<4x8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[C:[^:]*]]: tensor<4x1xbf16>, %[[I:[^:]*]]: tensor<4xi32>)
// CHECK:         loom.add %[[A]], %[[B]] : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
// CHECK:         loom.sub %[[C]], %[[A]] : tensor<4x1xbf16>, tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK:         loom.mul %[[B]], %[[C]] : tensor<8xf32>, tensor<4x1xbf16> -> tensor<4x8xf32>
// CHECK:         loom.div %[[I]], %[[I]] : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xbf16>, %i: tensor<4xi32>) {
  %0 = loom.add %a, %b : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %1 = loom.sub %c, %a : tensor<4x1xbf16>, tensor<4x8xf32> -> tensor<4x8xf32>
  %2 = loom.mul %b, %c : tensor<8xf32>, tensor<4x1xbf16> -> tensor<4x8xf32>
  %3 = loom.div %i, %i : tensor<4xi32>, tensor<4xi32> -> tensor<4xi32>
  return
}

// CHECK-LABEL: func.func @unary(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<4x8xbf16>, %[[I:[^:]*]]: tensor<4xi64>)
// CHECK:         loom.relu %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.silu %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.tanh %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.sigmoid %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.exp %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.log %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.sqrt %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.rsqrt %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.neg %[[X]] : tensor<4x8xbf16>
// CHECK:         loom.neg %[[I]] : tensor<4xi64>
func.func @unary(%x: tensor<4x8xbf16>, %i: tensor<4xi64>) {
  %0 = loom.relu %x : tensor<4x8xbf16>
  %1 = loom.silu %x : tensor<4x8xbf16>
  %2 = loom.tanh %x : tensor<4x8xbf16>
  %3 = loom.sigmoid %x : tensor<4x8xbf16>
  %4 = loom.exp %x : tensor<4x8xbf16>
  %5 = loom.log %x : tensor<4x8xbf16>
  %6 = loom.sqrt %x : tensor<4x8xbf16>
  %7 = loom.rsqrt %x : tensor<4x8xbf16>
  %8 = loom.neg %x : tensor<4x8xbf16>
  %9 = loom.neg %i : tensor<4xi64>
  return
}

// `approximate none` is the default and is not printed; in the generic form
// the approximation is an integer (0 or 1).
// CHECK-LABEL: func.func @gelu(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf16>)
// CHECK-NEXT:    loom.gelu %[[X]] : tensor<4x8xf16>
// CHECK-NEXT:    loom.gelu %[[X]] : tensor<4x8xf16>
// CHECK-NEXT:    loom.gelu %[[X]] approximate tanh : tensor<4x8xf16>
// CHECK-NEXT:    loom.gelu %[[X]] approximate tanh : tensor<4x8xf16>
// CHECK-NEXT:    return
// GENERIC-LABEL: sym_name = "gelu"
// GENERIC-COUNT-2: "loom.gelu"(%{{.*}}) <{approximate = 0 : i32}>
// GENERIC-COUNT-2: "loom.gelu"(%{{.*}}) <{approximate = 1 : i32}>
// GENERIC-NOT:   "loom.gelu"
func.func @gelu(%x: tensor<4x8xf16>) {
  %0 = loom.gelu %x : tensor<4x8xf16>
  %1 = loom.gelu %x approximate none : tensor<4x8xf16>
  %2 = loom.gelu %x approximate tanh : tensor<4x8xf16>
  %3 = "loom.gelu"(%x) <{approximate = 1 : i32}> : (tensor<4x8xf16>) -> tensor<4x8xf16>
  return
}

// CHECK-LABEL: func.func @cast(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>)
// CHECK:         loom.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xbf16>
// CHECK:         loom.cast %[[X]] : tensor<4x8xf32> -> tensor<4x8xi32>
func.func @cast(%x: tensor<4x8xf32>) {
  %0 = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
  %1 = loom.cast %x : tensor<4x8xf32> -> tensor<4x8xi32>
  return
}

// A batched lhs against a matrix, and batch dimensions [2, 1] x [3] that
// broadcast to [2, 3].
// CHECK-LABEL: func.func @matmul(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x16x32xbf16>, %[[W:[^:]*]]: tensor<32x64xbf16>, %[[A:[^:]*]]: tensor<2x1x4x8xf32>, %[[B:[^:]*]]: tensor<3x8x5xf32>)
// CHECK:         loom.matmul %[[X]], %[[W]] : tensor<8x16x32xbf16>, tensor<32x64xbf16> -> tensor<8x16x64xbf16>
// CHECK:         loom.matmul %[[A]], %[[B]] : tensor<2x1x4x8xf32>, tensor<3x8x5xf32> -> tensor<2x3x4x5xf32>
func.func @matmul(%x: tensor<8x16x32xbf16>, %w: tensor<32x64xbf16>, %a: tensor<2x1x4x8xf32>, %b: tensor<3x8x5xf32>) {
  %0 = loom.matmul %x, %w : tensor<8x16x32xbf16>, tensor<32x64xbf16> -> tensor<8x16x64xbf16>
  %1 = loom.matmul %a, %b : tensor<2x1x4x8xf32>, tensor<3x8x5xf32> -> tensor<2x3x4x5xf32>
  return
}

// CHECK-LABEL: func.func @einsum(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[W:[^:]*]]: tensor<8x2x4xf32>)
// CHECK:         loom.einsum "bsd,dhe->bhse" %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8x2x4xf32>) -> tensor<2x2x4x4xf32>
// CHECK:         loom.einsum "bsd->dsb" %[[X]] : (tensor<2x4x8xf32>) -> tensor<8x4x2xf32>
func.func @einsum(%x: tensor<2x4x8xf32>, %w: tensor<8x2x4xf32>) {
  %0 = loom.einsum "bsd,dhe->bhse" %x, %w : (tensor<2x4x8xf32>, tensor<8x2x4xf32>) -> tensor<2x2x4x4xf32>
  %1 = loom.einsum "bsd->dsb" %x : (tensor<2x4x8xf32>) -> tensor<8x4x2xf32>
  return
}

// CHECK-LABEL: func.func @batched_einsum(
// CHECK:         %{{.*}}:2 = loom.batched_einsum "bsd,de->bse" %arg0, %arg1, %arg2 : tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
func.func @batched_einsum(%x: tensor<2x4x8xbf16>, %a: tensor<8x8xbf16>, %b: tensor<8x8xbf16>) {
  %0:2 = loom.batched_einsum "bsd,de->bse" %x, %a, %b : tensor<2x4x8xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>, tensor<2x4x8xbf16>
  return
}

// CHECK-LABEL: func.func @add_norm(
// CHECK:         loom.add_norm %arg0, %arg1, %arg2, %arg3 eps = 1.000000e-05 : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK:         loom.add_norm %arg0, %arg1, %arg2 eps = 1.000000e-05 rms : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
// CHECK:         loom.add_norm %arg0, %arg1 plus %{{.*}}, %arg2, %arg3 eps = 1.000000e-05 : tensor<4x8xbf16>, tensor<4x8xbf16> plus tensor<8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
func.func @add_norm(%x: tensor<4x8xbf16>, %a: tensor<4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>) {
  %s, %y = loom.add_norm %x, %a, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  %t, %z = loom.add_norm %x, %a, %g eps = 1.0e-05 rms : tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  %c = loom.slice %a [0, 0] to [1, 8] : tensor<4x8xbf16> -> tensor<1x8xbf16>
  %cv = loom.reshape %c : tensor<1x8xbf16> -> tensor<8xbf16>
  %u, %w = loom.add_norm %x, %a plus %cv, %g, %b eps = 1.0e-05 : tensor<4x8xbf16>, tensor<4x8xbf16> plus tensor<8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<4x8xbf16>, tensor<4x8xbf16>
  return
}

// CHECK-LABEL: func.func @softmax(
// CHECK-SAME:      %[[X:.*]]: tensor<4x8xf32>)
// CHECK:         loom.softmax %[[X]] dim = 1 : tensor<4x8xf32>
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.softmax %x dim = 1 : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// Scale and bias may be f32 or the input's element type, one type for both
// (invalid.mlir: @norm_scale_bias_types).
// CHECK-LABEL: func.func @norms(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4x8xbf16>, %[[G:[^:]*]]: tensor<8xf32>, %[[B:[^:]*]]: tensor<8xf32>, %[[H:[^:]*]]: tensor<8xbf16>)
// CHECK:         loom.layernorm %[[X]], %[[G]], %[[B]] eps = 1.000000e-05 : tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xbf16>
// CHECK:         loom.layernorm %[[X]], %[[H]], %[[H]] eps = 1.000000e-05 : tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<2x4x8xbf16>
// CHECK:         loom.rmsnorm %[[X]], %[[G]] eps = 9.9999999999999995E-7 : tensor<2x4x8xbf16>, tensor<8xf32> -> tensor<2x4x8xbf16>
func.func @norms(%x: tensor<2x4x8xbf16>, %g: tensor<8xf32>, %b: tensor<8xf32>, %h: tensor<8xbf16>) {
  %0 = loom.layernorm %x, %g, %b eps = 1.0e-05 : tensor<2x4x8xbf16>, tensor<8xf32>, tensor<8xf32> -> tensor<2x4x8xbf16>
  %1 = loom.layernorm %x, %h, %h eps = 1.0e-05 : tensor<2x4x8xbf16>, tensor<8xbf16>, tensor<8xbf16> -> tensor<2x4x8xbf16>
  %2 = loom.rmsnorm %x, %g eps = 1.0e-06 : tensor<2x4x8xbf16>, tensor<8xf32> -> tensor<2x4x8xbf16>
  return
}

// CHECK-LABEL: func.func @reduce(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[I:[^:]*]]: tensor<4x8xi32>)
// CHECK:         loom.sum %[[X]] dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
// CHECK:         loom.sum %[[I]] dims = [0, 1] keepdim : tensor<4x8xi32> -> tensor<1x1xi32>
// CHECK:         loom.mean %[[X]] dims = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
// CHECK:         loom.mean %[[X]] dims = [2] keepdim : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK:         loom.max %[[X]] dims = [0] : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK:         loom.max %[[I]] dims = [1] keepdim : tensor<4x8xi32> -> tensor<4x1xi32>
// CHECK:         loom.sum %[[X]] dims = [] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
func.func @reduce(%x: tensor<2x4x8xf32>, %i: tensor<4x8xi32>) {
  %0 = loom.sum %x dims = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %1 = loom.sum %i dims = [0, 1] keepdim : tensor<4x8xi32> -> tensor<1x1xi32>
  %2 = loom.mean %x dims = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
  %3 = loom.mean %x dims = [2] keepdim : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %4 = loom.max %x dims = [0] : tensor<2x4x8xf32> -> tensor<4x8xf32>
  %5 = loom.max %i dims = [1] keepdim : tensor<4x8xi32> -> tensor<4x1xi32>
  %6 = loom.sum %x dims = [] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return
}

// CHECK-LABEL: func.func @reshape(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK:         loom.reshape %[[X]] : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
func.func @reshape(%x: tensor<2x4x8xf32>) -> tensor<2x4x2x4xf32> {
  %0 = loom.reshape %x : tensor<2x4x8xf32> -> tensor<2x4x2x4xf32>
  return %0 : tensor<2x4x2x4xf32>
}

// CHECK-LABEL: func.func @transpose(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK:         loom.transpose %[[X]] perm = [2, 0, 1] : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
func.func @transpose(%x: tensor<2x4x8xf32>) -> tensor<8x2x4xf32> {
  %0 = loom.transpose %x perm = [2, 0, 1] : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  return %0 : tensor<8x2x4xf32>
}

// CHECK-LABEL: func.func @concat(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x4x8xf32>, %[[Y:[^:]*]]: tensor<2x4x2xf32>)
// CHECK:         loom.concat %[[X]], %[[Y]] dim = 2 : (tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x10xf32>
func.func @concat(%x: tensor<2x4x8xf32>, %y: tensor<2x4x2xf32>) -> tensor<2x4x10xf32> {
  %0 = loom.concat %x, %y dim = 2 : (tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x10xf32>
  return %0 : tensor<2x4x10xf32>
}

// CHECK-LABEL: func.func @split(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK:         %[[P:.*]]:2 = loom.split %[[X]] dim = 2 sizes = [2, 6] : tensor<2x4x8xf32> -> tensor<2x4x2xf32>, tensor<2x4x6xf32>
// CHECK:         return %[[P]]#0, %[[P]]#1
func.func @split(%x: tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x6xf32>) {
  %0:2 = loom.split %x dim = 2 sizes = [2, 6] : tensor<2x4x8xf32> -> tensor<2x4x2xf32>, tensor<2x4x6xf32>
  return %0#0, %0#1 : tensor<2x4x2xf32>, tensor<2x4x6xf32>
}

// CHECK-LABEL: func.func @slice(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4x8xf32>)
// CHECK:         loom.slice %[[X]] [0, 1, 2] to [2, 3, 6] : tensor<2x4x8xf32> -> tensor<2x2x4xf32>
func.func @slice(%x: tensor<2x4x8xf32>) -> tensor<2x2x4xf32> {
  %0 = loom.slice %x [0, 1, 2] to [2, 3, 6] : tensor<2x4x8xf32> -> tensor<2x2x4xf32>
  return %0 : tensor<2x2x4xf32>
}

// CHECK-LABEL: func.func @embedding(
// CHECK-SAME:      %[[IDS:[^:]*]]: tensor<2x4xi32>, %[[T:[^:]*]]: tensor<16x8xbf16>)
// CHECK:         loom.embedding %[[IDS]], %[[T]] : tensor<2x4xi32>, tensor<16x8xbf16> -> tensor<2x4x8xbf16>
func.func @embedding(%ids: tensor<2x4xi32>, %table: tensor<16x8xbf16>) -> tensor<2x4x8xbf16> {
  %0 = loom.embedding %ids, %table : tensor<2x4xi32>, tensor<16x8xbf16> -> tensor<2x4x8xbf16>
  return %0 : tensor<2x4x8xbf16>
}

// The per-device forms the partitioner emits for a vocabulary split over tp.
// CHECK-LABEL: func.func @vocab_split(
// CHECK:         loom.embedding %{{.*}}, %{{.*}} vocab on @vocab_mesh ["tp"] : tensor<2x4xi32>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>
// CHECK:         loom.pick %{{.*}}, %{{.*}} vocab on @vocab_mesh ["tp"] : tensor<2x4x8xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>
// CHECK:         loom.pick %{{.*}}, %{{.*}} : tensor<2x4x8xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>
loom.mesh @vocab_mesh ["tp" = 2]
func.func @vocab_split(%ids: tensor<2x4xi32>, %table: tensor<8x8xbf16>, %logits: tensor<2x4x8xbf16>) -> (tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = loom.embedding %ids, %table vocab on @vocab_mesh ["tp"] : tensor<2x4xi32>, tensor<8x8xbf16> -> tensor<2x4x8xbf16>
  %1 = loom.pick %logits, %ids vocab on @vocab_mesh ["tp"] : tensor<2x4x8xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>
  %2 = loom.pick %logits, %ids : tensor<2x4x8xbf16>, tensor<2x4xi32> -> tensor<2x4xf32>
  return %0, %1, %2 : tensor<2x4x8xbf16>, tensor<2x4xf32>, tensor<2x4xf32>
}

// Keys longer than queries, values wider than keys.
// CHECK-LABEL: func.func @attention(
// CHECK-SAME:      %[[Q:[^:]*]]: tensor<2x2x4x8xbf16>, %[[K:[^:]*]]: tensor<2x2x6x8xbf16>, %[[V:[^:]*]]: tensor<2x2x6x16xbf16>)
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] causal scale = 5.000000e-01 : tensor<2x2x4x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x16xbf16> -> tensor<2x2x4x16xbf16>
// CHECK:         loom.attention %[[Q]], %[[K]], %[[V]] scale = 1.250000e-01 : tensor<2x2x4x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x16xbf16> -> tensor<2x2x4x16xbf16>
func.func @attention(%q: tensor<2x2x4x8xbf16>, %k: tensor<2x2x6x8xbf16>, %v: tensor<2x2x6x16xbf16>) {
  %0 = loom.attention %q, %k, %v causal scale = 5.000000e-01 : tensor<2x2x4x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x16xbf16> -> tensor<2x2x4x16xbf16>
  %1 = loom.attention %q, %k, %v scale = 0.125 : tensor<2x2x4x8xbf16>, tensor<2x2x6x8xbf16>, tensor<2x2x6x16xbf16> -> tensor<2x2x4x16xbf16>
  return
}

// CHECK-LABEL: func.func @cross_entropy(
// CHECK-SAME:      %[[L:[^:]*]]: tensor<2x4x16xbf16>, %[[T:[^:]*]]: tensor<2x4xi64>)
// CHECK:         loom.cross_entropy %[[L]], %[[T]] : tensor<2x4x16xbf16>, tensor<2x4xi64> -> tensor<f32>
func.func @cross_entropy(%logits: tensor<2x4x16xbf16>, %t: tensor<2x4xi64>) -> tensor<f32> {
  %0 = loom.cross_entropy %logits, %t : tensor<2x4x16xbf16>, tensor<2x4xi64> -> tensor<f32>
  return %0 : tensor<f32>
}

// CHECK-LABEL: func.func @repeat_carried(
// CHECK-SAME:      %[[X:.*]]: tensor<8x16xf32>)
// CHECK:         %[[R:.*]] = loom.repeat 3 carried(%[[X]] : tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK:         ^bb0(%[[A:.*]]: tensor<8x16xf32>):
// CHECK:           %[[Y:.*]] = loom.relu %[[A]] : tensor<8x16xf32>
// CHECK:           loom.yield %[[Y]] : tensor<8x16xf32>
// CHECK:         }
// CHECK:         return %[[R]]
func.func @repeat_carried(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.repeat 3 carried(%x : tensor<8x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>):
    %1 = loom.relu %a : tensor<8x16xf32>
    loom.yield %1 : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// CHECK-LABEL: func.func @repeat_carried_stacked(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8x16xf32>, %[[W:[^:]*]]: tensor<4x16x16xf32>)
// CHECK:         %[[R:.*]] = loom.repeat 4 carried(%[[X]] : tensor<8x16xf32>) stacked(%[[W]] : tensor<4x16x16xf32>) -> tensor<8x16xf32> {
// CHECK:         ^bb0(%[[A:[^:]*]]: tensor<8x16xf32>, %[[WI:[^:]*]]: tensor<16x16xf32>):
// CHECK:           %[[Y:.*]] = loom.matmul %[[A]], %[[WI]]
// CHECK:           loom.yield %[[Y]] : tensor<8x16xf32>
// CHECK:         return %[[R]]
func.func @repeat_carried_stacked(%x: tensor<8x16xf32>, %w: tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  %0 = loom.repeat 4 carried(%x : tensor<8x16xf32>) stacked(%w : tensor<4x16x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%a: tensor<8x16xf32>, %wi: tensor<16x16xf32>):
    %1 = loom.matmul %a, %wi : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
    loom.yield %1 : tensor<8x16xf32>
  }
  return %0 : tensor<8x16xf32>
}

// The second yielded value is a per-iteration output, returned stacked.
// CHECK-LABEL: func.func @repeat_stacked_outputs(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8xf32>, %[[W:[^:]*]]: tensor<4x8xf32>)
// CHECK:         %[[R:.*]]:2 = loom.repeat 4 carried(%[[X]] : tensor<8xf32>) stacked(%[[W]] : tensor<4x8xf32>) -> tensor<8xf32>, tensor<4x8xf32> {
// CHECK:         ^bb0(%[[A:[^:]*]]: tensor<8xf32>, %[[WI:[^:]*]]: tensor<8xf32>):
// CHECK:           %[[Y:.*]] = loom.add %[[A]], %[[WI]]
// CHECK:           loom.yield %[[Y]], %[[A]] : tensor<8xf32>, tensor<8xf32>
// CHECK:         return %[[R]]#0, %[[R]]#1
func.func @repeat_stacked_outputs(%x: tensor<8xf32>, %w: tensor<4x8xf32>) -> (tensor<8xf32>, tensor<4x8xf32>) {
  %0:2 = loom.repeat 4 carried(%x : tensor<8xf32>) stacked(%w : tensor<4x8xf32>) -> tensor<8xf32>, tensor<4x8xf32> {
  ^bb0(%a: tensor<8xf32>, %wi: tensor<8xf32>):
    %1 = loom.add %a, %wi : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
    loom.yield %1, %a : tensor<8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<8xf32>, tensor<4x8xf32>
}

// No carried values: a map over the stacked operand.
// CHECK-LABEL: func.func @repeat_stacked_only(
// CHECK-SAME:      %[[W:.*]]: tensor<4x8xf32>)
// CHECK:         %[[R:.*]] = loom.repeat 4 stacked(%[[W]] : tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK:         ^bb0(%[[WI:.*]]: tensor<8xf32>):
// CHECK:           %[[Y:.*]] = loom.exp %[[WI]] : tensor<8xf32>
// CHECK:           loom.yield %[[Y]] : tensor<8xf32>
// CHECK:         return %[[R]]
func.func @repeat_stacked_only(%w: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.repeat 4 stacked(%w : tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%wi: tensor<8xf32>):
    %1 = loom.exp %wi : tensor<8xf32>
    loom.yield %1 : tensor<8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @repeat_nested(
// CHECK-SAME:      %[[X:[^:]*]]: tensor<8xf32>, %[[W:[^:]*]]: tensor<2x3x8xf32>)
// CHECK:         %[[OUTER:.*]] = loom.repeat 2 carried(%[[X]] : tensor<8xf32>) stacked(%[[W]] : tensor<2x3x8xf32>) -> tensor<8xf32> {
// CHECK:         ^bb0(%[[A:[^:]*]]: tensor<8xf32>, %[[WI:[^:]*]]: tensor<3x8xf32>):
// CHECK:           %[[INNER:.*]] = loom.repeat 3 carried(%[[A]] : tensor<8xf32>) stacked(%[[WI]] : tensor<3x8xf32>) -> tensor<8xf32> {
// CHECK:           ^bb0(%[[B:[^:]*]]: tensor<8xf32>, %[[WJ:[^:]*]]: tensor<8xf32>):
// CHECK:             %[[Y:.*]] = loom.mul %[[B]], %[[WJ]]
// CHECK:             loom.yield %[[Y]] : tensor<8xf32>
// CHECK:           }
// CHECK:           loom.yield %[[INNER]] : tensor<8xf32>
// CHECK:         }
// CHECK:         return %[[OUTER]]
func.func @repeat_nested(%x: tensor<8xf32>, %w: tensor<2x3x8xf32>) -> tensor<8xf32> {
  %0 = loom.repeat 2 carried(%x : tensor<8xf32>) stacked(%w : tensor<2x3x8xf32>) -> tensor<8xf32> {
  ^bb0(%a: tensor<8xf32>, %wi: tensor<3x8xf32>):
    %1 = loom.repeat 3 carried(%a : tensor<8xf32>) stacked(%wi : tensor<3x8xf32>) -> tensor<8xf32> {
    ^bb0(%b: tensor<8xf32>, %wj: tensor<8xf32>):
      %2 = loom.mul %b, %wj : tensor<8xf32>, tensor<8xf32> -> tensor<8xf32>
      loom.yield %2 : tensor<8xf32>
    }
    loom.yield %1 : tensor<8xf32>
  }
  return %0 : tensor<8xf32>
}

// A body with nothing to carry or yield: the empty yield is implicit.
// CHECK-LABEL: func.func @repeat_empty(
// CHECK:         loom.repeat 2 {
// CHECK-NEXT:    }
func.func @repeat_empty() {
  loom.repeat 2 {
  ^bb0:
    loom.yield
  }
  return
}

// CHECK-LABEL: func.func @GPT(
// CHECK-SAME:      attributes {loom.model}
func.func @GPT(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.model} {
  return %x : tensor<8xf32>
}

// CHECK: loom.train @GPT optimizer = "adamw" {compute_type = bf16, hyper = {beta1 = 9.000000e-01 : f64, lr = 3.000000e-04 : f64}, master_type = f32, microbatches = 4 : i64, schedule = "1f1b", schedule_axis = "pp", stages = {{\[\[}}0, 1], [2, 3]], zero_axes = ["dp"], zero_stage = 1 : i64}{{$}}
loom.train @GPT optimizer = "adamw" {compute_type = bf16, hyper = {beta1 = 0.9 : f64, lr = 3.0e-04 : f64}, master_type = f32, microbatches = 4 : i64, schedule = "1f1b", schedule_axis = "pp", stages = [[0, 1], [2, 3]], zero_axes = ["dp"], zero_stage = 1 : i64}
// CHECK: loom.train @GPT optimizer = "sgd"{{$}}
loom.train @GPT optimizer = "sgd"
