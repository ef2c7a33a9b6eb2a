// Reads an ELF shared library's dynamic symbol table without loading it
// (loading runs its constructors), for `softrnic doctor` to tell softrnic's
// libibverbs.so.1 from rdma-core's.
#pragma once

#include <string>

namespace softrnic::tools {

enum class ElfSymbol {
  kDefined,      // the library defines the symbol
  kAbsent,       // a library of this machine's kind without it
  kNotLoadable,  // unreadable, not ELF, or for another machine: the
                 // dynamic loader skips such a file and searches on
};

ElfSymbol FindDynamicSymbol(const std::string& path, const std::string& symbol);

}  // namespace softrnic::tools
