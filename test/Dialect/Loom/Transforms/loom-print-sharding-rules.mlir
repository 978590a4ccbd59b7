// RUN: loom-opt %s --loom-print-sharding-rules -split-input-file -verify-diagnostics -o /dev/null

// Every compute op describes itself by factors. Factors print as letters;
// a dimension lists its factors major to minor (`a.b`), `1` has none.
// Kinds: pass-through (plain), linear (a sharded factor leaves partial
// sums), nonlinear(all-reduces of its decomposition), gather (indexed by
// the other operand) and replicated (must not be sharded).

func.func @all(%x: tensor<8x16xf32>, %y: tensor<16xf32>, %s: tensor<f32>, %b3: tensor<2x8x16xf32>, %w: tensor<16x32xf32>, %g: tensor<16xf32>, %q: tensor<2x4x8x16xbf16>, %kv: tensor<2x4x6x16xbf16>, %v: tensor<2x4x6x32xbf16>, %l: tensor<2x8x50xf32>, %t: tensor<2x8xi32>, %c: tensor<6x35xf32>) {
  // expected-remark @below {{sharding rule () -> ([a, b]) {a=4, b=2}}
  %c0 = loom.constant dense<1.0> : tensor<4x2xf32>
  // expected-remark @below {{sharding rule ([a, b], [b]) -> ([a, b]) {a=8, b=16}}
  %0 = loom.add %x, %y : tensor<8x16xf32>, tensor<16xf32> -> tensor<8x16xf32>
  // expected-remark @below {{sharding rule ([a, b], []) -> ([a, b]) {a=8, b=16}}
  %1 = loom.sub %x, %s : tensor<8x16xf32>, tensor<f32> -> tensor<8x16xf32>
  // expected-remark @below {{sharding rule ([a, b, c], [b, c]) -> ([a, b, c]) {a=2, b=8, c=16}}
  %2 = loom.mul %b3, %x : tensor<2x8x16xf32>, tensor<8x16xf32> -> tensor<2x8x16xf32>
  // expected-remark @below {{sharding rule ([a, b], [a, b]) -> ([a, b]) {a=8, b=16}}
  %3 = loom.div %x, %x : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  // expected-remark @below {{sharding rule ([a, b]) -> ([a, b]) {a=8, b=16}}
  %4 = loom.exp %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule ([a, b]) -> ([a, b]) {a=8, b=16}}
  %5 = loom.gelu %x approximate tanh : tensor<8x16xf32>
  // expected-remark @below {{sharding rule ([a, b]) -> ([a, b]) {a=8, b=16}}
  %6 = loom.cast %x : tensor<8x16xf32> -> tensor<8x16xbf16>
  // expected-remark @below {{sharding rule ([a, b, c], [c], [c]) -> ([a, b, c]) {a=2, b=8, c=16 nonlinear(sum)}}
  %7 = loom.layernorm %b3, %g, %g eps = 1.0e-05 : tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32> -> tensor<2x8x16xf32>
  // expected-remark @below {{sharding rule ([a, b, c], [b, c]) -> ([a, b, c]) {a=2, b=8 nonlinear(sum), c=16 nonlinear(sum)}}
  %8 = loom.rmsnorm %b3, %x eps = 1.0e-06 : tensor<2x8x16xf32>, tensor<8x16xf32> -> tensor<2x8x16xf32>
  // expected-remark @below {{sharding rule ([a, b, c]) -> ([1, b, 1]) {a=2 linear, b=8, c=16 linear}}
  %9 = loom.mean %b3 dims = [0, 2] keepdim : tensor<2x8x16xf32> -> tensor<1x8x1xf32>
  // expected-remark @below {{sharding rule ([a, b]) -> ([a]) {a=8, b=16 nonlinear(max)}}
  %10 = loom.max %x dims = [1] : tensor<8x16xf32> -> tensor<8xf32>
  // expected-remark @below {{sharding rule ([a, b, c], [c, d]) -> ([a, b, d]) {a=2, b=8, c=16 linear, d=32}}
  %11 = loom.matmul %b3, %w : tensor<2x8x16xf32>, tensor<16x32xf32> -> tensor<2x8x32xf32>
  // expected-remark @below {{sharding rule ([a, b, c]) -> ([a, c]) {a=2, b=8 linear, c=16}}
  %12 = loom.einsum "bsd->bd" %b3 : (tensor<2x8x16xf32>) -> tensor<2x16xf32>
  // expected-remark @below {{sharding rule ([a, b, c]) -> ([c, a, b]) {a=2, b=8, c=16}}
  %13 = loom.transpose %b3 perm = [2, 0, 1] : tensor<2x8x16xf32> -> tensor<16x2x8xf32>
  // expected-remark @below {{sharding rule ([a.b, c]) -> ([a.d, e]) {a=2, b=3 replicated, c=35 replicated, d=5 replicated, e=21 replicated}}
  %14 = loom.reshape %c : tensor<6x35xf32> -> tensor<10x21xf32>
  // expected-remark @below {{sharding rule ([a, b], [a, c]) -> ([a, d]) {a=8, b=16 replicated, c=16 replicated, d=32 replicated}}
  %15 = loom.concat %x, %x dim = 1 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x32xf32>
  // expected-remark @below {{sharding rule ([b, a]) -> ([c, a], [d, a]) {a=16, b=8 replicated, c=2 replicated, d=6 replicated}}
  %16, %17 = loom.split %x dim = 0 sizes = [2, 6] : tensor<8x16xf32> -> tensor<2x16xf32>, tensor<6x16xf32>
  // expected-remark @below {{sharding rule ([a, b]) -> ([a, c]) {a=8, b=16 replicated, c=8 replicated}}
  %18 = loom.slice %x [0, 4] to [8, 12] : tensor<8x16xf32> -> tensor<8x8xf32>
  // A causal mask needs each query's global position: queries stay whole.
  // expected-remark @below {{sharding rule ([a, b, c, d], [a, b, e, d], [a, b, e, f]) -> ([a, b, c, f]) {a=2, b=4, c=8 replicated, d=16 replicated, e=6 nonlinear(max, sum), f=32}}
  %19 = loom.attention %q, %kv, %v causal scale = 0.25 : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16> -> tensor<2x4x8x32xbf16>
  // expected-remark @below {{sharding rule ([a, b, c, d], [a, b, e, d], [a, b, e, f]) -> ([a, b, c, f]) {a=2, b=4, c=8, d=16 replicated, e=6 nonlinear(max, sum), f=32}}
  %21 = loom.attention %q, %kv, %v scale = 0.25 : tensor<2x4x8x16xbf16>, tensor<2x4x6x16xbf16>, tensor<2x4x6x32xbf16> -> tensor<2x4x8x32xbf16>
  // expected-remark @below {{sharding rule ([a, b, c], [a, b]) -> ([]) {a=2 linear, b=8 linear, c=50 nonlinear(max, sum)}}
  %20 = loom.cross_entropy %l, %t : tensor<2x8x50xf32>, tensor<2x8xi32> -> tensor<f32>
  return
}

