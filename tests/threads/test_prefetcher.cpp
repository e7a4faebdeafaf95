// The prefetch pipeline (train/prefetcher.h): items come in order whatever the depth, the builder
// never runs more than `depth` ahead of the consumer, and a builder's error reaches the consumer at
// the item that failed; nothing is built after an item that ends the sequence.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "train/prefetcher.h"

namespace ddgnn {
namespace {

// A builder that returns the item's index and counts the items it built.
std::function<int(size_t)> counting(std::atomic<int>& built) {
  return [&built](size_t i) {
    ++built;
    return int(i);
  };
}

TEST(Prefetcher, ItemsInOrderAtEveryDepth) {
  for (int64_t depth : {0, 1, 2, 5}) {
    Prefetcher<int> p(
        20, depth, [](size_t i) { return int(i * i); }, false);
    ASSERT_EQ(p.size(), 20u);
    for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p.next(), int(i * i)) << "depth " << depth;
  }
}

TEST(Prefetcher, BuildsAtMostDepthAhead) {
  std::atomic<int> built{0};
  Prefetcher<int> p(10, 2, counting(built), false);
  // Waits (up to 10 s) until `n` items are built, then a little longer: none more may come.
  auto settles_at = [&](int n) {
    for (int k = 0; k < 1000 && built.load() < n; ++k)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return built.load();
  };
  EXPECT_EQ(settles_at(2), 2);  // the queue is full: the builder waits
  EXPECT_EQ(p.next(), 0);
  EXPECT_EQ(settles_at(3), 3);
}

TEST(Prefetcher, BuilderErrorReachesTheConsumerInOrder) {
  for (int64_t depth : {0, 3}) {
    Prefetcher<int> p(
        6, depth,
        [](size_t i) {
          if (i == 4) throw std::runtime_error("item 4 failed");
          return int(i);
        },
        false);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(p.next(), i);
    try {
      p.next();
      FAIL() << "no error at item 4, depth " << depth;
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "item 4 failed");
    }
  }
}

TEST(Prefetcher, DestroyedBeforeTheEndStopsTheBuilder) {
  std::atomic<int> built{0};
  {
    Prefetcher<int> p(1000, 4, counting(built), false);
    EXPECT_EQ(p.next(), 0);
  }
  EXPECT_LE(built.load(), 6);
}

// The training loop stops every rank at the step whose batch carries a stop request; the builder
// must not start the item after it (on several ranks that item's collective would wait for
// builders that stopped first).
TEST(Prefetcher, NothingIsBuiltAfterTheLastItem) {
  for (int64_t depth : {1, 3}) {
    std::atomic<int> built{0};
    Prefetcher<int> p(1000, depth, counting(built), false, [](const int& i) { return i == 4; });
    for (int i = 0; i <= 4; ++i) EXPECT_EQ(p.next(), i);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_EQ(built.load(), 5) << "depth " << depth;
    EXPECT_THROW(p.next(), std::logic_error);
  }
}

}  // namespace
}  // namespace ddgnn
