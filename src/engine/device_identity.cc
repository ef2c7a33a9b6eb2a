#include "engine/device_identity.h"

namespace softrnic::engine {

uint64_t NodeGuidFromGids(std::span<const transport::Gid> gids) {
  uint64_t guid = 0x02005E0000000000ull;
  if (!gids.empty()) {
    const auto& g = gids.back().raw;
    guid |= (uint64_t{g[12]} << 24) | (uint64_t{g[13]} << 16) | (uint64_t{g[14]} << 8) | g[15];
  }
  return __builtin_bswap64(guid);
}

}  // namespace softrnic::engine
