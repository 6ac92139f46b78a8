#pragma once
// A dataset's header declares its extent; a hostile or half-written file can
// declare far more than it stores (2e9 features in a few bytes). Before anything
// is sized from the extent, check that the file really holds that much data.
#include <hdf5.h>

#include <string>
#include <vector>

namespace mpiddp::h5 {

// Throws InputError naming `where` and the declared extent when the dataset's
// storage is missing or partial: a contiguous dataset with fewer bytes than its
// extent needs, a chunked one with chunks never written, or a compressed chunk
// that does not inflate to its size (check_filtered_chunks). Compact and virtual
// layouts are accepted as they are.
void check_stored_extent(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where);

// check_stored_extent, and for the files mpiddp writes itself (checkpoints,
// model.init): no HDF5 filters. HDF5 does not check that a compressed chunk
// inflates to its full size, and the rest would read as uninitialised memory.
void check_plain_stored(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where);

// A dataset's extent (empty for a scalar).
std::vector<hsize_t> dataset_extent(hid_t dataset);

// "4 x 2000000000": an extent for messages.
std::string extent_text(const std::vector<hsize_t>& dims);

}  // namespace mpiddp::h5
