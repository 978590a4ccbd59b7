// RUN: loom-opt %s --loom-print-collectives -verify-diagnostics -o /dev/null

// Every collective reports its group and the bytes each rank sends, by
// DESIGN.md's formulas with S the bytes of the buffer measured within the
// group (n ranks):
//   all_reduce 2(n-1)/n*S (S: the per-rank buffer)
//   all_gather (n-1)/n*S (S: the gathered result)
//   reduce_scatter (n-1)/n*S (S: the input)
//   all_to_all (n-1)/n*S (S: the per-rank buffer)
//   broadcast, send, recv, collective_permute S; all_slice 0.
// The numbers print as shortest round-trip doubles.

loom.mesh @mesh ["pp" = 2, "dp" = 2, "tp" = 4] manual ["pp"]
loom.mesh @odd ["r" = 3, "s" = 1]

func.func @all_reduce(%x: tensor<1024xf32>, %y: tensor<8x16xbf16>, %z: tensor<1xf32>) {
  // n = 4, S = 1024 * 4 = 4096: 2 * 3/4 * 4096 = 6144.
  // expected-remark @below {{all_reduce over ["tp"] (4 ranks, sum): 6144 bytes per rank}}
  %0 = loom.all_reduce %x on @mesh ["tp"] sum : tensor<1024xf32>
  // bf16, two axes: n = 2 * 4 = 8, S = 128 * 2 = 256: 2 * 7/8 * 256 = 448.
  // expected-remark @below {{all_reduce over ["dp", "tp"] (8 ranks, max): 448 bytes per rank}}
  %1 = loom.all_reduce %y on @mesh ["dp", "tp"] max : tensor<8x16xbf16>
  // n = 3, S = 4: 2 * 2/3 * 4 = 16/3 = 5.33... (the double nearest 16/3).
  // expected-remark @below {{all_reduce over ["r"] (3 ranks, min): 5.333333333333333 bytes per rank}}
  %2 = loom.all_reduce %z on @odd ["r"] min : tensor<1xf32>
  // No axis, n = 1: 2 * 0/1 * S = 0.
  // expected-remark @below {{all_reduce over [] (1 rank, sum): 0 bytes per rank}}
  %3 = loom.all_reduce %y on @mesh [] sum : tensor<8x16xbf16>
  return
}

func.func @all_gather(%x: tensor<4x16xf32>, %y: tensor<4x16xbf16>, %z: tensor<4xf32>) {
  // n = 4, S = the result, 16 * 16 * 4 = 1024: 3/4 * 1024 = 768 (the input
  // would give 192).
  // expected-remark @below {{all_gather over ["tp"] (4 ranks): 768 bytes per rank}}
  %0 = loom.all_gather %x on @mesh ["tp"] dim 0 : tensor<4x16xf32> -> tensor<16x16xf32>
  // bf16, two axes: n = 8, S = 4 * 128 * 2 = 1024: 7/8 * 1024 = 896.
  // expected-remark @below {{all_gather over ["tp", "dp"] (8 ranks): 896 bytes per rank}}
  %1 = loom.all_gather %y on @mesh ["tp", "dp"] dim 1 : tensor<4x16xbf16> -> tensor<4x128xbf16>
  // n = 3 * 1 = 3, S = 12 * 4 = 48: 2/3 * 48 = 32.
  // expected-remark @below {{all_gather over ["s", "r"] (3 ranks): 32 bytes per rank}}
  %2 = loom.all_gather %z on @odd ["s", "r"] dim 0 : tensor<4xf32> -> tensor<12xf32>
  return
}

func.func @reduce_scatter(%x: tensor<8x16xf32>, %y: tensor<64xbf16>) {
  // n = 4, S = the input, 128 * 4 = 512: 3/4 * 512 = 384 (the result would
  // give 96).
  // expected-remark @below {{reduce_scatter over ["tp"] (4 ranks, sum): 384 bytes per rank}}
  %0 = loom.reduce_scatter %x on @mesh ["tp"] dim 1 sum : tensor<8x16xf32> -> tensor<8x4xf32>
  // bf16, two axes: n = 8, S = 64 * 2 = 128: 7/8 * 128 = 112.
  // expected-remark @below {{reduce_scatter over ["dp", "tp"] (8 ranks, max): 112 bytes per rank}}
  %1 = loom.reduce_scatter %y on @mesh ["dp", "tp"] dim 0 max : tensor<64xbf16> -> tensor<8xbf16>
  return
}

