// Scratch vectors whose data starts on a 64-byte cache line. A 32-byte load from a buffer that malloc placed 16
// bytes off a line straddles two lines every other chunk; the fused step's activation rows (row strides that are
// multiples of 64 bytes: 576 and 1536 floats) then never do. Measured single-threaded on the 2-core EPYC, the fp32
// batch tile over the model's shapes at 121 rows: x 16 bytes off a line 69-71 GFLOP/s, on a line 72-79.
#pragma once
#include <cstddef>
#include <new>
#include <vector>

namespace ilab {

template <typename T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, kAlign); }
  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};

template <typename T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace ilab
