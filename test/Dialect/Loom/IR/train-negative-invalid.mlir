// RUN: loom-opt %s -split-input-file -verify-diagnostics
// XFAIL: *

// Known bug: loom.train reads zero_stage and microbatches as unsigned
// (I64Attr's getter returns uint64_t), so `microbatches = -1` verifies and
// `zero_stage = -1` is reported as 18446744073709551615. When this test
// XPASSes, drop the XFAIL line and move the cases into invalid.mlir.

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
