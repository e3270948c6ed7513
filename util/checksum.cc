#include "util/checksum.h"

#include <xxhash.h>

namespace zipg {

uint64_t Checksum64(const void* data, size_t size) { return XXH3_64bits(data, size); }

}  // namespace zipg
