#include "flat_range.hpp"

#include <algorithm>

#include "mpiddp/common/error.hpp"
#include "io/hdf5_util.hpp"
#include "io/stored_extent.hpp"

namespace mpiddp {
namespace {

// Selects the row-major element range [a, b) of a dataspace of shape `dims` as
// a union of at most 2 x rank hyperslabs: a partial head, whole blocks, a
// partial tail, each refined one dimension down. HDF5 walks any hyperslab
// selection in row-major order, which is the flat order.
class RangeSelection {
 public:
  RangeSelection(hid_t space, std::vector<hsize_t> dims) : space_(space), dims_(std::move(dims)), start_(dims_.size()) {}
  void select(hsize_t a, hsize_t b) { within(0, a, b); }

 private:
  hsize_t stride(std::size_t k) const {
    hsize_t s = 1;
    for (std::size_t d = k + 1; d < dims_.size(); ++d) s *= dims_[d];
    return s;
  }
  // Indices [first, first + n) of dimension k (under the fixed prefix start_[0..k)), whole below.
  void block(std::size_t k, hsize_t first, hsize_t n) {
    std::vector<hsize_t> start(start_.begin(), start_.end()), count(dims_.size(), 1);
    for (std::size_t d = k; d < dims_.size(); ++d) {
      start[d] = 0;
      count[d] = dims_[d];
    }
    start[k] = first;
    count[k] = n;
    const herr_t status = H5Sselect_hyperslab(space_, any_ ? H5S_SELECT_OR : H5S_SELECT_SET, start.data(), nullptr,
                                              count.data(), nullptr);
    if (status < 0) throw RuntimeError("HDF5: cannot select a shard's range");
    any_ = true;
  }
  // [a, b) of the elements under the prefix start_[0..k), dimension k and below.
  void within(std::size_t k, hsize_t a, hsize_t b) {
    if (a >= b) return;
    const hsize_t s = stride(k);
    const hsize_t i0 = a / s, i1 = (b - 1) / s;
    if (a % s == 0 && b % s == 0) return block(k, i0, i1 - i0 + 1);  // whole sub-blocks only
    if (i0 == i1) {
      start_[k] = i0;
      return within(k + 1, a - i0 * s, b - i0 * s);
    }
    start_[k] = i0;
    within(k + 1, a - i0 * s, s);
    if (i1 > i0 + 1) block(k, i0 + 1, i1 - i0 - 1);
    start_[k] = i1;
    within(k + 1, 0, b - i1 * s);
  }

  hid_t space_;
  std::vector<hsize_t> dims_;
  std::vector<hsize_t> start_;
  bool any_ = false;
};

template <class Transfer>
void each_piece(hid_t group, const std::vector<Parameter>& list, std::size_t begin, std::size_t end,
                const std::string& path, Transfer&& transfer) {
  for (const Parameter& p : list) {
    const std::size_t first = std::max(begin, p.offset), last = std::min(end, p.offset + p.count);
    if (first >= last) continue;
    const std::string what = path + ": optimizer array " + p.name;
    h5::Handle dataset(h5::check_id<RuntimeError>(H5Dopen2(group, p.name.c_str(), H5P_DEFAULT), what + ": cannot open"),
                       H5Dclose);
    h5::Handle file_space(H5Dget_space(dataset.get()), H5Sclose);
    const int rank = H5Sget_simple_extent_ndims(file_space.get());
    std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
    H5Sget_simple_extent_dims(file_space.get(), dims.data(), nullptr);
    if (dims.empty()) dims.push_back(1);
    RangeSelection(file_space.get(), dims).select(first - p.offset, last - p.offset);
    const hsize_t n = last - first;
    h5::Handle memory_space(H5Screate_simple(1, &n, nullptr), H5Sclose);
    transfer(dataset.get(), memory_space.get(), file_space.get(), first - begin, what);
  }
}

}  // namespace

void write_flat_shard(hid_t group, const std::vector<Parameter>& list, std::size_t begin, std::size_t end,
                      const float* data, const std::string& path) {
  each_piece(group, list, begin, end, path, [&](hid_t dataset, hid_t memory, hid_t file, std::size_t at, const std::string& what) {
    h5::check<RuntimeError>(H5Dwrite(dataset, H5T_NATIVE_FLOAT, memory, file, H5P_DEFAULT, data + at),
                            what + ": cannot write (disk full?)");
  });
}

void read_flat_shard(hid_t group, const std::vector<Parameter>& list, std::size_t begin, std::size_t end, float* data,
                     const std::string& path) {
  each_piece(group, list, begin, end, path, [&](hid_t dataset, hid_t memory, hid_t file, std::size_t at, const std::string& what) {
    h5::check_plain_stored(dataset, h5::dataset_extent(dataset), what);  // never written: fill values
    h5::check<InputError>(H5Dread(dataset, H5T_NATIVE_FLOAT, memory, file, H5P_DEFAULT, data + at),
                          what + ": cannot read (damaged file?)");
  });
}

}  // namespace mpiddp
