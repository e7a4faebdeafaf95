// The rma, collective and local fetchers over a ByteStore.
#include "comm/fetch.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "comm/mpi.h"
#include "core/error.h"

namespace ddgnn {

namespace {

void check_id(int64_t id, int64_t n_total) {
  if (id < 0 || id >= n_total)
    throw Error("fetch: sample id " + std::to_string(id) + " is outside the dataset (0 .. " +
                std::to_string(n_total - 1) + ")");
}

// Copies the records of ids owned by this rank straight from the store.
void copy_local(const ByteStore& s, int64_t id, uint8_t* dst) {
  const int64_t li = id - s.first();
  std::memcpy(dst, s.data() + s.offsets()[li], size_t(s.offsets()[li + 1] - s.offsets()[li]));
}

// MPI counts are int: one get or message moves at most this many bytes.
constexpr int64_t kMaxMessage = int64_t(1) << 30;

class LocalFetcher : public Fetcher {
 public:
  explicit LocalFetcher(ByteStore& s) : m_store(s) {}
  Backend backend() const override { return Backend::kReplicated; }
  bool collective() const override { return false; }
  void fetch(const int64_t* ids, int64_t n, Fetched& out) override {
    const ByteStore& s = m_store;
    out.offsets.assign(size_t(n + 1), 0);
    for (int64_t k = 0; k < n; ++k) {
      check_id(ids[k], s.partition().n);
      if (s.partition().owner(ids[k]) != s.rank())
        throw Error("fetch (local): sample " + std::to_string(ids[k]) + " is held by rank " +
                    std::to_string(s.partition().owner(ids[k])) + ", not this one");
      const int64_t li = ids[k] - s.first();
      out.offsets[size_t(k + 1)] = out.offsets[size_t(k)] + s.offsets()[li + 1] - s.offsets()[li];
    }
    out.bytes.resize(size_t(out.offsets.back()));
    for (int64_t k = 0; k < n; ++k)
      copy_local(s, ids[k], out.bytes.data() + out.offsets[size_t(k)]);
  }

 private:
  ByteStore& m_store;
};

class RmaFetcher : public Fetcher {
 public:
  // The store holds the passive-target epoch (lock_all from ready() to its destruction), so
  // any number of fetchers may read it.
  explicit RmaFetcher(ByteStore& s) : m_store(s) {
    if (s.byte_window() == MPI_WIN_NULL)
      throw Error("fetch (rma): the store has no window for one-sided access");
  }
  Backend backend() const override { return Backend::kRma; }
  bool collective() const override { return false; }

  void fetch(const int64_t* ids, int64_t n, Fetched& out) override {
    const ByteStore& s = m_store;
    const Partition& part = s.partition();
    // 1. [start, end) of every record: ours from memory, remote ones from the owners' offset
    //    windows (two int64 per id, one get each; a run of consecutive ids of one owner is one
    //    get of run + 1 offsets).
    m_bounds.assign(size_t(2 * n), 0);
    m_owner.resize(static_cast<size_t>(n));
    m_runs.clear();
    size_t n_run_offsets = 0;
    for (int64_t k = 0; k < n;) {
      check_id(ids[k], part.n);
      const int r = part.owner(ids[k]);
      const int64_t li = ids[k] - part.first(r);
      int64_t len = 1;  // a run of consecutive ids on the same owner
      while (k + len < n && ids[k + len] == ids[k] + len && ids[k + len] < part.first(r + 1)) ++len;
      for (int64_t j = 0; j < len; ++j) m_owner[size_t(k + j)] = r;
      if (r == s.rank()) {
        for (int64_t j = 0; j < len; ++j) {
          m_bounds[size_t(2 * (k + j))] = s.offsets()[li + j];
          m_bounds[size_t(2 * (k + j) + 1)] = s.offsets()[li + j + 1];
        }
      } else {
        m_runs.push_back({k, len});
        n_run_offsets += size_t(len + 1);
      }
      k += len;
    }
    // len + 1 offsets of every remote run into one scratch array (sized before any get).
    m_run_offsets.resize(n_run_offsets);
    size_t pos = 0;
    for (const auto& [k0, len] : m_runs) {
      const int r = m_owner[size_t(k0)];
      MPI_CHECK(MPI_Get(m_run_offsets.data() + pos, int(len + 1), MPI_INT64_T, r,
                        MPI_Aint(ids[k0] - part.first(r)), int(len + 1), MPI_INT64_T,
                        s.offset_window()));
      pos += size_t(len + 1);
    }
    const bool remote = !m_runs.empty();
    if (remote) MPI_CHECK(MPI_Win_flush_all(s.offset_window()));
    pos = 0;
    for (const auto& [k0, len] : m_runs) {
      for (int64_t j = 0; j < len; ++j) {
        m_bounds[size_t(2 * (k0 + j))] = m_run_offsets[pos + size_t(j)];
        m_bounds[size_t(2 * (k0 + j) + 1)] = m_run_offsets[pos + size_t(j) + 1];
      }
      pos += size_t(len + 1);
    }
    // 2. Payloads into place, one get per record (or per 1 GiB of one).
    out.offsets.assign(size_t(n + 1), 0);
    for (int64_t k = 0; k < n; ++k)
      out.offsets[size_t(k + 1)] =
          out.offsets[size_t(k)] + m_bounds[size_t(2 * k + 1)] - m_bounds[size_t(2 * k)];
    out.bytes.resize(size_t(out.offsets.back()));
    for (int64_t k = 0; k < n; ++k) {
      uint8_t* dst = out.bytes.data() + out.offsets[size_t(k)];
      const int r = m_owner[size_t(k)];
      if (r == s.rank()) {
        copy_local(s, ids[k], dst);
        continue;
      }
      for (int64_t done = 0, size = m_bounds[size_t(2 * k + 1)] - m_bounds[size_t(2 * k)];
           done < size;) {
        const int64_t chunk = std::min(kMaxMessage, size - done);
        MPI_CHECK(MPI_Get(dst + done, int(chunk), MPI_BYTE, r,
                          MPI_Aint(m_bounds[size_t(2 * k)] + done), int(chunk), MPI_BYTE,
                          s.byte_window()));
        done += chunk;
      }
    }
    if (remote) MPI_CHECK(MPI_Win_flush_all(s.byte_window()));
  }

