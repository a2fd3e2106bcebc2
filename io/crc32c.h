// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of checkpoint files: the
// same value as iSCSI / ext4 / Google's crc32c library, e.g. crc32c("123456789") = 0xE3069283.
// crc32c_extend continues a running checksum over the next bytes, so a file can be checksummed
// as it is written or read in pieces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace anvil::io {

// The checksum of data[0, n) appended to bytes whose checksum was `crc` (0 for the start).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t n);
inline uint32_t crc32c(const void* data, size_t n) { return crc32c_extend(0, data, n); }

// The checksum of a whole file; NotFound / DataLoss naming the path when it cannot be read.
absl::StatusOr<uint32_t> crc32c_file(const std::string& path);

}  // namespace anvil::io
