// RUN: loom-opt %s --loom-explain-collectives --verify-diagnostics

// Each collective is explained with its bytes per rank, the iterations of
// the repeat around it, and the reason the partitioner recorded.
loom.mesh @m ["dp" = 2, "tp" = 4]
func.func @f(%x: tensor<8x16xf32>, %w: tensor<3x16xf32>) -> tensor<8x16xf32> {
  // expected-remark @below {{all_reduce(sum) over ["tp"] of 8x16xf32: 768 bytes per rank; %h is [{}, {}] partial sum("tp") from loom.matmul at a.loom:3:5, needed as [{}, {}] by loom.add at a.loom:4:7}}
  %r = loom.all_reduce %x on @m ["tp"] sum {loom.reason = {value = "%h", from = #loom.sharding<@m, [{}, {}], partial = sum("tp")>, to = #loom.sharding<@m, [{}, {}]>, producer = "loom.matmul at a.loom:3:5", consumer = "loom.add at a.loom:4:7"}} : tensor<8x16xf32>
  %l = loom.repeat 3 carried(%r : tensor<8x16xf32>) stacked(%w : tensor<3x16xf32>) -> tensor<8x16xf32> {
  ^bb0(%c: tensor<8x16xf32>, %s: tensor<16xf32>):
    // expected-remark @below {{all_gather over ["dp"] of 8x16xf32: 512 bytes per rank x 3 iterations}}
    %g = loom.all_gather %c on @m ["dp"] dim 0 : tensor<8x16xf32> -> tensor<16x16xf32>
    // expected-remark @below {{all_slice over ["dp"] of 16x16xf32: 0 bytes per rank x 3 iterations}}
    %b = loom.all_slice %g on @m ["dp"] dim 0 : tensor<16x16xf32> -> tensor<8x16xf32>
    loom.yield %b : tensor<8x16xf32>
  }
  return %l : tensor<8x16xf32>
}
