//===- LoomAttrs.cpp - Loom attributes ------------------------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "dialects/loom/IR/LoomAttrs.h"
#include "dialects/loom/IR/LoomDialect.h"
#include "dialects/loom/IR/TypeInference.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace loom;

#include "dialects/loom/IR/LoomEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/loom/IR/LoomAttrs.cpp.inc"

void LoomDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/loom/IR/LoomAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// InitAttr
//===----------------------------------------------------------------------===//

static bool initTakesArguments(InitKind kind) {
  return kind == InitKind::Normal || kind == InitKind::Uniform;
}

Attribute InitAttr::parse(AsmParser &parser, Type) {
  StringRef keyword;
  if (parser.parseLess() || parser.parseKeyword(&keyword))
    return {};
  std::optional<InitKind> kind = symbolizeInitKind(keyword);
  if (!kind) {
    parser.emitError(parser.getCurrentLocation(),
                     "expected normal, uniform, zeros or ones");
    return {};
  }
  double a = 0, b = 0;
  if (initTakesArguments(*kind) &&
      (parser.parseLParen() || parser.parseFloat(a) || parser.parseComma() ||
       parser.parseFloat(b) || parser.parseRParen()))
    return {};
  if (parser.parseGreater())
    return {};
  return InitAttr::get(parser.getContext(), *kind, llvm::APFloat(a),
                       llvm::APFloat(b));
}

void InitAttr::print(AsmPrinter &printer) const {
  printer << '<' << stringifyInitKind(getKind());
  if (initTakesArguments(getKind()))
    printer << '(' << formatShortestDouble(getA().convertToDouble()) << ", "
            << formatShortestDouble(getB().convertToDouble()) << ')';
  printer << '>';
}

//===----------------------------------------------------------------------===//
// DimShardingAttr
//===----------------------------------------------------------------------===//

DimShardingAttr DimShardingAttr::parseBody(AsmParser &parser) {
  SmallVector<StringAttr> axes;
  bool isClosed = true;
  if (parser.parseLBrace())
    return {};
  if (failed(parser.parseOptionalRBrace())) {
    do {
      if (succeeded(parser.parseOptionalQuestion())) {
        isClosed = false;
        break;
      }
      std::string axis;
      if (parser.parseString(&axis))
        return {};
      axes.push_back(StringAttr::get(parser.getContext(), axis));
    } while (succeeded(parser.parseOptionalComma()));
    if (parser.parseRBrace())
      return {};
  }
  std::optional<int64_t> priority;
  StringRef keyword;
  SMLoc keywordLoc = parser.getCurrentLocation();
  if (succeeded(parser.parseOptionalKeyword(&keyword))) {
    int64_t value;
    if (!keyword.consume_front("p") || keyword.getAsInteger(10, value)) {
      parser.emitError(keywordLoc, "expected a priority such as 'p0'");
      return {};
    }
    priority = value;
  }
  return DimShardingAttr::get(parser.getContext(), axes, isClosed, priority);
}

void DimShardingAttr::printBody(AsmPrinter &printer) const {
  printer << '{';
  llvm::interleaveComma(getAxes(), printer,
                        [&](StringAttr axis) { printer << axis; });
  if (!getIsClosed())
    printer << (getAxes().empty() ? "?" : ", ?");
  printer << '}';
  if (getPriority())
    printer << 'p' << *getPriority();
}

Attribute DimShardingAttr::parse(AsmParser &parser, Type) {
  if (parser.parseLess())
    return {};
  DimShardingAttr attr = parseBody(parser);
  if (!attr || parser.parseGreater())
    return {};
  return attr;
}

void DimShardingAttr::print(AsmPrinter &printer) const {
  printer << '<';
  printBody(printer);
  printer << '>';
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

Attribute ShardingAttr::parse(AsmParser &parser, Type) {
  FlatSymbolRefAttr mesh;
  SmallVector<DimShardingAttr> dims;
  SmallVector<StringAttr> partialAxes;
  ReductionKind kind = ReductionKind::Sum;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseLess() || parser.parseAttribute(mesh) || parser.parseComma())
    return {};
  auto parseDim = [&]() -> ParseResult {
    DimShardingAttr dim = DimShardingAttr::parseBody(parser);
    if (!dim)
      return failure();
    dims.push_back(dim);
    return success();
  };
  if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Square, parseDim))
    return {};
  if (succeeded(parser.parseOptionalComma())) {
    StringRef kindName;
    if (parser.parseKeyword("partial") || parser.parseEqual() ||
        parser.parseKeyword(&kindName))
      return {};
    std::optional<ReductionKind> parsed = symbolizeReductionKind(kindName);
    if (!parsed) {
      parser.emitError(parser.getCurrentLocation(), "expected sum, max or min");
      return {};
    }
    kind = *parsed;
    auto parseAxis = [&]() -> ParseResult {
      std::string axis;
      if (parser.parseString(&axis))
        return failure();
      partialAxes.push_back(StringAttr::get(parser.getContext(), axis));
      return success();
    };
    if (parser.parseCommaSeparatedList(AsmParser::Delimiter::Paren, parseAxis))
      return {};
  }
  if (parser.parseGreater())
    return {};
  return parser.getChecked<ShardingAttr>(loc, parser.getContext(), mesh, dims,
                                         partialAxes, kind);
}

void ShardingAttr::print(AsmPrinter &printer) const {
  printer << '<' << getMesh() << ", [";
  llvm::interleaveComma(getDims(), printer,
                        [&](DimShardingAttr dim) { dim.printBody(printer); });
  printer << ']';
  if (!getPartialAxes().empty()) {
    printer << ", partial = " << stringifyReductionKind(getPartialKind())
            << '(';
    llvm::interleaveComma(getPartialAxes(), printer,
                          [&](StringAttr axis) { printer << axis; });
    printer << ')';
  }
  printer << '>';
}

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr,
                                   ArrayRef<DimShardingAttr> dims,
                                   ArrayRef<StringAttr> partialAxes,
                                   ReductionKind) {
  llvm::SmallDenseSet<StringAttr> seen;
  for (DimShardingAttr dim : dims)
    for (StringAttr axis : dim.getAxes())
      if (!seen.insert(axis).second)
        return emitError() << "mesh axis " << axis
                           << " is used more than once in one sharding";
  for (StringAttr axis : partialAxes)
    if (!seen.insert(axis).second)
      return emitError() << "mesh axis " << axis
                         << " is used more than once in one sharding";
  return success();
}

SmallVector<StringAttr> ShardingAttr::getAllAxes() const {
  SmallVector<StringAttr> axes;
  for (DimShardingAttr dim : getDims())
    llvm::append_range(axes, dim.getAxes());
  llvm::append_range(axes, getPartialAxes());
  return axes;
}

ShardingAttr ShardingAttr::getReplicated(MLIRContext *ctx,
                                         FlatSymbolRefAttr mesh, int64_t rank,
                                         bool closed) {
  SmallVector<DimShardingAttr> dims(
      rank, DimShardingAttr::get(ctx, {}, closed, std::nullopt));
  return ShardingAttr::get(ctx, mesh, dims, {}, ReductionKind::Sum);
}
