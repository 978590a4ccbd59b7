//===- ASTPrinter.cpp - Print the Loom AST (loomc --emit=ast) -------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "loom/Frontend/AST.h"

#include "llvm/Support/SourceMgr.h"

#include <algorithm>

using namespace loom::ast;

namespace {

class ASTPrinter {
public:
  ASTPrinter(const llvm::SourceMgr &sourceMgr, llvm::raw_ostream &os)
      : locator(sourceMgr), os(os) {}

  void print(const File &file) {
    os << "File \"" << file.path << "\"\n";
    for (const Decl &decl : file.decls)
      printDecl(decl);
  }

private:
  /// `@3:5`: where a node starts.
  std::string at(llvm::SMLoc loc) {
    if (!loc.isValid())
      return "";
    auto [line, col] = locator.lineAndColumn(loc);
    return " @" + std::to_string(line) + ":" + std::to_string(col);
  }

  /// Indents by depth; very deep trees print their depth instead, so output
  /// stays linear in the number of nodes.
  llvm::raw_ostream &line(unsigned depth) {
    if (depth <= kMaxIndent)
      return os.indent(2 * depth);
    return os.indent(2 * kMaxIndent) << '[' << depth << "] ";
  }
  static constexpr unsigned kMaxIndent = 32;

  void printAxes(const AxisSpec &axes) {
    if (!axes.present)
      return;
    os << ':';
    if (axes.replicated)
      os << '_';
    else if (axes.axes.size() == 1)
      os << axes.axes.front().name;
    else {
      os << '(';
      for (size_t i = 0; i < axes.axes.size(); ++i)
        os << (i ? "," : "") << axes.axes[i].name;
      os << ')';
    }
    if (axes.open)
      os << '?';
    if (axes.priority)
      os << ' ' << axes.priority->name;
  }

  void printType(const TensorType &type) {
    os << type.dtype.name;
    if (!type.hasShape)
      return;
    os << '[';
    for (size_t i = 0; i < type.dims.size(); ++i) {
      os << (i ? ", " : "") << type.dims[i].size->sourceText();
      printAxes(type.dims[i].axes);
    }
    os << ']';
  }

  void printExpr(const Expr &expr, unsigned depth) {
    llvm::raw_ostream &out = line(depth);
    switch (expr.kind) {
    case ExprKind::Int:
      out << "Int " << expr.sourceText();
      break;
    case ExprKind::Float:
      out << "Float " << expr.sourceText();
      break;
    case ExprKind::String:
      out << "String \"" << expr.text << '"';
      break;
    case ExprKind::Bool:
      out << "Bool " << (expr.intValue ? "true" : "false");
      break;
    case ExprKind::DType:
      out << "DType " << expr.text;
      break;
    case ExprKind::Name:
      out << "Name " << expr.text;
      break;
    case ExprKind::Call:
      out << "Call " << expr.text;
      if (expr.callName)
        out << " as " << expr.callName->name;
      break;
    case ExprKind::Neg:
      out << "Neg";
      break;
    case ExprKind::Binary:
      out << "Binary '" << expr.text << "'";
      break;
    case ExprKind::Tuple:
      out << "Tuple";
      break;
    case ExprKind::List:
      out << "List";
      break;
    }
    if (expr.axes.present) {
      out << " axes ";
      printAxes(expr.axes);
    }
    out << at(expr.loc()) << '\n';
    for (size_t i = 0; i < expr.operands.size(); ++i) {
      if (expr.kind == ExprKind::Call && !expr.argNames[i].name.empty())
        line(depth + 1) << expr.argNames[i].name << " =\n";
      printExpr(*expr.operands[i], depth + 1);
    }
  }

  void printStmt(const Stmt &stmt, unsigned depth) {
    switch (stmt.kind) {
    case StmtKind::Param:
      line(depth) << "Param " << stmt.paramName.name << " : ";
      printType(stmt.paramType);
      os << " = " << stmt.initName.name << at(stmt.range.Start) << '\n';
      for (const ExprPtr &arg : stmt.initArgs)
        printExpr(*arg, depth + 1);
      return;
    case StmtKind::Assign:
    case StmtKind::Repeat: {
      llvm::raw_ostream &out =
          line(depth) << (stmt.kind == StmtKind::Assign ? "Assign" : "Repeat");
      for (const Ident &target : stmt.targets)
        out << ' ' << target.name;
      if (stmt.repeatName)
        out << " as " << stmt.repeatName->name;
      out << at(stmt.range.Start) << '\n';
      if (stmt.count) {
        line(depth + 1) << "count\n";
        printExpr(*stmt.count, depth + 2);
      }
      for (const StmtPtr &inner : stmt.body)
        printStmt(*inner, depth + 1);
      if (stmt.kind == StmtKind::Repeat)
        line(depth + 1) << "yield\n";
      for (const ExprPtr &value : stmt.values)
        printExpr(*value, depth + (stmt.kind == StmtKind::Repeat ? 2 : 1));
      return;
    }
    case StmtKind::Return:
      line(depth) << "Return" << at(stmt.range.Start) << '\n';
      for (const ExprPtr &value : stmt.values)
        printExpr(*value, depth + 1);
      return;
    }
  }

