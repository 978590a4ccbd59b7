//===- Parser.cpp - Parse Loom source into an AST -------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//
//
// The only translation unit that touches the ANTLR runtime. It is compiled
// with exceptions (ANTLR throws), and no exception leaves it: parseFile catches
// everything at its boundary and reports it as a diagnostic.
//
//===----------------------------------------------------------------------===//

#include "loom/Frontend/Parser.h"

#include "LoomLexer.h"
#include "LoomParser.h"
#include "antlr4-runtime.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"

#include <cctype>
#include <cmath>
#include <cstring>
#include <exception>

using namespace loom;
using namespace loom::ast;
using llvm::SmallVector;
using llvm::SMLoc;
using llvm::SMRange;
using llvm::StringRef;

namespace {

/// Returns the first byte of `text` that does not begin valid UTF-8, or null.
const char *findInvalidUTF8(StringRef text) {
  const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.begin());
  const auto *end = reinterpret_cast<const llvm::UTF8 *>(text.end());
  for (const llvm::UTF8 *p = begin; p < end;) {
    unsigned length = llvm::getNumBytesForUTF8(*p);
    if (length == 0 || p + length > end ||
        !llvm::isLegalUTF8Sequence(p, p + length))
      return reinterpret_cast<const char *>(p);
    p += length;
  }
  return nullptr;
}

/// "3:14": the 1-based line and column of `at` in `text`.
std::string lineColumn(StringRef text, const char *at) {
  StringRef before = text.take_front(at - text.data());
  size_t lineStart = before.rfind('\n');
  size_t column = lineStart == StringRef::npos ? before.size() + 1
                                               : before.size() - lineStart;
  return std::to_string(before.count('\n') + 1) + ":" + std::to_string(column);
}

/// The first bracket that does not match, with its message.
using BracketError = std::optional<std::pair<SMLoc, std::string>>;

/// Checks what ANTLR handles badly, before it runs: brackets nested deeper
/// than kMaxNestingDepth (ANTLR recurses per level), more than
/// kMaxOperatorsInRow operators between braces or ';' (the syntax tree
/// of a chain of them is as deep as it is long, and each walk of it
/// recurses; no expression spans those), long runs of
/// prefix '-',
/// and unterminated block comments (which the lexer would report as a stray
/// '/'); these stop parsing. Also finds the first unmatched
/// bracket, which the caller reports in place of ANTLR's messages, should
/// parsing fail.
bool checkStructure(StringRef text, const SyntaxErrorHandler &onError,
                    BracketError &bracketError) {
  SmallVector<const char *, 32> open;
  unsigned minusRun = 0, operatorsInRow = 0;
  bool matchBrackets = true;
  auto closerOf = [](char c) { return c == '(' ? ')' : c == '[' ? ']' : '}'; };
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    const char *at = text.data() + i;
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      size_t end = text.find_first_of("\r\n", i);
      i = end == StringRef::npos ? text.size() : end;
      continue;
    }
    if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      if (end == StringRef::npos) {
        onError(SMLoc::getFromPointer(at),
                "unterminated block comment: '/*' without '*/'");
        return false;
      }
      i = end + 1;
      continue;
    }
    if (c == '"') {
      size_t j = i + 1;
      while (j < text.size() && text[j] != '"' && text[j] != '\n') {
        if (text[j] == '\\')
          ++j;
        ++j;
      }
      // The lexer reports an unterminated string; past it, brackets can no
      // longer be matched reliably.
      if (j >= text.size() || text[j] != '"')
        matchBrackets = false;
      i = j;
      continue;
    }
    // No expression spans a '{', '}' or ';' (newlines carry no meaning).
    if (c == '{' || c == '}' || c == ';')
      operatorsInRow = 0;
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
      continue;
    bool arrow = c == '-' && i + 1 < text.size() && text[i + 1] == '>';
    if ((c == '+' || (c == '-' && !arrow) || c == '*' || c == '/' ||
         c == '@') &&
        ++operatorsInRow > kMaxOperatorsInRow) {
      onError(SMLoc::getFromPointer(at),
              "more than " + std::to_string(kMaxOperatorsInRow) +
                  " operators in a row (with no '{', '}' or ';' between "
                  "them)");
      return false;
    }
    if (c == '-') {
      if (++minusRun > kMaxNestingDepth) {
        onError(SMLoc::getFromPointer(at),
                "more than " + std::to_string(kMaxNestingDepth) +
                    " consecutive '-' operators");
        return false;
      }
      continue;
    }
    minusRun = 0;
    if (c == '(' || c == '[' || c == '{') {
      open.push_back(at);
      if (open.size() > kMaxNestingDepth) {
        onError(SMLoc::getFromPointer(at),
                "brackets nest deeper than " +
                    std::to_string(kMaxNestingDepth) + " levels");
        return false;
      }
    } else if ((c == ')' || c == ']' || c == '}') && !bracketError &&
               matchBrackets) {
      if (open.empty()) {
        bracketError.emplace(SMLoc::getFromPointer(at),
                             std::string("unmatched '") + c + "'");
        continue;
      }
      char expected = closerOf(*open.back());
      if (c != expected) {
        bracketError.emplace(SMLoc::getFromPointer(at),
                             std::string("'") + c + "' does not close the '" +
                                 *open.back() + "' at " +
                                 lineColumn(text, open.back()) +
                                 "; expected '" + expected + "'");
        continue;
      }
      open.pop_back();
    }
  }
  if (!open.empty() && !bracketError && matchBrackets)
    bracketError.emplace(SMLoc::getFromPointer(open.back()),
                         std::string("'") + *open.back() +
                             "' is never closed; expected '" +
                             closerOf(*open.back()) + "'");
  return true;
}