// -----

// Matmul: batch dimensions broadcast (a size-1 batch dimension has no
// factor), the contracted dimension is a linear reduction.
func.func @matmul_broadcast(%x: tensor<1x8x16xf32>, %w: tensor<4x16x32xf32>) {
  // expected-remark @below {{sharding rule ([1, b, c], [a, c, d]) -> ([a, b, d]) {a=4, b=8, c=16 linear, d=32}}
  %0 = loom.matmul %x, %w : tensor<1x8x16xf32>, tensor<4x16x32xf32> -> tensor<4x8x32xf32>
  return
}

// -----

// Reshape factors both shapes alike where sizes divide: [4, 6] -> [8, 3] is
// (a)(b.c) -> (a.b)(c).
func.func @reshape_factors(%x: tensor<4x6xf32>) {
  // expected-remark @below {{sharding rule ([a, b.c]) -> ([a.b, c]) {a=4, b=2, c=3}}
  %0 = loom.reshape %x : tensor<4x6xf32> -> tensor<8x3xf32>
  // expected-remark @below {{sharding rule ([a, b.c]) -> ([a, 1, b, c]) {a=4, b=2, c=3}}
  %1 = loom.reshape %x : tensor<4x6xf32> -> tensor<4x1x2x3xf32>
  return
}

// -----

// No elements: every dimension is replicated (finding common pieces
// divided by gcd(0, 0) = 0, a SIGFPE).
func.func @reshape_empty(%x: tensor<2x0xf32>) {
  // expected-remark @below {{sharding rule ([a, b]) -> ([c, d, e]) {a=2 replicated, b=0 replicated, c=2 replicated, d=0 replicated, e=1 replicated}}
  %0 = loom.reshape %x : tensor<2x0xf32> -> tensor<2x0x1xf32>
  return
}

// -----

// A letter twice in one operand (the diagonal) is replicated: it pairs two
// dimensions that one device's piece could not hold alike.
func.func @einsum_diagonal(%a: tensor<4x4xf32>, %b: tensor<4x8xf32>) {
  // expected-remark @below {{sharding rule ([a, a], [a, b]) -> ([b]) {a=4 replicated, b=8}}
  %0 = loom.einsum "ii,ij->j" %a, %b : (tensor<4x4xf32>, tensor<4x8xf32>) -> tensor<8xf32>
  return
}
