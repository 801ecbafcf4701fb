// The AMX tile configuration every tile user in dsinfer shares: palette 1, all 8 tiles 16 rows
// x 64 bytes. Include only from *_amx.cpp files (compiled with AMX flags).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace dsinfer {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Loads the configuration into this thread's tile state.
inline void load_tile_config() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.colsb[t] = 64;
    config.rows[t] = 16;
  }
  _tile_loadconfig(&config);
}

}  // namespace dsinfer