/// Maps ANTLR's code-point indices back to bytes of the source buffer.
class SourceMap {
public:
  explicit SourceMap(StringRef text) : text(text) {
    for (size_t i = 0; i < text.size();) {
      offsets.push_back(i);
      unsigned length = llvm::getNumBytesForUTF8(text[i]);
      i += length ? length : 1;
    }
    offsets.push_back(text.size());
  }
  SMLoc at(size_t codePoint) const {
    size_t byte = codePoint < offsets.size() ? offsets[codePoint] : text.size();
    return SMLoc::getFromPointer(text.data() + byte);
  }
  SMLoc start(antlr4::Token *token) const {
    if (token->getType() == antlr4::Token::EOF)
      return SMLoc::getFromPointer(text.data() + text.size());
    return at(token->getStartIndex());
  }
  SMLoc end(antlr4::Token *token) const {
    if (token->getType() == antlr4::Token::EOF)
      return SMLoc::getFromPointer(text.data() + text.size());
    return at(token->getStopIndex() + 1);
  }
  SMRange range(antlr4::ParserRuleContext *ctx) const {
    return SMRange(start(ctx->getStart()),
                   end(ctx->getStop() ? ctx->getStop() : ctx->getStart()));
  }

private:
  StringRef text;
  std::vector<size_t> offsets;
};

/// Turns ANTLR's syntax errors into Loom diagnostics.
class ErrorListener : public antlr4::BaseErrorListener {
public:
  ErrorListener(const SourceMap &map, const SyntaxErrorHandler &onError)
      : map(map), onError(onError) {}

  void syntaxError(antlr4::Recognizer *recognizer, antlr4::Token *offending,
                   size_t, size_t, const std::string &msg,
                   std::exception_ptr) override {
    ++count;
    if (count > kMaxErrors)
      return;
    if (count == kMaxErrors) {
      onError(offending ? map.start(offending) : SMLoc(),
              "too many syntax errors; stopping here");
      return;
    }
    if (!offending) {
      onError(SMLoc(), msg);
      return;
    }
    if (std::optional<std::pair<antlr4::Token *, std::string>> inner =
            diagnoseCallArguments(recognizer, offending)) {
      onError(map.start(inner->first), inner->second);
      return;
    }
    onError(map.start(offending), describe(offending, msg));
  }

