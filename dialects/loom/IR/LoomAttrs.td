//===- LoomAttrs.td - Loom attributes ----------------------*- tablegen -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_ATTRS_TD
#define LOOM_ATTRS_TD

include "LoomDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

class Loom_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Loom_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Loom_ReductionKind : I32EnumAttr<"ReductionKind", "how partial values combine", [
    I32EnumAttrCase<"Sum", 0, "sum">,
    I32EnumAttrCase<"Max", 1, "max">,
    I32EnumAttrCase<"Min", 2, "min">]> {
  let cppNamespace = "::loom";
}

// A specialised integer enum attribute: the custom form prints `tanh`, the
// generic form an integer, and both parse back.
def Loom_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "GELU formula", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Tanh", 1, "tanh">]> {
  let cppNamespace = "::loom";
}

def Loom_InitKind : I32EnumAttr<"InitKind", "parameter initialiser", [
    I32EnumAttrCase<"Normal", 0, "normal">,
    I32EnumAttrCase<"Uniform", 1, "uniform">,
    I32EnumAttrCase<"Zeros", 2, "zeros">,
    I32EnumAttrCase<"Ones", 3, "ones">]> {
  let cppNamespace = "::loom";
  let genSpecializedAttr = 0;
}

def Loom_InitAttr : Loom_Attr<"Init", "init"> {
  let summary = "How a parameter is initialised";
  let description = [{
    `normal(mean, std)`, `uniform(low, high)`, `zeros` or `ones`. Values are
    drawn on the host from Philox4x32-10 keyed by (seed, FNV-1a hash of the
    parameter name, global element index), so they do not depend on the mesh.

    ```mlir
    #loom.init<normal(0.0, 0.02)>
    #loom.init<zeros>
    ```
  }];
  let parameters = (ins "InitKind":$kind, "llvm::APFloat":$a, "llvm::APFloat":$b);
  let hasCustomAssemblyFormat = 1;
}

def Loom_DimShardingAttr : Loom_Attr<"DimSharding", "dim"> {
  let summary = "Sharding of one tensor dimension";
  let description = [{
    The mesh axes a dimension is split over, major to minor; whether the
    compiler may add axes (open, printed `?`) or not (closed); and an optional
    priority (`p0` is the highest). Printed inside `#loom.sharding` as
    `{"dp", "tp"}`, `{?}`, `{"dp", ?}p1` or `{}` (closed, replicated).
  }];
  let parameters = (ins
    ArrayRefParameter<"mlir::StringAttr", "axes, major to minor">:$axes,
    "bool":$isClosed,
    OptionalParameter<"std::optional<int64_t>">:$priority);
  let hasCustomAssemblyFormat = 1;
  let extraClassDeclaration = [{
    void printBody(mlir::AsmPrinter &printer) const;
    static DimShardingAttr parseBody(mlir::AsmParser &parser);
  }];
}

def Loom_ShardingAttr : Loom_Attr<"Sharding", "sharding"> {
  let summary = "How a global tensor is laid out over a mesh";
  let description = [{
    One dimension sharding per tensor dimension, plus the set of *partial*
    axes: over these axes every device holds a summand (or a max/min operand)
    of the true value, which a collective must still reduce.

    ```mlir
    #loom.sharding<@mesh, [{"dp"}, {?}, {"tp"} ]>
    #loom.sharding<@mesh, [{"dp", "tp"}, {} ]>
    #loom.sharding<@mesh, [{"dp"}, {} ], partial = sum("tp")>
    ```
  }];
  let parameters = (ins
    "mlir::FlatSymbolRefAttr":$mesh,
    ArrayRefParameter<"DimShardingAttr", "per-dimension shardings">:$dims,
    ArrayRefParameter<"mlir::StringAttr", "partial axes">:$partialAxes,
    "ReductionKind":$partialKind);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// Every mesh axis this sharding names, dimensions first, then partial.
    llvm::SmallVector<mlir::StringAttr> getAllAxes() const;
    /// A sharding that replicates (closed) every dimension of a rank-`rank` value.
    static ShardingAttr getReplicated(mlir::MLIRContext *ctx,
                                      mlir::FlatSymbolRefAttr mesh,
                                      int64_t rank, bool closed);
  }];
}

#endif // LOOM_ATTRS_TD