  void printDecl(const Decl &decl) {
    switch (decl.kind) {
    case Decl::Import:
      line(1) << "Import \"" << decl.importDecl->path << '"'
              << at(decl.importDecl->loc) << '\n';
      return;
    case Decl::Mesh:
      line(1) << "Mesh " << decl.mesh->name.name << at(decl.mesh->name.loc)
              << '\n';
      for (const auto &[axis, size] : decl.mesh->axes)
        line(2) << "Axis " << axis.name << " = " << size->sourceText()
                << at(axis.loc) << '\n';
      return;
    case Decl::Const:
      line(1) << "Const " << decl.constant->name.name
              << at(decl.constant->name.loc) << '\n';
      printExpr(*decl.constant->value, 2);
      return;
    case Decl::Block: {
      const BlockDecl &block = *decl.block;
      line(1) << (block.isModel ? "Model " : "Block ") << block.name.name
              << at(block.name.loc) << '\n';
      for (const Arg &arg : block.args) {
        line(2) << "Arg " << arg.name.name << " : ";
        printType(arg.type);
        os << at(arg.name.loc) << '\n';
      }
      for (const Result &result : block.results) {
        line(2) << "Result " << (result.name ? result.name->name + " " : "")
                << ": ";
        printType(result.type);
        os << at(result.type.range.Start) << '\n';
      }
      for (const StmtPtr &stmt : block.body)
        printStmt(*stmt, 2);
      return;
    }
    case Decl::Train:
      line(1) << "Train " << decl.train->model.name << at(decl.train->model.loc)
              << '\n';
      for (const TrainClause &clause : decl.train->clauses) {
        line(2) << "Setting " << clause.key.name;
        if (clause.value)
          os << ' ' << clause.value->sourceText();
        if (clause.over) {
          os << " over ";
          for (size_t i = 0; i < clause.over->axes.size(); ++i)
            os << (i ? "," : "") << clause.over->axes[i].name;
        }
        for (const StageRef &ref : clause.stageRefs) {
          os << ' ' << ref.name.name;
          if (ref.begin)
            os << '[' << ref.begin->sourceText() << ':' << ref.end->sourceText()
               << ']';
        }
        os << at(clause.key.loc) << '\n';
      }
      return;
    }
  }

  SourceLocator locator;
  llvm::raw_ostream &os;
};

} // namespace

std::pair<unsigned, unsigned> SourceLocator::lineAndColumn(llvm::SMLoc loc) {
  unsigned id = loc.isValid() ? sourceMgr.FindBufferContainingLoc(loc) : 0;
  if (!id)
    return {0, 0};
  if (lineStarts.size() <= id)
    lineStarts.resize(id + 1);
  std::vector<size_t> &starts = lineStarts[id];
  llvm::StringRef text = sourceMgr.getMemoryBuffer(id)->getBuffer();
  if (starts.empty()) {
    starts.push_back(0);
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n')
        starts.push_back(i + 1);
  }
  size_t offset = loc.getPointer() - text.data();
  auto it = std::upper_bound(starts.begin(), starts.end(), offset);
  size_t line = it - starts.begin();
  return {static_cast<unsigned>(line),
          static_cast<unsigned>(offset - starts[line - 1] + 1)};
}

llvm::StringRef SourceLocator::bufferName(llvm::SMLoc loc) {
  unsigned id = loc.isValid() ? sourceMgr.FindBufferContainingLoc(loc) : 0;
  return id ? sourceMgr.getMemoryBuffer(id)->getBufferIdentifier() : "";
}

void loom::ast::printAST(const File &file, const llvm::SourceMgr &sourceMgr,
                         llvm::raw_ostream &os) {
  ASTPrinter(sourceMgr, os).print(file);
}
