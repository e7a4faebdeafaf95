// The distributed store and its fetchers on real MPI ranks (ctest runs this under mpiexec -n 1,
// 2 and 4 --oversubscribe): every backend delivers byte-identical records for the same (seed,
// epoch), equal to the graphs read straight from the HDF5 file; every sample exactly once per
// epoch across ranks; replica groups; a memory budget refused on every rank without a hang.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "../common/h5_edit.h"
#include "../common/lj_dataset.h"
#include "../common/mpi_test.h"
#include "comm/fetch.h"
#include "comm/mpi.h"
#include "comm/store.h"
#include "core/error.h"
#include "loader/packed.h"
#include "loader/sampler.h"
#include "loader/store.h"

namespace ddgnn {
namespace {

using testing::world_rank;
using testing::world_size;

// One dataset for the whole job: rank 0 writes it, everyone opens it.
class StoreTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    s_dir = testing::shared_temp_dir([](const std::string& dir) {
      testing::LjOptions o;
      o.n_frames = 37;  // not a multiple of any rank count or batch size
      o.n_atoms = 5;
      o.charges = true;          // an extra column travels too
      o.single_atom_frame = 11;  // records of different sizes
      testing::write_lj_dataset(dir + "/d.h5", o);
    });
    s_dataset = new Dataset(s_dir + "/d.h5");
  }
  static void TearDownTestSuite() {
    delete s_dataset;
    testing::remove_shared_temp_dir(s_dir);
  }

  // The packed records of `ids` made from direct reads of the file (the reference).
  static std::vector<uint8_t> reference(const std::vector<int64_t>& ids) {
    std::vector<uint8_t> out;
    for (int64_t id : ids) {
      pack_records(s_dataset->read(id, 1), out);
    }
    return out;
  }

  static std::string s_dir;
  static Dataset* s_dataset;
};
std::string StoreTest::s_dir;
Dataset* StoreTest::s_dataset = nullptr;

// Runs two epochs of the sampler through `fetcher`: records equal the reference, and the ids
// of all ranks of the sampler's world cover the dataset exactly once per epoch.
void check_epochs(Fetcher& fetcher, MPI_Comm sampler_comm, int64_t n,
                  const std::function<std::vector<uint8_t>(const std::vector<int64_t>&)>& ref) {
  int rank = 0, world = 1;
  MPI_Comm_rank(sampler_comm, &rank);
  MPI_Comm_size(sampler_comm, &world);
  SamplerOptions o;
  o.n_samples = n;
  o.batch_size = 3;
  o.rank = rank;
  o.world = world;
  o.seed = 5;
  for (int64_t epoch = 1; epoch <= 2; ++epoch) {
    const auto batches = sampler_epoch(o, epoch);
    EXPECT_EQ(int64_t(batches.size()), sampler_steps(o));
    std::vector<int64_t> mine;
    for (const auto& ids : batches) {
      Fetched f;
      fetcher.fetch(ids.data(), int64_t(ids.size()), f);
      ASSERT_EQ(f.offsets.size(), ids.size() + 1);
      EXPECT_TRUE(f.bytes == ref(ids)) << to_string(fetcher.backend()) << " epoch " << epoch;
      mine.insert(mine.end(), ids.begin(), ids.end());
    }
    int count = int(mine.size());
    std::vector<int> counts(static_cast<size_t>(world)), displs(static_cast<size_t>(world));
    MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, sampler_comm);
    int total = 0;
    for (int r = 0; r < world; ++r) displs[size_t(r)] = total, total += counts[size_t(r)];
    std::vector<int64_t> all(static_cast<size_t>(total));
    MPI_Allgatherv(mine.data(), count, MPI_INT64_T, all.data(), counts.data(), displs.data(),
                   MPI_INT64_T, sampler_comm);
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expected(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) expected[size_t(i)] = i;
    EXPECT_EQ(all, expected) << to_string(fetcher.backend())
                             << ": every sample exactly once in epoch " << epoch;
  }
}