 private:
  ByteStore& m_store;
  std::vector<int64_t> m_bounds, m_run_offsets;
  std::vector<int> m_owner;
  std::vector<std::pair<int64_t, int64_t>> m_runs;  // (first position, length) of remote runs
};

// Node-local records by pointer into the node's shared window; the rest through rma.
class ShmFetcher : public Fetcher {
 public:
  explicit ShmFetcher(ByteStore& s) : m_store(s) {
    if (!s.shared())
      throw Error("fetch (shm): the store is not in node shared memory (StoreOptions::shared)");
    if (s.byte_window() != MPI_WIN_NULL) m_remote = std::make_unique<RmaFetcher>(s);
  }
  Backend backend() const override { return Backend::kShm; }
  bool collective() const override { return false; }
  void fetch(const int64_t* ids, int64_t n, Fetched& out) override {
    const ByteStore& s = m_store;
    const Partition& part = s.partition();
    m_remote_ids.clear();
    m_remote_at.clear();
    out.offsets.assign(static_cast<size_t>(n + 1), 0);
    m_src.assign(static_cast<size_t>(n), nullptr);
    for (int64_t k = 0; k < n; ++k) {
      check_id(ids[k], part.n);
      const int r = part.owner(ids[k]);
      const int64_t* off = s.node_offsets(r);
      int64_t size = 0;
      if (off != nullptr) {
        const int64_t li = ids[k] - part.first(r);
        m_src[static_cast<size_t>(k)] = s.node_bytes(r) + off[li];
        size = off[li + 1] - off[li];
      } else {
        m_remote_at.push_back(k);
        m_remote_ids.push_back(ids[k]);
      }
      out.offsets[static_cast<size_t>(k + 1)] = size;
    }
    if (!m_remote_ids.empty()) {
      m_remote->fetch(m_remote_ids.data(), int64_t(m_remote_ids.size()), m_tmp);
      for (size_t j = 0; j < m_remote_at.size(); ++j)
        out.offsets[static_cast<size_t>(m_remote_at[j] + 1)] =
            m_tmp.offsets[j + 1] - m_tmp.offsets[j];
    }
    for (int64_t k = 0; k < n; ++k)
      out.offsets[static_cast<size_t>(k + 1)] += out.offsets[static_cast<size_t>(k)];
    out.bytes.resize(static_cast<size_t>(out.offsets.back()));
    for (int64_t k = 0; k < n; ++k)
      if (m_src[static_cast<size_t>(k)] != nullptr)
        std::memcpy(out.bytes.data() + out.offsets[static_cast<size_t>(k)],
                    m_src[static_cast<size_t>(k)],
                    static_cast<size_t>(out.offsets[static_cast<size_t>(k + 1)] -
                                        out.offsets[static_cast<size_t>(k)]));
    for (size_t j = 0; j < m_remote_at.size(); ++j)
      std::memcpy(out.bytes.data() + out.offsets[static_cast<size_t>(m_remote_at[j])],
                  m_tmp.bytes.data() + m_tmp.offsets[j],
                  static_cast<size_t>(m_tmp.offsets[j + 1] - m_tmp.offsets[j]));
  }

