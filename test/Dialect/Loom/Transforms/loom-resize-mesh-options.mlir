// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes=dp"
// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes=dp=0"
// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes=dp=-2"
// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes=dp=two"
// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes==4"
// RUN: loom-opt %s -verify-diagnostics --loom-resize-mesh="axes=dp=2,dp=4"

// Malformed `axes` options of --loom-resize-mesh. The error is reported on
// the module before any mesh changes. One expectation covers every RUN line;
// each alternative names the entry it rejects.

// expected-error-re @+1 {{loom-resize-mesh: {{(expected axis=size with a positive size, got '(dp|dp=0|dp=-2|dp=two|=4)'|axis 'dp' is given twice)$}}}}
module {
  loom.mesh @mesh ["dp" = 2]
}
