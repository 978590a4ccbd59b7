// Regression: loom.recv once declared only MemRead, so MLIR treated it as
// removable when unused and as mergeable with an identical recv. Either
// leaves the peer stage's loom.send without its match (a hang or a wrong
// message). Send and recv now read and write loom.communication.
// RUN: loom-opt %s -split-input-file -canonicalize | FileCheck %s
// RUN: loom-opt %s -split-input-file -cse | FileCheck %s

loom.mesh @mesh ["pp" = 2, "tp" = 4] manual ["pp"]

// The previous stage sends whether or not this one uses the message.
// CHECK-LABEL: func.func @unused_recv(
// CHECK-NEXT:    loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
// CHECK-NEXT:    return
func.func @unused_recv() {
  %0 = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
  return
}

// -----

loom.mesh @mesh ["pp" = 2, "tp" = 4] manual ["pp"]

// Two messages (say two microbatches) are two receives.
// CHECK-LABEL: func.func @two_recvs(
// CHECK-NEXT:    %[[A:.*]] = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
// CHECK-NEXT:    %[[B:.*]] = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
// CHECK-NEXT:    return %[[A]], %[[B]]
func.func @two_recvs() -> (tensor<8xf32>, tensor<8xf32>) {
  %0 = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
  %1 = loom.recv on @mesh ["pp"] offset -1 : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}
