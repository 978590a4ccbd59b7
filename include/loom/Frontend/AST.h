//===- AST.h - Abstract syntax tree of the Loom language --------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// Plain data: the parser (built with exceptions, in its own target) fills it,
// the rest of the compiler (built without) reads it. Every node keeps the
// source range it came from as SMLocs into the llvm::SourceMgr buffer.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_AST_H
#define LOOM_FRONTEND_AST_H

#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::ast {

/// A name and where it was written.
struct Ident {
  std::string name;
  llvm::SMLoc loc;
};

/// The mesh axes bound to one dimension: `:dp`, `:(dp, tp)`, `:_`, `:tp?`,
/// `:dp p1`.
struct AxisSpec {
  bool present = false;
  std::vector<Ident> axes;       // empty with `replicated` for `_`
  bool replicated = false;       // `_`
  bool open = false;             // trailing `?`
  std::optional<Ident> priority; // `p<N>`, checked by sema
  llvm::SMLoc loc;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

enum class ExprKind {
  Int,    // intValue
  Float,  // floatValue
  String, // text (unquoted)
  Bool,   // intValue 0/1
  DType,  // text
  Name,   // text
  Call,   // text = callee, operands = args, argNames
  Neg,    // operands[0]
  Binary, // text = "+", "-", "*", "/", "@"; operands[0..1]
  Tuple,  // operands
  List,   // operands, each with its `axes`
};

struct Expr {
  ExprKind kind;
  llvm::SMRange range;
  int64_t intValue = 0;
  double floatValue = 0;
  /// A numeric literal that did not fit (reported by sema).
  bool outOfRange = false;
  std::string text;
  std::vector<ExprPtr> operands;
  /// For calls: the keyword of each argument ("" when positional) and where.
  std::vector<Ident> argNames;
  /// For calls: `as name`.
  std::optional<Ident> callName;
  /// For list items: `B:dp`.
  AxisSpec axes;
  /// Where messages about this node point: the operator of a binary
  /// expression, else the start of the node.
  llvm::SMLoc opLoc;
  llvm::SMLoc loc() const { return opLoc.isValid() ? opLoc : range.Start; }

  /// The source text, for messages and for train-spec words like zero-bubble.
  /// Computed from the range: storing it per node would cost quadratic memory
  /// on long operator chains.
  std::string sourceText() const {
    const char *begin = range.Start.getPointer(), *end = range.End.getPointer();
    if (!begin || !end || end < begin)
      return "";
    return std::string(begin, end - begin);
  }
};

struct Dim {
  ExprPtr size;
  AxisSpec axes;
};

struct TensorType {
  Ident dtype;
  bool hasShape = false; // `f32` alone is a scalar
  std::vector<Dim> dims;
  llvm::SMRange range;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;

enum class StmtKind { Param, Assign, Repeat, Return };

struct Stmt {
  StmtKind kind;
  llvm::SMRange range;
  std::vector<Ident> targets;  // assign / repeat
  std::vector<ExprPtr> values; // assign: 1; return / repeat: yielded values
  // Param.
  Ident paramName;
  TensorType paramType;
  Ident initName;
  std::vector<ExprPtr> initArgs;
  bool initHasParens = false;
  // Repeat.
  ExprPtr count;
  std::optional<Ident> repeatName;
  std::vector<StmtPtr> body;
};

struct Arg {
  Ident name;
  TensorType type;
};

struct Result {
  std::optional<Ident> name;
  TensorType type;
};

struct BlockDecl {
  bool isModel = false;
  Ident name;
  std::vector<Arg> args;
  std::vector<Result> results;
  std::vector<StmtPtr> body;
  llvm::SMLoc end;
};

struct MeshDecl {
  Ident name;
  std::vector<std::pair<Ident, ExprPtr>> axes;
};

struct ConstDecl {
  Ident name;
  ExprPtr value;
};

struct ImportDecl {
  std::string path;
  llvm::SMLoc loc;
};

struct StageRef {
  Ident name;
  ExprPtr begin, end; // null without a `[a:b]` range
};

struct TrainClause {
  Ident key;     // "stage" for stage clauses
  ExprPtr value; // may be null
  std::optional<AxisSpec> over;
  std::vector<StageRef> stageRefs;
  bool isStage = false;
  llvm::SMRange range;
};

struct TrainDecl {
  Ident model;
  std::vector<TrainClause> clauses;
};

/// One top-level declaration, in source order.
struct Decl {
  enum Kind { Import, Mesh, Const, Block, Train } kind;
  std::unique_ptr<ImportDecl> importDecl;
  std::unique_ptr<MeshDecl> mesh;
  std::unique_ptr<ConstDecl> constant;
  std::unique_ptr<BlockDecl> block;
  std::unique_ptr<TrainDecl> train;
};

struct File {
  std::string path;
  unsigned bufferId = 0;
  std::vector<Decl> decls;
};

/// Line and column of SMLocs in O(log lines): llvm::SourceMgr scans back to
/// the line start for every column, which is quadratic on long lines.
class SourceLocator {
public:
  explicit SourceLocator(const llvm::SourceMgr &sourceMgr)
      : sourceMgr(sourceMgr) {}
  /// 1-based line and column (in bytes); {0, 0} for an invalid location.
  std::pair<unsigned, unsigned> lineAndColumn(llvm::SMLoc loc);
  /// The identifier of the buffer holding `loc`, or "".
  llvm::StringRef bufferName(llvm::SMLoc loc);

private:
  const llvm::SourceMgr &sourceMgr;
  /// Per buffer id: offsets of the first byte of each line.
  std::vector<std::vector<size_t>> lineStarts;
};

/// Prints the AST as an indented tree (`loomc --emit=ast`).
void printAST(const File &file, const llvm::SourceMgr &sourceMgr,
              llvm::raw_ostream &os);

} // namespace loom::ast

#endif // LOOM_FRONTEND_AST_H
