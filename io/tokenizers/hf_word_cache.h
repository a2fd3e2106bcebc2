// A per-thread memo of piece -> ids for the tokenizer.json models (hf_bpe.cc, hf_unigram.cc):
// each model instance has a serial number (never reused), and each thread keeps the caches of
// the 4 models it used last, so concurrent encodes share nothing mutable.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace anvil::io::hf_internal {

// Pieces longer than this (bytes) are not cached; a cache holding kMaxCachedWords is emptied.
inline constexpr size_t kMaxCachedBytes = 64;
inline constexpr size_t kMaxCachedWords = size_t{1} << 16;

using WordCache = absl::flat_hash_map<std::string, std::vector<int32_t>>;

inline uint64_t new_cache_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

// The calling thread's cache for the model with this serial number.
inline WordCache& thread_word_cache(uint64_t serial) {
  struct Entry {
    uint64_t serial;
    std::unique_ptr<WordCache> cache;
  };
  thread_local std::vector<Entry> caches;
  for (size_t i = 0; i < caches.size(); ++i) {
    if (caches[i].serial == serial) {
      if (i > 0) std::swap(caches[i], caches[0]);
      return *caches[0].cache;
    }
  }
  if (caches.size() == 4) caches.pop_back();
  caches.insert(caches.begin(), Entry{serial, std::make_unique<WordCache>()});
  return *caches[0].cache;
}

// Appends the ids of `piece` to *out: from the cache, or from compute(piece, &ids), then kept.
template <typename Compute>
void cached_ids(uint64_t serial, absl::string_view piece, std::vector<int32_t>* out,
                Compute compute) {
  if (piece.size() > kMaxCachedBytes) {
    compute(piece, out);
    return;
  }
  WordCache& cache = thread_word_cache(serial);
  const auto it = cache.find(piece);
  if (it != cache.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> ids;
  compute(piece, &ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cache.size() >= kMaxCachedWords) cache.clear();
  cache.emplace(std::string(piece), std::move(ids));
}

}  // namespace anvil::io::hf_internal
