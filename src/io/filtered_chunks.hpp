#pragma once
// HDF5 does not check that a compressed chunk inflates to its chunk's size: one
// that inflates short reads as whatever HDF5's buffer held (a silently wrong
// sample), one that inflates far past it (a few KB growing to GBs) costs that
// much memory and time. Shards that other tools wrote compressed are therefore
// inflated once here, chunk by chunk, with the output bounded, before anything
// reads them.
#include <hdf5.h>

#include <string>
#include <vector>

namespace mpiddp::h5 {

// For a chunked dataset with filters: every filter must be one mpiddp can undo
// and bound (deflate, shuffle, fletcher32), and every stored chunk must come back
// to exactly its chunk's size. Throws InputError naming `where`, the filter or
// the chunk's position otherwise. A dataset without filters passes unread.
void check_filtered_chunks(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where);

}  // namespace mpiddp::h5
