// Philox-4x32-10, the counter-based generator behind rng_bit_generator (docs/ir.md): shared by
// the reference interpreter and the CPU executor's fast kernel, which must agree bit for bit.
//
// Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3" (SC'11), as
// Random123's philox4x32_R(10, ctr, key): ten rounds, the key bumped by the Weyl constants before
// every round but the first. Flat element i of rng_bit_generator(key, counter) is word i % 4 of
// Philox4x32_10(key, AddToCounter(counter, i / 4)).
#pragma once

#include <array>
#include <cstdint>

namespace axle::ir {

using PhiloxBlock = std::array<uint32_t, 4>;

inline PhiloxBlock Philox4x32_10(std::array<uint32_t, 2> key, PhiloxBlock ctr) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
           static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
  }
  return ctr;
}

// `ctr` (word 0 least significant) plus j, modulo 2^128.
inline PhiloxBlock AddToCounter(PhiloxBlock ctr, uint64_t j) {
  uint64_t carry = j;
  for (uint32_t& word : ctr) {
    const uint64_t sum = uint64_t{word} + (carry & 0xffffffffu);
    word = static_cast<uint32_t>(sum);
    carry = (carry >> 32) + (sum >> 32);
  }
  return ctr;
}

}  // namespace axle::ir
