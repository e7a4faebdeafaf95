// libFuzzer target: the extended XYZ reader on any bytes, with read buffers from 16 bytes up (the
// buffer-growth paths), then the checks convert applies to each frame it accepts (cell rule,
// outlier scan, neighbour counts on small frames).
#include <cstdint>

#include "fuzz/fuzz_util.h"
#include "loader/cell.h"
#include "loader/extxyz.h"
#include "loader/outliers.h"
#include "loader/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddgnn;
  if (size < 1) return 0;
  const size_t buffer = size_t(16) << (data[0] % 12);  // 16 B .. 32 KiB
  fuzz::MemFile file(data + 1, size - 1);
  fuzz::expect_clean([&] {
    ExtxyzKeys keys;
    keys.require_energy = (data[0] & 0x80) != 0;
    ExtxyzReader reader(file.path(), keys, buffer);
    Frame frame;
    OutlierScan scan;
    while (reader.next(frame)) {
      const bool pbc[3] = {frame.pbc[0], frame.pbc[1], frame.pbc[2]};
      if (!cell_problem(frame.cell.data(), pbc).empty()) continue;  // convert refuses these
      scan.add(frame);
      if (frame.n_atoms() <= 32) count_neighbours(frame, 3.0);
    }
    scan.finish();
  });
  return 0;
}
