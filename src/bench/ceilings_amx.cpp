// The AMX bf16 tile-product ceiling (compiled with AMX flags, see CMakeLists.txt; called only
// when amx_usable()): 4 accumulator tiles fed by 2 A and 2 B tiles that stay in the tile
// registers, so the loop is bound by TDPBF16PS alone.
#include <immintrin.h>

#include <cstdint>

#include "bench/ceilings.h"
#include "kernels/amx_tiles.h"

namespace dsinfer::bench_detail {

float amx_loop(int64_t iterations, float seed) {
  load_tile_config();  // the same configuration as the fast-mode kernels
  alignas(64) uint16_t ab[16 * 32];
  const uint16_t tiny =
      static_cast<uint16_t>(0x3000 + static_cast<int>(seed) % 16);  // ~2^-31: sums stay finite
  for (uint16_t& v : ab) v = tiny;
  alignas(64) float c[16 * 16];
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  _tile_loadd(4, ab, 64);
  _tile_loadd(5, ab, 64);
  _tile_loadd(6, ab, 64);
  _tile_loadd(7, ab, 64);
  for (int64_t i = 0; i < iterations; ++i) {
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c, 64);
  float sum = c[0];
  _tile_stored(3, c, 64);
  return sum + c[255];
}

}  // namespace dsinfer::bench_detail