func.func @all_to_all(%x: tensor<8x16xf16>, %y: tensor<4x16xi64>) {
  // f16: n = 4, S = 128 * 2 = 256: 3/4 * 256 = 192.
  // expected-remark @below {{all_to_all over ["tp"] (4 ranks): 192 bytes per rank}}
  %0 = loom.all_to_all %x on @mesh ["tp"] split 1 concat 0 : tensor<8x16xf16> -> tensor<32x4xf16>
  // i64, two axes: n = 8, S = 64 * 8 = 512: 7/8 * 512 = 448.
  // expected-remark @below {{all_to_all over ["dp", "tp"] (8 ranks): 448 bytes per rank}}
  %1 = loom.all_to_all %y on @mesh ["dp", "tp"] split 1 concat 0 : tensor<4x16xi64> -> tensor<32x2xi64>
  return
}

func.func @all_slice(%x: tensor<8x16xf32>) {
  // Local: nothing is sent, whatever n and S.
  // expected-remark @below {{all_slice over ["dp", "tp"] (8 ranks): 0 bytes per rank}}
  %0 = loom.all_slice %x on @mesh ["dp", "tp"] dim 1 : tensor<8x16xf32> -> tensor<8x2xf32>
  return
}

func.func @collective_permute(%x: tensor<8x16xf32>) {
  // S = 128 * 4 = 512, whatever n.
  // expected-remark @below {{collective_permute over ["tp"] (4 ranks): 512 bytes per rank}}
  %0 = loom.collective_permute %x on @mesh ["tp"] pairs [0, 1, 1, 2, 2, 3, 3, 0] : tensor<8x16xf32>
  return
}

func.func @broadcast(%x: tensor<8xi64>, %y: tensor<3x5xi32>) {
  // i64: S = 8 * 8 = 64.
  // expected-remark @below {{broadcast over ["dp", "tp"] (8 ranks): 64 bytes per rank}}
  %0 = loom.broadcast %x on @mesh ["dp", "tp"] root 5 : tensor<8xi64>
  // i32: S = 15 * 4 = 60.
  // expected-remark @below {{broadcast over ["r"] (3 ranks): 60 bytes per rank}}
  %1 = loom.broadcast %y on @odd ["r"] root 2 : tensor<3x5xi32>
  return
}

func.func @send_recv(%x: tensor<8x16xbf16>) {
  // bf16: S = 128 * 2 = 256, to one rank of the next stage.
  // expected-remark @below {{send over ["pp"] (2 ranks): 256 bytes per rank}}
  loom.send %x on @mesh ["pp"] offset 1 : tensor<8x16xbf16>
  // S of the received buffer: 4 * 16 * 4 = 256.
  // expected-remark @below {{recv over ["pp"] (2 ranks): 256 bytes per rank}}
  %0 = loom.recv on @mesh ["pp"] offset -1 : tensor<4x16xf32>
  return
}

// Inside a repeat a collective counts per iteration: the same 6144 as the
// first all_reduce above, not 3 times it.
func.func @in_repeat(%x: tensor<1024xf32>) -> tensor<1024xf32> {
  %0 = loom.repeat 3 carried(%x : tensor<1024xf32>) -> tensor<1024xf32> {
  ^bb0(%a: tensor<1024xf32>):
    // expected-remark @below {{all_reduce over ["tp"] (4 ranks, sum): 6144 bytes per rank}}
    %1 = loom.all_reduce %a on @mesh ["tp"] sum : tensor<1024xf32>
    loom.yield %1 : tensor<1024xf32>
  }
  return %0 : tensor<1024xf32>
}
