//===- Parser.h - Parse Loom source into an AST -----------------*- C++ -*-===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_FRONTEND_PARSER_H
#define LOOM_FRONTEND_PARSER_H

#include "loom/Frontend/AST.h"

#include "llvm/Support/SourceMgr.h"
#include <functional>

namespace loom {

/// Receives each syntax error as it is found.
using SyntaxErrorHandler =
    std::function<void(llvm::SMLoc loc, const std::string &message)>;

/// Deepest bracket nesting the parser accepts. The ANTLR runtime recurses per
/// level, so deeper input is rejected before it runs.
constexpr unsigned kMaxNestingDepth = 256;
/// Most operators between braces or ';' (so in one expression): a chain of
/// 600,000 fits the front end's stack.
constexpr unsigned kMaxOperatorsInRow = 100000;

/// Parses buffer `bufferId` of `sourceMgr`. Before parsing, rejects invalid
/// UTF-8 at the first bad byte, unmatched brackets, and nesting deeper than
/// kMaxNestingDepth.
/// Returns null after reporting at least one error. Never throws.
std::unique_ptr<ast::File> parseFile(llvm::SourceMgr &sourceMgr,
                                     unsigned bufferId,
                                     const SyntaxErrorHandler &onError);

} // namespace loom

#endif // LOOM_FRONTEND_PARSER_H
