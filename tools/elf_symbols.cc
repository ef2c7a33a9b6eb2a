#include "elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace softrnic::tools {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#else
constexpr uint16_t kMachine = EM_NONE;  // accept any
#endif

// Bounds-checked view of the mapped file: a truncated or hostile file gives
// kNotLoadable, never a read past its end.
struct View {
  const unsigned char* data;
  size_t size;
  bool Has(uint64_t off, uint64_t len) const { return off <= size && len <= size - off; }
};

ElfSymbol Scan(const View& v, const std::string& symbol) {
  if (!v.Has(0, sizeof(Elf64_Ehdr))) return ElfSymbol::kNotLoadable;
  Elf64_Ehdr eh;
  std::memcpy(&eh, v.data, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_type != ET_DYN || (kMachine != EM_NONE && eh.e_machine != kMachine) ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    return ElfSymbol::kNotLoadable;
  if (!v.Has(eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr))) return ElfSymbol::kNotLoadable;
  auto section = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, v.data + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    const Elf64_Shdr sym = section(i);
    if (sym.sh_type != SHT_DYNSYM || sym.sh_link >= eh.e_shnum) continue;
    const Elf64_Shdr str = section(sym.sh_link);
    if (!v.Has(sym.sh_offset, sym.sh_size) || !v.Has(str.sh_offset, str.sh_size))
      return ElfSymbol::kNotLoadable;
    const char* strtab = reinterpret_cast<const char*>(v.data + str.sh_offset);
    for (uint64_t off = 0; off + sizeof(Elf64_Sym) <= sym.sh_size; off += sizeof(Elf64_Sym)) {
      Elf64_Sym s;
      std::memcpy(&s, v.data + sym.sh_offset + off, sizeof s);
      if (s.st_shndx == SHN_UNDEF || s.st_name >= str.sh_size) continue;
      const size_t room = str.sh_size - s.st_name;
      if (strnlen(strtab + s.st_name, room) == symbol.size() && room > symbol.size() &&
          std::memcmp(strtab + s.st_name, symbol.data(), symbol.size()) == 0)
        return ElfSymbol::kDefined;
    }
  }
  return ElfSymbol::kAbsent;
}

}  // namespace

ElfSymbol FindDynamicSymbol(const std::string& path, const std::string& symbol) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ElfSymbol::kNotLoadable;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
    close(fd);
    return ElfSymbol::kNotLoadable;
  }
  void* map = mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return ElfSymbol::kNotLoadable;
  const ElfSymbol r = Scan({static_cast<const unsigned char*>(map), size_t(st.st_size)}, symbol);
  munmap(map, size_t(st.st_size));
  return r;
}

}  // namespace softrnic::tools
