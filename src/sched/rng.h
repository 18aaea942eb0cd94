// A seeded random generator whose sequence is the same on every platform (std::mt19937_64 is
// specified exactly; std's distributions are not, so Fabrica draws through Uniform below).
#pragma once

#include <cstdint>
#include <random>

namespace fabrica {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Next() { return gen_(); }
  // Uniform in [0, n). REQUIRES: n > 0.
  uint64_t Uniform(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t v;
    do {
      v = gen_();
    } while (v >= limit);
    return v % n;
  }
  double UniformDouble() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }

 private:
  std::mt19937_64 gen_;
};

}  // namespace fabrica
