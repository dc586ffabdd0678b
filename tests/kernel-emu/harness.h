// What the emulator's harnesses (mma_emu.cpp, att_emu.cpp) share: a seeded generator
// (splitmix64; the same inputs every run) and the failure count their exit status reports.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace emu_harness {
inline uint64_t rng_state = 0x9E3779B97F4A7C15ull;
inline uint64_t rnd() {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// Uniform in [-1, 1).
inline float frand() { return (float)((double)(rnd() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

inline int failures = 0;
inline void fail(const char* who, const std::string& what) {
    std::fprintf(stderr, "%s: FAIL %s\n", who, what.c_str());
    ++failures;
}
}  // namespace emu_harness