 private:
  ByteStore& m_store;
  std::unique_ptr<RmaFetcher> m_remote;
  std::vector<int64_t> m_remote_ids, m_remote_at;
  std::vector<const uint8_t*> m_src;
  Fetched m_tmp;
};

class CollectiveFetcher : public Fetcher {
 public:
  CollectiveFetcher(ByteStore& s, const FetcherOptions& o)
      : m_store(s), m_round_bytes(std::clamp<int64_t>(o.round_bytes, 1, kMaxMessage)) {}
  Backend backend() const override { return Backend::kCollective; }
  bool collective() const override { return true; }

  void fetch(const int64_t* ids, int64_t n, Fetched& out) override {
    const ByteStore& s = m_store;
    const Partition& part = s.partition();
    const int p = s.size(), me = s.rank();
    MPI_Comm comm = s.comm();
    const size_t np = static_cast<size_t>(p);
    // Requests per owner (local indices), and where each answer goes.
    std::vector<std::vector<int64_t>> req(np), slot(np);
    for (int64_t k = 0; k < n; ++k) {
      check_id(ids[k], part.n);
      const int r = part.owner(ids[k]);
      req[size_t(r)].push_back(ids[k] - part.first(r));
      slot[size_t(r)].push_back(k);
    }
    // 1. Request counts, then the requests.
    std::vector<int> send_n(np), recv_n(np), send_d(np), recv_d(np);
    for (int r = 0; r < p; ++r) send_n[size_t(r)] = int(req[size_t(r)].size());
    MPI_CHECK(MPI_Alltoall(send_n.data(), 1, MPI_INT, recv_n.data(), 1, MPI_INT, comm));
    const int send_total = displacements(send_n, send_d),
              recv_total = displacements(recv_n, recv_d);
    std::vector<int64_t> send_req(static_cast<size_t>(send_total)),
        recv_req(static_cast<size_t>(recv_total));
    for (int r = 0; r < p; ++r)
      std::copy(req[size_t(r)].begin(), req[size_t(r)].end(), send_req.begin() + send_d[size_t(r)]);
    MPI_CHECK(MPI_Alltoallv(send_req.data(), send_n.data(), send_d.data(), MPI_INT64_T,
                            recv_req.data(), recv_n.data(), recv_d.data(), MPI_INT64_T, comm));
    // 2. Sizes of what each asked for, back to the askers.
    std::vector<int64_t> reply_size(static_cast<size_t>(recv_total)),
        my_size(static_cast<size_t>(send_total));
    for (int i = 0; i < recv_total; ++i) {
      const int64_t li = recv_req[size_t(i)];
      if (li < 0 || li >= s.count())
        throw CommError("collective fetch: a request for local record " + std::to_string(li) +
                            " of rank " + std::to_string(me) + ", which holds " +
                            std::to_string(s.count()),
                        "every rank must use the same dataset and loader group");
      reply_size[size_t(i)] = s.offsets()[li + 1] - s.offsets()[li];
    }
    MPI_CHECK(MPI_Alltoallv(reply_size.data(), recv_n.data(), recv_d.data(), MPI_INT64_T,
                            my_size.data(), send_n.data(), send_d.data(), MPI_INT64_T, comm));
    out.offsets.assign(size_t(n + 1), 0);
    {
      std::vector<int64_t> size_of(static_cast<size_t>(n));
      for (int r = 0; r < p; ++r)
        for (size_t j = 0; j < slot[size_t(r)].size(); ++j)
          size_of[size_t(slot[size_t(r)][j])] = my_size[size_t(send_d[size_t(r)]) + j];
      for (int64_t k = 0; k < n; ++k)
        out.offsets[size_t(k + 1)] = out.offsets[size_t(k)] + size_of[size_t(k)];
    }
    out.bytes.resize(size_t(out.offsets.back()));
    // 3. Payloads in rounds: per peer pair, the items in request order, cut so that a round moves
    //    at most round_bytes (at least one item). Both sides know every size: they cut alike.
    //    Our own requests are copied, not sent.
    for (size_t j = 0; j < slot[size_t(me)].size(); ++j)
      copy_local(s, ids[slot[size_t(me)][j]],
                 out.bytes.data() + out.offsets[size_t(slot[size_t(me)][j])]);
    std::vector<size_t> send_next(np, 0), recv_next(np, 0);
    std::vector<int> sb_n(np), sb_d(np), rb_n(np), rb_d(np);
    std::vector<uint8_t> send_buf, recv_buf;
    while (true) {
      // One round's cut, for sending (we own, peer r asked) and receiving (we asked r).
      std::vector<size_t> send_end(np), recv_end(np);
      int64_t pending = 0;
      for (int r = 0; r < p; ++r) {
        if (r == me) {
          send_end[size_t(r)] = send_next[size_t(r)];
          recv_end[size_t(r)] = recv_next[size_t(r)];
          continue;
        }
        send_end[size_t(r)] = cut(reply_size.data() + recv_d[size_t(r)], size_t(recv_n[size_t(r)]),
                                  send_next[size_t(r)], sb_n[size_t(r)]);
        recv_end[size_t(r)] = cut(my_size.data() + send_d[size_t(r)], size_t(send_n[size_t(r)]),
                                  recv_next[size_t(r)], rb_n[size_t(r)]);
        pending += sb_n[size_t(r)] + rb_n[size_t(r)];
      }
      sb_n[size_t(me)] = rb_n[size_t(me)] = 0;
      // Everyone takes part in a round while anyone still has bytes to move.
      int64_t any = pending > 0 ? 1 : 0;
      MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &any, 1, MPI_INT64_T, MPI_MAX, comm));
      if (!any) break;
      send_buf.resize(size_t(displacements(sb_n, sb_d)));
      recv_buf.resize(size_t(displacements(rb_n, rb_d)));
      for (int r = 0; r < p; ++r) {
        uint8_t* dst = send_buf.data() + sb_d[size_t(r)];
        for (size_t i = send_next[size_t(r)]; i < send_end[size_t(r)]; ++i) {
          const int64_t li = recv_req[size_t(recv_d[size_t(r)]) + i];
          const int64_t size = s.offsets()[li + 1] - s.offsets()[li];
          std::memcpy(dst, s.data() + s.offsets()[li], size_t(size));
          dst += size;
        }
      }
      MPI_CHECK(MPI_Alltoallv(send_buf.data(), sb_n.data(), sb_d.data(), MPI_BYTE, recv_buf.data(),
                              rb_n.data(), rb_d.data(), MPI_BYTE, comm));
      for (int r = 0; r < p; ++r) {
        const uint8_t* src = recv_buf.data() + rb_d[size_t(r)];
        for (size_t i = recv_next[size_t(r)]; i < recv_end[size_t(r)]; ++i) {
          const int64_t k = slot[size_t(r)][i];
          const int64_t size = out.offsets[size_t(k + 1)] - out.offsets[size_t(k)];
          std::memcpy(out.bytes.data() + out.offsets[size_t(k)], src, size_t(size));
          src += size;
        }
        send_next[size_t(r)] = send_end[size_t(r)];
        recv_next[size_t(r)] = recv_end[size_t(r)];
      }
    }
  }

