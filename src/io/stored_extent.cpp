#include "io/stored_extent.hpp"

#include "io/filtered_chunks.hpp"
#include "io/hdf5_util.hpp"
#include "mpiddp/common/error.hpp"

namespace mpiddp::h5 {

std::vector<hsize_t> dataset_extent(hid_t dataset) {
  Handle space(H5Dget_space(dataset), H5Sclose);
  const int rank = space ? H5Sget_simple_extent_ndims(space.get()) : -1;
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  if (!dims.empty()) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

std::string extent_text(const std::vector<hsize_t>& dims) {
  std::string text;
  for (const hsize_t d : dims) text += (text.empty() ? "" : " x ") + std::to_string(d);
  return text.empty() ? "a scalar" : text;
}

void check_stored_extent(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where) {
  // Doubles: a hostile extent's product may not fit in 64 bits.
  double values = 1.0;
  for (const hsize_t d : dims) values *= static_cast<double>(d);
  if (values == 0.0) return;
  Handle type(H5Dget_type(dataset), H5Tclose);
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  const double declared = values * static_cast<double>(H5Tget_size(type.get()));
  const std::string declares = where + " declares " + extent_text(dims) + " values";
  switch (H5Pget_layout(plist.get())) {
    case H5D_CONTIGUOUS: {
      if (H5Pget_external_count(plist.get()) > 0) return;  // stored in other files
      const double stored = static_cast<double>(H5Dget_storage_size(dataset));
      if (stored < declared)
        throw InputError(declares + " (" + std::to_string(static_cast<unsigned long long>(declared)) +
                         " bytes) but stores only " + std::to_string(static_cast<unsigned long long>(stored)) +
                         " bytes (never written, or not a real data set)");
      return;
    }
    case H5D_CHUNKED: {
      std::vector<hsize_t> chunk(dims.size());
      if (H5Pget_chunk(plist.get(), static_cast<int>(chunk.size()), chunk.data()) != static_cast<int>(dims.size()))
        throw InputError(where + ": unreadable chunk layout");
      double expected = 1.0;
      for (std::size_t i = 0; i < dims.size(); ++i)
        expected *= static_cast<double>((dims[i] + chunk[i] - 1) / chunk[i]);
      hsize_t written = 0;  // a dataset never written has no chunk index to ask
      if (H5Dget_storage_size(dataset) > 0) {
        Handle space(H5Dget_space(dataset), H5Sclose);
        if (H5Dget_num_chunks(dataset, space.get(), &written) < 0) throw InputError(where + ": unreadable chunk index");
      }
      if (static_cast<double>(written) < expected)
        throw InputError(declares + " in " + std::to_string(static_cast<unsigned long long>(expected)) +
                         " chunks but stores only " + std::to_string(written) + " (never written, or written in part)");
      check_filtered_chunks(dataset, dims, where);
      return;
    }
    default:
      return;
  }
}

void check_plain_stored(hid_t dataset, const std::vector<hsize_t>& dims, const std::string& where) {
  Handle plist(H5Dget_create_plist(dataset), H5Pclose);
  const int filters = plist ? H5Pget_nfilters(plist.get()) : -1;
  if (filters != 0)
    throw InputError(where + " is stored through " + (filters < 0 ? std::string("unreadable") : std::to_string(filters)) +
                     " HDF5 filter(s) (compressed): mpiddp writes checkpoints plain, and a damaged compressed "
                     "chunk would read as uninitialised memory");
  check_stored_extent(dataset, dims, where);
}

}  // namespace mpiddp::h5