  unsigned getCount() const { return count; }

private:
  static constexpr unsigned kMaxErrors = 20;

  /// ANTLR names tokens by their rule (ID, DTYPE); users read words.
  static std::string friendlyTokens(std::string set) {
    static const std::pair<const char *, const char *> kNames[] = {
        {"ID", "a name"},       {"DTYPE", "an element type"},
        {"INT", "an integer"},  {"FLOAT", "a number"},
        {"STRING", "a string"}, {"<EOF>", "end of file"}};
    std::string out;
    size_t i = 0;
    while (i < set.size()) {
      bool replaced = false;
      for (auto [token, name] : kNames) {
        size_t length = strlen(token);
        bool atWord =
            i == 0 || !isalnum(static_cast<unsigned char>(set[i - 1]));
        if (atWord && set.compare(i, length, token) == 0 &&
            (i + length == set.size() ||
             !isalnum(static_cast<unsigned char>(set[i + length])))) {
          out += name;
          i += length;
          replaced = true;
          break;
        }
      }
      if (!replaced)
        out += set[i++];
    }
    return out;
  }

  /// When a call's arguments do not parse, ANTLR's prediction gives up at the
  /// call's '('. Re-read them alone from that '(' to find the real mistake.
  std::optional<std::pair<antlr4::Token *, std::string>>
  diagnoseCallArguments(antlr4::Recognizer *recognizer,
                        antlr4::Token *offending) {
    auto *parser = dynamic_cast<antlr4::Parser *>(recognizer);
    if (!parser || offending->getText() != "(" ||
        offending->getTokenIndex() == 0)
      return std::nullopt;
    antlr4::TokenStream *tokens = parser->getTokenStream();
    if (tokens->get(offending->getTokenIndex() - 1)->getType() != LoomLexer::ID)
      return std::nullopt;
    std::vector<std::unique_ptr<antlr4::Token>> copies;
    for (size_t i = offending->getTokenIndex(); i < tokens->size(); ++i) {
      copies.push_back(std::make_unique<antlr4::CommonToken>(tokens->get(i)));
      if (tokens->get(i)->getType() == antlr4::Token::EOF)
        break;
    }
    antlr4::ListTokenSource source(std::move(copies));
    antlr4::CommonTokenStream subTokens(&source);
    LoomParser sub(&subTokens);
    struct FirstError : antlr4::BaseErrorListener {
      antlr4::Token *token = nullptr;
      std::string message;
      void syntaxError(antlr4::Recognizer *, antlr4::Token *at, size_t, size_t,
                       const std::string &msg, std::exception_ptr) override {
        if (!token && at) {
          token = at;
          message = msg;
        }
      }
    } first;
    sub.removeErrorListeners();
    sub.addErrorListener(&first);
    sub.callArgs();
    if (!first.token || first.token->getText() == "(")
      return std::nullopt;
    // Map the copy back to the original token by its position in the file.
    antlr4::Token *original = nullptr;
    for (size_t i = offending->getTokenIndex(); i < tokens->size(); ++i)
      if (tokens->get(i)->getStartIndex() == first.token->getStartIndex() &&
          tokens->get(i)->getType() == first.token->getType()) {
        original = tokens->get(i);
        break;
      }
    if (!original)
      return std::nullopt;
    return std::make_pair(original, describe(original, first.message));
  }

  static std::string quote(const std::string &text) {
    if (text == "<EOF>")
      return "end of file";
    std::string shown = text.size() > 40 ? text.substr(0, 40) + "..." : text;
    return "'" + shown + "'";
  }