TEST_F(StoreTest, EveryBackendDeliversTheFileBytesAndEachSampleOncePerEpoch) {
  StoreLoad load = load_store(*s_dataset, MPI_COMM_WORLD);
  const ByteStore& store = *load.store;
  const Partition part{37, world_size()};
  EXPECT_EQ(store.count(), part.count(world_rank()));
  EXPECT_EQ(store.group_bytes(), int64_t(reference([] {
                                           std::vector<int64_t> all(37);
                                           for (int i = 0; i < 37; ++i) all[size_t(i)] = i;
                                           return all;
                                         }())
                                             .size()));
  for (const Backend backend : {Backend::kRma, Backend::kCollective}) {
    auto fetcher = make_fetcher(backend, *s_dataset, load.store.get());
    check_epochs(*fetcher, MPI_COMM_WORLD, 37, reference);
    // Unsorted ids with repeats and runs of consecutive ids, across owners.
    const std::vector<int64_t> ids = {36, 0, 1, 2, 2, 17, 18, 5, 36, 11, 12, 13, 14, 15};
    Fetched f;
    fetcher->fetch(ids.data(), int64_t(ids.size()), f);
    EXPECT_TRUE(f.bytes == reference(ids)) << to_string(backend);
    // Unpacked, the graphs equal the file's.
    const GraphBlock b = unpack_records(f.bytes.data(), f.offsets.data(), int64_t(ids.size()),
                                        s_dataset->extra_columns(), s_dataset->graph_columns());
    const GraphBlock direct = s_dataset->read(17, 1);
    EXPECT_EQ(b.n_atoms[5], direct.n_atoms[0]);
    EXPECT_EQ(b.energy[5], direct.energy[0]);
    EXPECT_TRUE(
        std::equal(direct.pos.begin(), direct.pos.end(), b.pos.begin() + b.atom_start[5] * 3));
    EXPECT_TRUE(std::equal(direct.extra[0].begin(), direct.extra[0].end(),
                           b.extra[0].begin() + b.atom_start[5]));
    // An empty request (a rank whose last batch is empty) is fine, collectively too.
    fetcher->fetch(nullptr, 0, f);
    EXPECT_EQ(f.offsets, std::vector<int64_t>{0});
    // A bad id names itself.
    const int64_t bad = 37;
    try {
      fetcher->fetch(&bad, 1, f);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("sample id 37"), std::string::npos) << e.what();
    }
  }
}

// shm on the real node (every rank here shares one), and with "nodes" of 2 ranks, so that
// half of the records come through the created window (the cross-node path).
TEST_F(StoreTest, ShmReadsNodeRecordsByPointerAndOthersByRma) {
  for (int node_size : {0, 2}) {
    StoreOptions o;
    o.shared = true;
    o.node_size = node_size;
    StoreLoad load = load_store(*s_dataset, MPI_COMM_WORLD, o);
    EXPECT_EQ(load.store->byte_window() != MPI_WIN_NULL, node_size == 2 && world_size() > 2);
    auto fetcher = make_fetcher(Backend::kShm, *s_dataset, load.store.get());
    check_epochs(*fetcher, MPI_COMM_WORLD, 37, reference);
    const std::vector<int64_t> ids = {36, 0, 1, 2, 2, 17, 18, 5, 36};
    Fetched f;
    fetcher->fetch(ids.data(), int64_t(ids.size()), f);
    EXPECT_TRUE(f.bytes == reference(ids)) << "node size " << node_size;
    // The rma and collective fetchers read a shared store too (when it has windows).
    if (load.store->byte_window() != MPI_WIN_NULL)
      check_epochs(*make_fetcher(Backend::kRma, *s_dataset, load.store.get()), MPI_COMM_WORLD, 37,
                   reference);
    check_epochs(*make_fetcher(Backend::kCollective, *s_dataset, load.store.get()), MPI_COMM_WORLD,
                 37, reference);
  }
  StoreLoad plain = load_store(*s_dataset, MPI_COMM_WORLD);
  EXPECT_THROW(make_fetcher(Backend::kShm, *s_dataset, plain.store.get()), Error);
}

TEST_F(StoreTest, FileBackendReadsTheSameRecords) {
  auto fetcher = make_fetcher(Backend::kFile, *s_dataset, nullptr);
  check_epochs(*fetcher, MPI_COMM_WORLD, 37, reference);
  const std::vector<int64_t> ids = {36, 0, 1, 2, 2, 17, 18, 5, 36};
  Fetched f;
  fetcher->fetch(ids.data(), int64_t(ids.size()), f);
  EXPECT_TRUE(f.bytes == reference(ids));
}

TEST_F(StoreTest, CollectiveRoundsSmallerThanARecordStillDeliver) {
  StoreLoad load = load_store(*s_dataset, MPI_COMM_WORLD);
  FetcherOptions o;
  o.round_bytes = 100;  // below every record: one record per peer pair and round
  auto fetcher = make_fetcher(Backend::kCollective, *s_dataset, load.store.get(), o);
  check_epochs(*fetcher, MPI_COMM_WORLD, 37, reference);
}

