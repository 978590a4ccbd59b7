// RUN: loom-opt %s -split-input-file -verify-diagnostics

loom.mesh @m ["tp" = 4]

func.func @not_a_collective(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must hold exactly one collective with a result, then loom.yield}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %r = loom.relu %x : tensor<8xf32>
    loom.yield %r : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["tp" = 4]

func.func @two_ops(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must hold exactly one collective with a result, then loom.yield}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    %s = loom.relu %r : tensor<8xf32>
    loom.yield %s : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["tp" = 4]

func.func @yields_other_value(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must yield its collective's result}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    loom.yield %x : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["tp" = 4]

func.func @future_type(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op returns '!loom.future<tensor<8xbf16>>' for a collective of type 'tensor<8xf32>'}}
  %f = loom.start -> !loom.future<tensor<8xbf16>> {
    %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
    loom.yield %r : tensor<8xf32>
  }
  return
}

// -----

func.func @wait_type(%f: !loom.future<tensor<8xf32>>) {
  // expected-error @+1 {{result is the future's value type}}
  %v = "loom.wait"(%f) : (!loom.future<tensor<8xf32>>) -> tensor<4xf32>
  return
}