  std::string describe(antlr4::Token *offending, const std::string &msg) {
    if (offending->getType() == LoomLexer::UNKNOWN_CHAR) {
      if (offending->getText() == "\"")
        return "unterminated string literal";
      return "unexpected character " + quote(offending->getText());
    }
    StringRef text(msg);
    std::string found = quote(offending->getText());
    if (text.starts_with("missing ")) {
      auto [what, at] = text.drop_front(8).split(" at ");
      return "expected " + friendlyTokens(what.str()) + " before " + found;
    }
    std::string result = "unexpected " + found;
    size_t expecting = text.find("expecting ");
    if (expecting != StringRef::npos) {
      StringRef set = text.drop_front(expecting + 10);
      // Long alternatives lists help nobody; short ones say what to write.
      if (set.count(',') < 6)
        result += "; expected " + friendlyTokens(set.str());
    }
    return result;
  }

  const SourceMap &map;
  const SyntaxErrorHandler &onError;
  unsigned count = 0;
};

/// Builds the AST from ANTLR's parse tree.
class ASTBuilder {
public:
  ASTBuilder(const SourceMap &map, const SyntaxErrorHandler &onError)
      : map(map), onError(onError) {}

  unsigned getErrorCount() const { return errorCount; }

  void build(LoomParser::FileContext *ctx, File &file) {
    for (LoomParser::TopDeclContext *top : ctx->topDecl())
      buildDecls(top, file.decls);
  }

private:
  Ident ident(antlr4::tree::TerminalNode *node) {
    return Ident{node->getText(), map.start(node->getSymbol())};
  }

  void buildDecls(LoomParser::TopDeclContext *ctx, std::vector<Decl> &out) {
    Decl decl;
    if (auto *import = ctx->importDecl()) {
      decl.kind = Decl::Import;
      decl.importDecl = std::make_unique<ImportDecl>();
      decl.importDecl->path = unquote(import->STRING()->getText());
      decl.importDecl->loc = map.start(import->getStart());
    } else if (auto *mesh = ctx->meshDecl()) {
      decl.kind = Decl::Mesh;
      decl.mesh = std::make_unique<MeshDecl>();
      decl.mesh->name = ident(mesh->ID());
      for (auto *axis : mesh->meshAxis())
        decl.mesh->axes.emplace_back(ident(axis->ID()),
                                     buildExpr(axis->expr()));
    } else if (auto *constant = ctx->constDecl()) {
      // `const A = 1, B = 2` becomes one Const declaration per name.
      for (auto *item : constant->constItem()) {
        Decl one;
        one.kind = Decl::Const;
        one.constant = std::make_unique<ConstDecl>();
        one.constant->name = ident(item->ID());
        one.constant->value = buildExpr(item->expr());
        out.push_back(std::move(one));
      }
      return;
    } else if (auto *block = ctx->blockDecl()) {
      decl.kind = Decl::Block;
      decl.block = buildBlock(block);
    } else {
      decl.kind = Decl::Train;
      decl.train = buildTrain(ctx->trainDecl());
    }
    out.push_back(std::move(decl));
  }

  std::unique_ptr<BlockDecl> buildBlock(LoomParser::BlockDeclContext *ctx) {
    auto block = std::make_unique<BlockDecl>();
    block->isModel = ctx->kind->getType() == LoomParser::MODEL;
    block->name = ident(ctx->ID());
    for (auto *arg : ctx->arg())
      block->args.push_back(
          Arg{ident(arg->ID()), buildType(arg->tensorType())});
    for (auto *result : ctx->results()->result()) {
      Result r;
      if (result->ID())
        r.name = ident(result->ID());
      r.type = buildType(result->tensorType());
      block->results.push_back(std::move(r));
    }
    for (auto *stmt : ctx->body()->stmt())
      block->body.push_back(buildStmt(stmt));
    block->end = map.start(ctx->body()->getStop());
    return block;
  }

  TensorType buildType(LoomParser::TensorTypeContext *ctx) {
    TensorType type;
    type.dtype = ident(ctx->DTYPE());
    type.range = map.range(ctx);
    type.hasShape = ctx->children.size() > 1;
    for (auto *dim : ctx->dim()) {
      Dim d;
      d.size = buildExpr(dim->expr());
      d.axes = buildAxes(dim);
      type.dims.push_back(std::move(d));
    }
    return type;
  }