TEST_F(StoreTest, ReplicatedHoldsEverythingOnEveryRank) {
  StoreLoad load = load_store(*s_dataset, MPI_COMM_SELF);
  EXPECT_EQ(load.store->count(), 37);
  auto fetcher = make_fetcher(Backend::kReplicated, *s_dataset, load.store.get());
  check_epochs(*fetcher, MPI_COMM_WORLD, 37, reference);
}

TEST_F(StoreTest, ReplicaGroupsFetchInsideTheirGroup) {
  const int p = world_size();
  const int width = p >= 2 && p % 2 == 0 ? 2 : 0;
  LoaderGroup group(MPI_COMM_WORLD, width);
  EXPECT_EQ(group.size(), width > 0 ? 2 : p);
  EXPECT_EQ(group.count(), p / group.size());
  StoreOptions o;
  o.world = MPI_COMM_WORLD;  // several groups: their windows are created in turns
  StoreLoad load = load_store(*s_dataset, group.comm(), o);
  EXPECT_EQ(load.store->group_bytes(), load_store(*s_dataset, MPI_COMM_SELF).store->n_bytes());
  auto fetcher = make_fetcher(Backend::kRma, *s_dataset, load.store.get());
  // Each group is its own sampler world: it sees every sample once per epoch.
  check_epochs(*fetcher, group.comm(), 37, reference);
  if (p >= 3) {
    EXPECT_THROW(LoaderGroup(MPI_COMM_WORLD, p - 1), ConfigError);
  }
}

TEST_F(StoreTest, OverBudgetIsRefusedOnEveryRankWithTheFigure) {
  try {
    StoreOptions o;
    o.budget_bytes = 1024;
    load_store(*s_dataset, MPI_COMM_WORLD, o);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("MiB on the most loaded rank"), std::string::npos)
        << e.what();
  }
  // Every rank got here: a collective still works.
  int one = 1, sum = 0;
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_EQ(sum, world_size());
}

// A corrupted checksum block is reported by the ranks whose part reads it (a DataError naming
// the array and rows); every other rank stops with a CommError quoting the first of them and
// leaving the report to it, no hang.
TEST(StoreErrors, CorruptedPartitionIsReportedByItsOwnerAndStopsEveryRank) {
  const std::string dir = testing::shared_temp_dir([](const std::string& d) {
    testing::LjOptions o;
    o.n_frames = 1400;
    o.n_atoms = 100;  // about 6.7 MB of records: seven checksum blocks of 1 MiB
    testing::write_lj_dataset(d + "/d.h5", o);
    // The last byte of the records: the last checksum block of 1 MiB.
    const int64_t bytes = Dataset(d + "/d.h5").record_bytes();  // closed before the edit
    testing::flip_record_byte(d + "/d.h5", hsize_t(bytes - 1));
  });
  {
    const Dataset ds(dir + "/d.h5");
    // Ranks whose graphs reach into the last block of the records read it.
    const Partition part{1400, world_size()};
    const int64_t last_block = (ds.record_bytes() - 1) / (int64_t(1) << 20) * (int64_t(1) << 20);
    ASSERT_GT(last_block, 0);
    const auto reads = [&](int r) {
      const int64_t end = part.first(r) + part.count(r);
      return (end < 1400 ? testing::record_start(dir + "/d.h5", hsize_t(end)) : ds.record_bytes()) >
             last_block;
    };
    const bool reads_bad_block = reads(world_rank());
    int first_reader = 0;
    while (!reads(first_reader)) ++first_reader;
    try {
      load_store(ds, MPI_COMM_WORLD);
      ADD_FAILURE() << "no error";
    } catch (const DataError& e) {
      EXPECT_TRUE(reads_bad_block) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum mismatch in array 'records'"),
                std::string::npos)
          << e.what();
    } catch (const CommError& e) {
      EXPECT_FALSE(reads_bad_block) << e.what();
      EXPECT_NE(std::string(e.what()).find("failed: "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
      // The report is that rank's: this one leaves it to it.
      EXPECT_EQ(e.reported_by(), first_reader) << e.what();
    }
  }
  testing::remove_shared_temp_dir(dir);
}

}  // namespace
}  // namespace ddgnn

int main(int argc, char** argv) {
  return ddgnn::testing::run_mpi_tests(argc, argv);
}