 private:
  // Exclusive prefix sums of counts into displs; returns the total (an int, as MPI needs).
  static int displacements(const std::vector<int>& counts, std::vector<int>& displs) {
    int64_t total = 0;
    for (size_t r = 0; r < counts.size(); ++r) {
      displs[r] = int(total);
      total += counts[r];
      if (total > INT_MAX)
        throw CommError("collective fetch: more than 2 GiB in one exchange",
                        "lower Loader.round_bytes or the batch size");
    }
    return int(total);
  }
  // From item `next` of sizes[0, n): the end of the items that fit in round_bytes (at least
  // one when any is left); their total bytes in `bytes`.
  size_t cut(const int64_t* sizes, size_t n, size_t next, int& bytes) const {
    int64_t total = 0;
    size_t end = next;
    while (end < n && (end == next || total + sizes[end] <= m_round_bytes)) total += sizes[end++];
    if (total > kMaxMessage)
      throw CommError("collective fetch: one record of " + std::to_string(total) +
                          " bytes is over the 1 GiB message limit",
                      "use the rma backend for such samples");
    bytes = int(total);
    return end;
  }

  ByteStore& m_store;
  int64_t m_round_bytes;
};

}  // namespace

std::unique_ptr<Fetcher> make_store_fetcher(Backend backend, ByteStore& store,
                                            const FetcherOptions& options) {
  switch (backend) {
    case Backend::kRma:
      return std::make_unique<RmaFetcher>(store);
    case Backend::kCollective:
      return std::make_unique<CollectiveFetcher>(store, options);
    case Backend::kReplicated:
      return std::make_unique<LocalFetcher>(store);
    case Backend::kShm:
      return std::make_unique<ShmFetcher>(store);
    case Backend::kFile:
    case Backend::kNccl:
      break;
  }
  throw ConfigError("backend '" + to_string(backend) + "' does not read an in-memory store",
                    "in-memory backends: rma, collective, shm, replicated");
}

}  // namespace ddgnn
