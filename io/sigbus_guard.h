// A SIGBUS handler that names the file: touching a page of a memory-mapped file past its end
// (the file was truncated after it was mapped) raises SIGBUS, which would end the process with
// a bare "Bus error". Mappings registered here are looked up by the faulting address; the
// handler writes "anvil: SIGBUS reading PATH at byte N: ..." to stderr, restores the previous
// disposition and returns, so the fault repeats and ends the process as before (with a core
// dump where enabled). IndexedDataset registers its .bin mapping.
#pragma once

#include <cstddef>
#include <string>

namespace anvil::io {

// Registers [data, data + bytes) as a mapping of `path`; installs the handler on first use.
// At most 256 mappings are named at a time (further ones are not, and still fault as before).
void register_mapping(const void* data, size_t bytes, const std::string& path);

// Forgets the mapping that starts at `data` (before munmap).
void unregister_mapping(const void* data);

}  // namespace anvil::io
