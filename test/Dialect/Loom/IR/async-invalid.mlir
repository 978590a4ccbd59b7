// RUN: loom-opt %s -split-input-file -verify-diagnostics

loom.mesh @m ["tp" = 4]

func.func @not_a_collective(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must hold exactly one all_reduce, all_gather, reduce_scatter or loom.combined, then loom.yield}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %r = loom.relu %x : tensor<8xf32>
    loom.yield %r : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["tp" = 4]

func.func @two_ops(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must hold exactly one all_reduce, all_gather, reduce_scatter or loom.combined, then loom.yield}}
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
  // expected-error @+1 {{'loom.start' op body must yield its collective's results}}
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

// Backends start reductions, gathers and their combinations only.
loom.mesh @m ["tp" = 4]

func.func @broadcast(%x: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op body must hold exactly one all_reduce, all_gather, reduce_scatter or loom.combined, then loom.yield}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %r = loom.broadcast %x on @m ["tp"] root 0 : tensor<8xf32>
    loom.yield %r : tensor<8xf32>
  }
  return
}

// -----

loom.mesh @m ["tp" = 4]

func.func @futures_count(%x: tensor<8xf32>, %y: tensor<8xf32>) {
  // expected-error @+1 {{'loom.start' op returns 1 futures for a collective of 2 results}}
  %f = loom.start -> !loom.future<tensor<8xf32>> {
    %a, %b = loom.combined -> (tensor<8xf32>, tensor<8xf32>) {
      %r = loom.all_reduce %x on @m ["tp"] sum : tensor<8xf32>
      %s = loom.all_reduce %y on @m ["tp"] sum : tensor<8xf32>
      loom.yield %r, %s : tensor<8xf32>, tensor<8xf32>
    }
    loom.yield %a : tensor<8xf32>
  }
  return
}

// -----

func.func @wait_type(%f: !loom.future<tensor<8xf32>>) {
  // expected-error @+1 {{result is the future's value type}}
  %v = "loom.wait"(%f) : (!loom.future<tensor<8xf32>>) -> tensor<4xf32>
  return
}

// -----

loom.mesh @m ["dp" = 2]

func.func @prefetch_outside_repeat(%w: tensor<8xf32>) -> tensor<16xf32> {
  %f = loom.start -> !loom.future<tensor<16xf32>> {
    %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8xf32> -> tensor<16xf32>
    loom.yield %g : tensor<16xf32>
  }
  %v = loom.wait %f : !loom.future<tensor<16xf32>>
  // expected-error @+1 {{'loom.prefetch' op must be in the body of a loom.repeat, in the block of its loom.start}}
  loom.prefetch %f : !loom.future<tensor<16xf32>>
  return %v : tensor<16xf32>
}

// -----

loom.mesh @m ["dp" = 2]

func.func @prefetch_before_wait(%x: tensor<16xf32>, %ws: tensor<3x8xf32>) -> tensor<16xf32> {
  %r = loom.repeat 3 carried(%x : tensor<16xf32>) stacked(%ws : tensor<3x8xf32>) -> tensor<16xf32> {
  ^bb0(%c: tensor<16xf32>, %w: tensor<8xf32>):
    %f = loom.start -> !loom.future<tensor<16xf32>> {
      %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8xf32> -> tensor<16xf32>
      loom.yield %g : tensor<16xf32>
    }
    // expected-error @+1 {{'loom.prefetch' op must follow a loom.wait of its loom.start: the iteration's collective completes before the next one's starts}}
    loom.prefetch %f : !loom.future<tensor<16xf32>>
    %v = loom.wait %f : !loom.future<tensor<16xf32>>
    %s = loom.add %c, %v : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
    loom.yield %s : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}

// -----

loom.mesh @m ["dp" = 2]

func.func @prefetch_carried(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = loom.repeat 3 carried(%x : tensor<8xf32>) -> tensor<8xf32> {
  ^bb0(%c: tensor<8xf32>):
    %f = loom.start -> !loom.future<tensor<8xf32>> {
      %g = loom.all_reduce %c on @m ["dp"] sum : tensor<8xf32>
      loom.yield %g : tensor<8xf32>
    }
    %v = loom.wait %f : !loom.future<tensor<8xf32>>
    // expected-error @+1 {{'loom.prefetch' op starts a collective that reads a value made in the iteration (not a stacked slice, a value from outside the loop, or a view of one): the next iteration's does not exist yet}}
    loom.prefetch %f : !loom.future<tensor<8xf32>>
    %s = loom.relu %v : tensor<8xf32>
    loom.yield %s : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

loom.mesh @m ["dp" = 2]

func.func @prefetch_twice(%x: tensor<16xf32>, %ws: tensor<3x8xf32>) -> tensor<16xf32> {
  %r = loom.repeat 3 carried(%x : tensor<16xf32>) stacked(%ws : tensor<3x8xf32>) -> tensor<16xf32> {
  ^bb0(%c: tensor<16xf32>, %w: tensor<8xf32>):
    %f = loom.start -> !loom.future<tensor<16xf32>> {
      %g = loom.all_gather %w on @m ["dp"] dim 0 : tensor<8xf32> -> tensor<16xf32>
      loom.yield %g : tensor<16xf32>
    }
    %v = loom.wait %f : !loom.future<tensor<16xf32>>
    loom.prefetch %f : !loom.future<tensor<16xf32>>
    // expected-error @+1 {{'loom.prefetch' op is the second prefetch of its loom.start}}
    loom.prefetch %f : !loom.future<tensor<16xf32>>
    %s = loom.add %c, %v : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
    loom.yield %s : tensor<16xf32>
  }
  return %r : tensor<16xf32>
}
