//===- SourceLocatorTest.cpp - Line and column lookups --------------------===//
//
// Part of the Loom project.
//
//===----------------------------------------------------------------------===//

#include "loom/Frontend/AST.h"

#include "llvm/Support/MemoryBuffer.h"
#include "gtest/gtest.h"

using namespace loom::ast;

namespace {

TEST(SourceLocatorTest, AgreesWithSourceMgr) {
  llvm::SourceMgr sourceMgr;
  const char *text = "mesh m = [dp: 2]\n\nconst A = 1,\n  B = 2\n";
  unsigned id = sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBuffer(text, "a.loom"), llvm::SMLoc());
  const char *start = sourceMgr.getMemoryBuffer(id)->getBufferStart();
  SourceLocator locator(sourceMgr);
  for (size_t offset = 0; offset < strlen(text); ++offset) {
    llvm::SMLoc loc = llvm::SMLoc::getFromPointer(start + offset);
    EXPECT_EQ(locator.lineAndColumn(loc), sourceMgr.getLineAndColumn(loc, id))
        << "offset " << offset;
  }
  EXPECT_EQ(locator.bufferName(llvm::SMLoc::getFromPointer(start)), "a.loom");
  EXPECT_EQ(locator.lineAndColumn(llvm::SMLoc()),
            (std::pair<unsigned, unsigned>{0, 0}));
}

} // namespace