  AxisSpec buildAxes(LoomParser::DimContext *ctx) {
    AxisSpec spec;
    auto *list = ctx->axisList();
    if (!list)
      return spec;
    spec.present = true;
    spec.loc = map.start(list->getStart());
    for (auto *id : list->ID())
      spec.axes.push_back(ident(id));
    if (spec.axes.size() == 1 && spec.axes.front().name == "_") {
      spec.axes.clear();
      spec.replicated = true;
    }
    spec.open = ctx->open != nullptr;
    if (ctx->priority)
      spec.priority = Ident{ctx->priority->getText(), map.start(ctx->priority)};
    return spec;
  }

  StmtPtr buildStmt(LoomParser::StmtContext *ctx) {
    auto stmt = std::make_unique<Stmt>();
    stmt->range = map.range(ctx);
    if (auto *param = dynamic_cast<LoomParser::ParamStmtContext *>(ctx)) {
      stmt->kind = StmtKind::Param;
      stmt->paramName = ident(param->ID());
      stmt->paramType = buildType(param->tensorType());
      auto *init = param->initializer();
      stmt->initName = ident(init->ID());
      stmt->initHasParens = init->children.size() > 1;
      for (auto *arg : init->expr())
        stmt->initArgs.push_back(buildExpr(arg));
    } else if (auto *repeat =
                   dynamic_cast<LoomParser::RepeatStmtContext *>(ctx)) {
      stmt->kind = StmtKind::Repeat;
      for (auto *id : repeat->targets()->ID())
        stmt->targets.push_back(ident(id));
      stmt->count = buildExpr(repeat->count);
      if (repeat->name)
        stmt->repeatName =
            Ident{repeat->name->getText(), map.start(repeat->name)};
      for (auto *inner : repeat->stmt())
        stmt->body.push_back(buildStmt(inner));
      // expr(0) is the count; the rest are the values the body yields.
      auto exprs = repeat->expr();
      for (size_t i = 1; i < exprs.size(); ++i)
        stmt->values.push_back(buildExpr(exprs[i]));
    } else if (auto *assign =
                   dynamic_cast<LoomParser::AssignStmtContext *>(ctx)) {
      stmt->kind = StmtKind::Assign;
      for (auto *id : assign->targets()->ID())
        stmt->targets.push_back(ident(id));
      stmt->values.push_back(buildExpr(assign->expr()));
    } else {
      auto *ret = dynamic_cast<LoomParser::ReturnStmtContext *>(ctx);
      stmt->kind = StmtKind::Return;
      for (auto *value : ret->expr())
        stmt->values.push_back(buildExpr(value));
    }
    return stmt;
  }

  ExprPtr makeExpr(ExprKind kind, antlr4::ParserRuleContext *ctx) {
    auto expr = std::make_unique<Expr>();
    expr->kind = kind;
    expr->range = map.range(ctx);
    return expr;
  }

