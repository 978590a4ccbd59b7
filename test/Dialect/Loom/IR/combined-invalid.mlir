// RUN: loom-opt %s -split-input-file -verify-diagnostics

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @one_member(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op body must hold two or more all_gathers, all_reduces or reduce_scatters, then loom.yield}}
  %r = loom.combined -> (tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    loom.yield %0 : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @not_a_collective(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op body must hold two or more all_gathers, all_reduces or reduce_scatters, then loom.yield}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.relu %x : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @permutes(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op body must hold two or more all_gathers, all_reduces or reduce_scatters, then loom.yield}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.collective_permute %x on @m ["tp"] pairs [0, 1, 1, 0, 2, 3, 3, 2] : tensor<8xf32>
    %1 = loom.collective_permute %x on @m ["tp"] pairs [0, 1, 1, 0, 2, 3, 3, 2] : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @two_kinds(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op members must be of one kind, over the same mesh axes, with the same reduction}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<32xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_gather %x on @m ["tp"] dim 0 : tensor<8xf32> -> tensor<32xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<32xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @two_groups(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op members must be of one kind, over the same mesh axes, with the same reduction}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %x on @m ["dp"] sum : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @two_reductions(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op members must be of one kind, over the same mesh axes, with the same reduction}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %x on @m ["tp"] max : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @two_types(%x: tensor<8xf32>, %y: tensor<8xbf16>) {
  // expected-error @+1 {{'loom.combined' op reducing members must have one element type}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xbf16>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %y on @m ["tp"] sum : tensor<8xbf16>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xbf16>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @chained(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op a member reads another member's result: they run at once}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %0 on @m ["tp"] sum : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @yield_order(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op body must yield its members' results, in order}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %y on @m ["tp"] sum : tensor<8xf32>
    loom.yield %1, %0 : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["dp" = 2, "tp" = 4]

func.func @result_types(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.combined' op result types must be the members' result types}}
  %r:2 = loom.combined -> (tensor<8xf32>, tensor<4x2xf32>) {
    %0 = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %1 = loom.all_reduce %y on @m ["tp"] sum : tensor<8xf32>
    loom.yield %0, %1 : tensor<8xf32>, tensor<8xf32>
  }
  return
}
