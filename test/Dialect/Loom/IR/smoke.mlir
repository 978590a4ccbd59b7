// RUN: loom-opt %s | loom-opt | FileCheck %s

// CHECK: loom.mesh @mesh ["dp" = 2, "tp" = 4]
loom.mesh @mesh ["dp" = 2, "tp" = 4]