  ExprPtr buildExpr(LoomParser::ExprContext *ctx) {
    if (auto *primary = dynamic_cast<LoomParser::PrimaryExprContext *>(ctx))
      return buildPrimary(primary->primary());
    if (auto *neg = dynamic_cast<LoomParser::NegExprContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::Neg, ctx);
      expr->operands.push_back(buildExpr(neg->expr()));
      return expr;
    }
    ExprPtr expr = makeExpr(ExprKind::Binary, ctx);
    antlr4::Token *op;
    std::vector<LoomParser::ExprContext *> sides;
    if (auto *mul = dynamic_cast<LoomParser::MulExprContext *>(ctx)) {
      op = mul->op;
      sides = mul->expr();
    } else {
      auto *add = dynamic_cast<LoomParser::AddExprContext *>(ctx);
      op = add->op;
      sides = add->expr();
    }
    expr->text = op->getText();
    // Binary operators are reported at the operator.
    expr->opLoc = map.start(op);
    for (auto *side : sides)
      expr->operands.push_back(buildExpr(side));
    return expr;
  }

  static std::string unquote(const std::string &quoted) {
    std::string text;
    for (size_t i = 1; i + 1 < quoted.size(); ++i) {
      char c = quoted[i];
      if (c == '\\' && i + 2 < quoted.size()) {
        char next = quoted[++i];
        text += next == 'n' ? '\n' : next == 't' ? '\t' : next;
        continue;
      }
      text += c;
    }
    return text;
  }

  ExprPtr buildPrimary(LoomParser::PrimaryContext *ctx) {
    if (auto *lit = dynamic_cast<LoomParser::IntLitContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::Int, ctx);
      if (StringRef(lit->INT()->getText()).getAsInteger(10, expr->intValue))
        expr->outOfRange = true;
      return expr;
    }
    if (auto *lit = dynamic_cast<LoomParser::FloatLitContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::Float, ctx);
      if (StringRef(lit->FLOAT()->getText())
              .getAsDouble(expr->floatValue,
                           /*AllowInexact=*/true) ||
          !std::isfinite(expr->floatValue))
        expr->outOfRange = true;
      return expr;
    }
    if (auto *lit = dynamic_cast<LoomParser::StringLitContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::String, ctx);
      expr->text = unquote(lit->STRING()->getText());
      return expr;
    }
    if (dynamic_cast<LoomParser::BoolLitContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::Bool, ctx);
      expr->intValue = ctx->getText() == "true";
      return expr;
    }
    if (auto *lit = dynamic_cast<LoomParser::DtypeLitContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::DType, ctx);
      expr->text = lit->DTYPE()->getText();
      return expr;
    }
    if (auto *call = dynamic_cast<LoomParser::NameOrCallExprContext *>(ctx)) {
      if (!call->args) {
        ExprPtr expr = makeExpr(ExprKind::Name, ctx);
        expr->text = call->ID(0)->getText();
        return expr;
      }
      ExprPtr expr = makeExpr(ExprKind::Call, ctx);
      expr->text = call->ID(0)->getText();
      for (auto *arg : call->args->callArg()) {
        Ident name;
        if (arg->ID())
          name = ident(arg->ID());
        else
          name.loc = map.start(arg->getStart());
        expr->argNames.push_back(name);
        expr->operands.push_back(buildExpr(arg->expr()));
      }
      if (call->name)
        expr->callName = Ident{call->name->getText(), map.start(call->name)};
      return expr;
    }
    if (auto *paren = dynamic_cast<LoomParser::ParenExprContext *>(ctx))
      return buildExpr(paren->expr());
    if (auto *tuple = dynamic_cast<LoomParser::TupleExprContext *>(ctx)) {
      ExprPtr expr = makeExpr(ExprKind::Tuple, ctx);
      for (auto *item : tuple->expr())
        expr->operands.push_back(buildExpr(item));
      return expr;
    }
    if (auto *repeat =
            dynamic_cast<LoomParser::MisplacedRepeatContext *>(ctx)) {
      ++errorCount;
      onError(map.start(repeat->REPEAT()->getSymbol()),
              "'repeat' is a statement, not a value: write `x = repeat N { "
              "... }` on a line of its own, then use x");
      // A placeholder: parseFile returns no AST once an error is counted.
      return makeExpr(ExprKind::Tuple, ctx);
    }
    auto *list = dynamic_cast<LoomParser::ListExprContext *>(ctx);
    ExprPtr expr = makeExpr(ExprKind::List, ctx);
    for (auto *dim : list->dim()) {
      ExprPtr item = buildExpr(dim->expr());
      item->axes = buildAxes(dim);
      expr->operands.push_back(std::move(item));
    }
    return expr;
  }

  std::unique_ptr<TrainDecl> buildTrain(LoomParser::TrainDeclContext *ctx) {
    auto train = std::make_unique<TrainDecl>();
    train->model = ident(ctx->ID());
    for (auto *clause : ctx->trainClause()) {
      TrainClause c;
      c.range = map.range(clause);
      if (auto *stage =
              dynamic_cast<LoomParser::StageClauseContext *>(clause)) {
        c.isStage = true;
        c.key = Ident{"stage", map.start(stage->getStart())};
        c.value = buildExpr(stage->expr());
        for (auto *ref : stage->stageRef()) {
          StageRef r;
          r.name = ident(ref->ID());
          if (ref->expr().size() == 2) {
            r.begin = buildExpr(ref->expr(0));
            r.end = buildExpr(ref->expr(1));
          }
          c.stageRefs.push_back(std::move(r));
        }
      } else {
        auto *key = dynamic_cast<LoomParser::KeyClauseContext *>(clause);
        c.key = Ident{key->key->getText(), map.start(key->key)};
        if (key->trainValue())
          c.value = buildExpr(key->trainValue()->expr());
        if (auto *axes = key->axisList()) {
          AxisSpec spec;
          spec.present = true;
          spec.loc = map.start(axes->getStart());
          for (auto *id : axes->ID())
            spec.axes.push_back(ident(id));
          c.over = std::move(spec);
        }
      }
      train->clauses.push_back(std::move(c));
    }
    return train;
  }

  const SourceMap &map;
  const SyntaxErrorHandler &onError;
  unsigned errorCount = 0;
};

} // namespace

