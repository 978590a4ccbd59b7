//===- LoomTypes.td - Loom types ---------------------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TYPES_TD
#define LOOM_TYPES_TD

include "LoomDialect.td"
include "mlir/IR/AttrTypeBase.td"

def Loom_FutureType : TypeDef<Loom_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "The value of a collective that is still in flight";
  let description = [{
    What `loom.start` returns: a handle to a collective running in the
    background, whose value `loom.wait` delivers. The scheduler moves compute
    between the two to overlap it with communication.

    ```mlir
    !loom.future<tensor<8x16xf32>>
    ```
  }];
  let parameters = (ins "mlir::RankedTensorType":$valueType);
  let assemblyFormat = "`<` $valueType `>`";
}

#endif // LOOM_TYPES_TD
