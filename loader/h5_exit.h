// HDF5's clean-up at exit, without <hdf5.h> (for a program's main).
#pragma once

namespace ddgnn::h5 {

// For a program's main, before any other HDF5 call: HDF5's clean-up at exit runs from here, and
// is skipped once note_failed_close() was called (a file whose writes failed, a full disk or a
// file-size limit, cannot be closed cleanly, and HDF5's own clean-up at exit then crashes).
void take_over_library_exit();
void note_failed_close();

}  // namespace ddgnn::h5