std::unique_ptr<File> loom::parseFile(llvm::SourceMgr &sourceMgr,
                                      unsigned bufferId,
                                      const SyntaxErrorHandler &onError) {
  const llvm::MemoryBuffer *buffer = sourceMgr.getMemoryBuffer(bufferId);
  StringRef text = buffer->getBuffer();
  if (const char *bad = findInvalidUTF8(text)) {
    onError(SMLoc::getFromPointer(bad),
            "invalid UTF-8 byte 0x" +
                llvm::utohexstr(static_cast<unsigned char>(*bad)) +
                "; Loom source files must be UTF-8");
    return nullptr;
  }
  BracketError bracketError;
  if (!checkStructure(text, onError, bracketError))
    return nullptr;
  // Syntax errors are collected first: when brackets do not match, that is
  // the one error worth reading, and ANTLR's would only echo it.
  std::vector<std::pair<SMLoc, std::string>> syntaxErrors;
  SyntaxErrorHandler collect = [&](SMLoc loc, const std::string &message) {
    syntaxErrors.emplace_back(loc, message);
  };
  auto reportSyntaxErrors = [&] {
    if (bracketError) {
      onError(bracketError->first, bracketError->second);
      return;
    }
    for (auto &[loc, message] : syntaxErrors)
      onError(loc, message);
  };
  try {
    SourceMap map(text);
    antlr4::ANTLRInputStream input(text.str());
    LoomLexer lexer(&input);
    antlr4::CommonTokenStream tokens(&lexer);
    ErrorListener listener(map, collect);
    lexer.removeErrorListeners();
    lexer.addErrorListener(&listener);
    // Lex everything first: syntax messages may re-read later tokens.
    tokens.fill();
    LoomParser parser(&tokens);
    parser.removeErrorListeners();
    parser.addErrorListener(&listener);
    LoomParser::FileContext *tree = parser.file();
    if (listener.getCount() > 0) {
      reportSyntaxErrors();
      return nullptr;
    }
    auto file = std::make_unique<File>();
    file->path = buffer->getBufferIdentifier().str();
    file->bufferId = bufferId;
    ASTBuilder builder(map, onError);
    builder.build(tree, *file);
    if (builder.getErrorCount() > 0)
      return nullptr;
    return file;
  } catch (const std::exception &error) {
    onError(SMLoc::getFromPointer(text.data()),
            std::string("internal parser error: ") + error.what());
  } catch (...) {
    onError(SMLoc::getFromPointer(text.data()), "internal parser error");
  }
  return nullptr;
}
