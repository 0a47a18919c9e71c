// Contract in store_group.h.
#include "distributed/store_group.h"

#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "distributed/loopback_listener.h"
#include "util/stop_signal.h"
#include "util/strings.h"

namespace titan {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

constexpr milliseconds kHeartbeatPeriod{500};
constexpr milliseconds kHeartbeatWatch{2000};  // a rank silent this long is gone
// A rank that is going away may still beat while its connections close (they go first, its
// heartbeat with its group): the watch starts this long after a failure.
constexpr milliseconds kHeartbeatSettle{1000};
// A rank waiting in the store for another's value gives up on it once its heartbeat has been
// still this long: the wait itself would otherwise last the whole timeout. Longer than the
// watch, so that a writer starved of CPU for a moment is not taken for gone.
constexpr milliseconds kQuietWriter{5000};
constexpr milliseconds kStorePoll{50};
// A client connects in attempts this long, so that SIGTERM and SIGINT stop the rendezvous within
// about a second (libtorch 1.13 rounds a connect timeout down to whole seconds: no shorter).
constexpr milliseconds kConnectSlice{1000};

std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string from_bytes(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

std::string heartbeat_key(int64_t rank) { return fmt::format("heartbeat/{}", rank); }

// "3, 5, 9", or the first 16 and how many in all: a message stays a line.
std::string some_ranks(const std::vector<int64_t>& ranks) {
  constexpr size_t kShown = 16;
  if (ranks.size() <= kShown) return join_integers(ranks, ", ");
  return fmt::format(
      "{}, ... ({} in all)",
      join_integers(std::vector<int64_t>(ranks.begin(), ranks.begin() + kShown), ", "),
      ranks.size());
}

// A library's message for ours: its first line, without the "[./gloo/transport/tcp/pair.cc:589] "
// source locations gloo and c10d put in front (they say nothing to a user).
std::string first_line(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && line[0] == '[') {
    const size_t close = line.find("] ");
    if (close == std::string::npos || line.rfind(':', close) == std::string::npos) break;
    line.erase(0, close + 2);
  }
  return line;
}

c10::intrusive_ptr<c10d::TCPStore> connect_store(const WorldInfo& w, bool server,
                                                 milliseconds timeout) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<uint16_t>(w.master_port);
  o.isServer = server;
  o.waitWorkers = false;  // arrival is checked below, so that a late rank can be named
  o.timeout = timeout;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  o.useLibUV = false;  // Debian's libtorch is built without libuv
#endif
#if TORCH_VERSION_MAJOR >= 2
  // A loopback master: the server listens on that address only (the store takes the socket
  // over). libtorch 1.13 offers no way to hand it one: there it listens on all interfaces.
  if (server && is_loopback_literal(w.master_addr)) {
    try {
      o.masterListenFd = listen_on_loopback(w.master_addr, o.port);
    } catch (const std::system_error& e) {
      throw std::runtime_error(e.what());  // reported as the store's own failure to bind
    }
  }
#endif
  return c10::make_intrusive<c10d::TCPStore>(w.master_addr, o);
}

// A collective in flight, waited for under its group's guard.
// A backend's work, and what is left to do once it is done (`then`, may be empty).
class StorePending : public PendingCollective {
 public:
  StorePending(StoreGroup& group, c10::intrusive_ptr<c10d::Work> work, std::string what,
               std::function<void()> then = {})
      : group_(group), work_(std::move(work)), what_(std::move(what)), then_(std::move(then)) {}
  void wait() override {
    if (work_) group_.guarded(what_, [&] { return work_->wait(); });
    if (then_) then_();
  }

 private:
  StoreGroup& group_;
  c10::intrusive_ptr<c10d::Work> work_;
  std::string what_;
  std::function<void()> then_;
};

}  // namespace

// Bumps this rank's heartbeat counter until destroyed. Errors (rank 0's store gone at the end
// of a run, or in a failure) end the thread quietly: the main thread reports what matters.
class Heartbeat {
 public:
  Heartbeat(const WorldInfo& w, milliseconds timeout)
      : store_(connect_store(w, false, timeout)), key_(heartbeat_key(w.rank)) {
    thread_ = std::thread([this] { run(); });
  }
  ~Heartbeat() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      try {
        store_->add(key_, 1);
      } catch (const std::exception&) {
        return;
      }
      wake_.wait_for(lock, kHeartbeatPeriod, [this] { return stop_; });
    }
  }

  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::string key_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

StoreGroup::StoreGroup(const WorldInfo& world, const CommConfig& comm)
    : world_(world),
      rank_(world.rank),
      size_(world.world_size),
      subgroups_(std::make_shared<std::vector<StoreGroup*>>()),
      timeout_(std::chrono::seconds(comm.init_timeout_seconds)) {
  for (int64_t r = 0; r < size_; ++r) world_ranks_.push_back(r);
  store_ = open_store();
  try {
    wait_for_all_ranks();
  } catch (const ConfigError&) {
    throw;
  } catch (const RuntimeFailure&) {
    throw;
  } catch (const StoppedBySignal&) {
    throw;
  } catch (const std::exception& e) {
    stop_if_signalled();
    throw RuntimeFailure(fmt::format("rank {} of {}: rank 0 is gone: its rendezvous store at {} "
                                     "stopped answering during the rendezvous ({})",
                                     world_.rank, world_.world_size, where(), first_line(e.what())),
                         "rank 0's own output tells why it stopped");
  }
  heartbeat_ = std::make_unique<Heartbeat>(world_, timeout_);
}

StoreGroup::StoreGroup(StoreGroup& parent, const std::vector<int64_t>& ranks,
                       const std::string& name)
    : world_(parent.world_),
      rank_(std::find(ranks.begin(), ranks.end(), parent.rank_) - ranks.begin()),
      size_(static_cast<int64_t>(ranks.size())),
      key_space_(fmt::format("{}sub/{}/", parent.key_space_, name)),
      subgroups_(parent.subgroups_),
      timeout_(parent.timeout_),
      store_(parent.store_) {
  for (int64_t r : ranks) world_ranks_.push_back(parent.world_ranks_[r]);
  subgroups_->push_back(this);
}

StoreGroup::~StoreGroup() {
  auto& live = *subgroups_;
  live.erase(std::remove(live.begin(), live.end(), this), live.end());
  if (server_mark_ >= 0) ::close(server_mark_);
}

std::unique_ptr<ProcessGroup> StoreGroup::subgroup(const std::vector<int64_t>& ranks,
                                                   const std::string& name) {
  check_subgroup_ranks(ranks, rank_, size_);
  if (name.empty() || name.find('/') != std::string::npos)
    throw std::invalid_argument("a subgroup's name is a non-empty word without '/': " + name);
  return new_subgroup(ranks, name);
}

std::unique_ptr<PendingCollective> StoreGroup::start_all_reduce_sum(at::Tensor tensor,
                                                                    const std::string& what) {
  std::vector<at::Tensor> tensors{std::move(tensor)};
  return guarded(what,
                 [&] { return std::make_unique<StorePending>(*this, all_reduce(tensors), what); });
}

std::unique_ptr<PendingCollective> StoreGroup::start_all_gather(at::Tensor full, at::Tensor shard,
                                                                const std::string& what) {
  check_shard_shapes(full, shard, size(), "all-gather");
  return guarded(
      what, [&] { return std::make_unique<StorePending>(*this, all_gather(full, shard), what); });
}

std::unique_ptr<PendingCollective> StoreGroup::start_reduce_scatter_sum(at::Tensor shard,
                                                                        at::Tensor full,
                                                                        const std::string& what) {
  check_shard_shapes(full, shard, size(), "reduce-scatter");
  return guarded(what, [&]() -> std::unique_ptr<PendingCollective> {
    if (auto work = reduce_scatter(shard, full)) {
      return std::make_unique<StorePending>(*this, std::move(work), what);
    }
    ring_reduce_scatter(shard, full);
    return std::make_unique<StorePending>(*this, c10::intrusive_ptr<c10d::Work>(), what);
  });
}

int StoreGroup::next_tag() {
  const int tag = ring_tag_;
  ring_tag_ = (ring_tag_ + 1) % (1 << 30);
  return tag;
}

std::unique_ptr<PendingCollective> StoreGroup::start_all_to_all(at::Tensor received,
                                                                at::Tensor sent,
                                                                const std::string& what) {
  check_all_to_all_shapes(received, sent, size());
  return guarded(what, [&]() -> std::unique_ptr<PendingCollective> {
    if (auto work = all_to_all(received, sent)) {
      return std::make_unique<StorePending>(*this, std::move(work), what);
    }
    pairwise_all_to_all(received, sent);
    return std::make_unique<StorePending>(*this, c10::intrusive_ptr<c10d::Work>(), what);
  });
}

void StoreGroup::pairwise_all_to_all(at::Tensor& received, at::Tensor& sent) {
  const int64_t ranks = size(), rows = sent.size(0) / ranks;
  auto block = [&](at::Tensor& t, int64_t index) { return t.narrow(0, index * rows, rows); };
  const int tag = next_tag();
  block(received, rank_).copy_(block(sent, rank_));
  for (int64_t k = 1; k < ranks; ++k) {
    const int64_t to = (rank_ + k) % ranks, from = (rank_ + ranks - k) % ranks;
    at::Tensor outgoing = block(sent, to), incoming = block(received, from);
    auto done_sending = send(outgoing, to, tag);
    auto done_receiving = recv(incoming, from, tag);
    done_sending->wait();
    done_receiving->wait();
  }
}

void StoreGroup::ring_reduce_scatter(at::Tensor& shard, at::Tensor& full) {
  const int64_t ranks = size(), rows = shard.size(0);
  const int64_t next = (rank_ + 1) % ranks, previous = (rank_ + ranks - 1) % ranks;
  auto block = [&](int64_t index) { return full.narrow(0, index * rows, rows); };
  const int tag = next_tag();
  at::Tensor incoming = at::empty_like(shard);
  for (int64_t k = 0; k + 1 < ranks; ++k) {
    at::Tensor outgoing = block((rank_ - k - 1 + 2 * ranks) % ranks);
    auto sent = send(outgoing, next, tag);
    auto received = recv(incoming, previous, tag);
    sent->wait();
    received->wait();
    block((rank_ - k - 2 + 2 * ranks) % ranks).add_(incoming);
  }
  shard.copy_(block(rank_));
}

c10::intrusive_ptr<c10d::Work> StoreGroup::send(at::Tensor&, int64_t, int) {
  throw std::logic_error(backend() + " has no point-to-point sends here");
}

c10::intrusive_ptr<c10d::Work> StoreGroup::recv(at::Tensor&, int64_t, int) {
  throw std::logic_error(backend() + " has no point-to-point receives here");
}

bool StoreGroup::any_rank(bool flag, const std::string& what) {
  at::Tensor t = at::full({1}, flag ? 1 : 0, at::TensorOptions(at::kInt).device(flag_device()));
  all_reduce_sum(t, what);
  return t.item<int>() > 0;
}

std::string StoreGroup::broadcast(const std::string& key, const std::string& value) {
  return guarded("the exchange of " + key, [&] {
    const std::string stored = key_space_ + "broadcast/" + key;
    if (rank_ == 0) store_->set(stored, to_bytes(value));
    return await_value(stored, 0);
  });
}

std::vector<std::string> StoreGroup::gather(const std::string& key, const std::string& value) {
  return guarded("the exchange of " + key, [&] {
    store_->set(fmt::format("{}gather/{}/{}", key_space_, key, rank_), to_bytes(value));
    std::vector<std::string> values;
    if (rank_ != 0) return values;
    for (int64_t r = 0; r < size_; ++r) {
      values.push_back(await_value(fmt::format("{}gather/{}/{}", key_space_, key, r), r));
    }
    return values;
  });
}

void StoreGroup::set_timeout(std::chrono::seconds timeout) {
  if (milliseconds(timeout) == timeout_) return;
  timeout_ = timeout;
  store_->setTimeout(timeout_);
  // Gloo and NCCL fix a group's timeout when it is built: every rank builds the next together,
  // then its subgroups, in the order every rank joined them.
  build_backend(timeout_);
  if (!key_space_.empty()) return;
  const std::vector<StoreGroup*> subgroups = *subgroups_;
  for (StoreGroup* sub : subgroups) sub->set_timeout(timeout);
}

c10::intrusive_ptr<c10d::Store> StoreGroup::prefixed_store(const std::string& backend) {
  return c10::make_intrusive<c10d::PrefixStore>(
      fmt::format("{}{}/{}", key_space_, backend, generation_++), store_);
}

RuntimeFailure StoreGroup::collective_failure(const std::string& what, const std::exception& e) {
  return RuntimeFailure(fmt::format("rank {} of {}: {} failed: {} ({})", world_.rank,
                                    world_.world_size, what, diagnose(), first_line(e.what())),
                        "each rank's own output tells why it stopped; with checkpoint.enable "
                        "the same command resumes from the latest checkpoint");
}

std::string StoreGroup::where() const {
  return fmt::format("{}:{}", world_.master_addr, world_.master_port);
}

c10::intrusive_ptr<c10d::TCPStore> StoreGroup::open_store() {
  if (world_.rank == 0) {
    // The mark first, so that a second rank 0 started at the same moment finds it even while the
    // first one's store is still starting.
    server_mark_ = mark_rendezvous_server(static_cast<uint16_t>(world_.master_port));
    if (server_mark_ < 0) refuse_if_rank0_already_serves();
    try {
      return connect_store(world_, true, timeout_);
    } catch (const std::exception& e) {
      throw RuntimeFailure(fmt::format("rank 0 cannot serve the rendezvous store on port {}: {}",
                                       world_.master_port, first_line(e.what())),
                           "another run may be using the port: set MASTER_PORT to a free one");
    }
  }
  // Connects in slices: a client's connect retries inside libtorch until its timeout, deaf to
  // signals.
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    try {
      auto store = connect_store(world_, false, kConnectSlice);
      store->setTimeout(timeout_);
      return store;
    } catch (const std::exception& e) {
      stop_if_signalled();
      if (Clock::now() < deadline) continue;
      throw RuntimeFailure(
          fmt::format("rank {} of {}: rank 0 did not arrive: its rendezvous store at {} did not "
                      "answer within comm.init_timeout_seconds = {} s ({})",
                      world_.rank, world_.world_size, where(), timeout_.count() / 1000,
                      first_line(e.what())),
          "start rank 0 too, with the same MASTER_ADDR and MASTER_PORT");
    }
  }
}

void StoreGroup::refuse_if_rank0_already_serves() {
  // Only a titan-train rank 0 is spoken to (it holds the mark): libtorch's client aborts the
  // process when another program on the port resets the connection.
  if (!rendezvous_server_marked(static_cast<uint16_t>(world_.master_port))) return;
  try {
    // Its store may still be starting: the connect retries for a few seconds.
    auto other = connect_store(world_, false, std::chrono::seconds(5));
    other->add("claimed/0", 1);  // the other rank 0 sees the count grow and stops too
  } catch (const std::exception&) {
    // It is going away: still a second rank 0.
  }
  throw duplicate_rank();
}

ConfigError StoreGroup::duplicate_rank() const {
  return ConfigError(
      "environment",
      fmt::format("another process at the rendezvous ({}) is rank {} too", where(), world_.rank),
      "start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (or SLURM_NTASKS), "
      "and each with its own RANK");
}

void StoreGroup::stop_if_signalled() const {
  if (const int signal = pending_stop_signal()) {
    throw StoppedBySignal(
        signal, fmt::format("rank {} of {}: stopped by {} during the rendezvous", world_.rank,
                            world_.world_size, stop_signal_name(signal)));
  }
}

void StoreGroup::wait_for_all_ranks() {
  const std::string hint =
      "start every rank with the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE (or SLURM_NTASKS), "
      "and each with its own RANK";
  const std::string claim = fmt::format("claimed/{}", world_.rank);
  if (store_->add(claim, 1) > 1) throw duplicate_rank();  // the first claimant sees the count too
  // Each rank says which world it believes in, so that a WORLD_SIZE that differs between ranks
  // is named as such instead of as ranks that never arrive.
  const std::string mine = fmt::format("{} {}", world_.world_size, world_.launcher);
  store_->set(fmt::format("arrived/{}", world_.rank), to_bytes(mine));
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    stop_if_signalled();
    if (store_->add(claim, 0) > 1) throw duplicate_rank();
    std::vector<int64_t> missing;
    for (int64_t r = 0; r < world_.world_size; ++r) {
      if (r % 1024 == 1023) stop_if_signalled();
      const std::string key = fmt::format("arrived/{}", r);
      if (!store_->check({key})) {
        missing.push_back(r);
        if (Clock::now() <= deadline) break;  // the whole list only for the message
        continue;
      }
      const std::string theirs = from_bytes(store_->get(key));
      if (theirs != mine) {
        // Rank 0 serves the store: it stays until rank r has read its arrival too, so that both
        // name the mismatch (rank r would otherwise find the store gone).
        store_->set(fmt::format("mismatch_seen/{}", world_.rank), to_bytes("1"));
        const auto linger_end = Clock::now() + std::chrono::seconds(5);
        while (world_.rank == 0 && Clock::now() < linger_end &&
               !store_->check({fmt::format("mismatch_seen/{}", r)})) {
          std::this_thread::sleep_for(milliseconds(20));
          stop_if_signalled();
        }
        throw ConfigError("environment",
                          fmt::format("rank {} was started as one of {} (world size, launcher), "
                                      "rank {} as one of {}",
                                      world_.rank, mine, r, theirs),
                          hint);
      }
    }
    if (missing.empty()) return;
    if (Clock::now() > deadline) {
      throw RuntimeFailure(
          fmt::format("rank {} of {}: {} {} did not arrive at the rendezvous ({}) within "
                      "comm.init_timeout_seconds = {} s",
                      world_.rank, world_.world_size, missing.size() == 1 ? "rank" : "ranks",
                      some_ranks(missing), where(), timeout_.count() / 1000),
          hint);
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
}

std::string StoreGroup::await_value(const std::string& stored, int64_t writer) {
  const int64_t writer_rank = world_ranks_.at(static_cast<size_t>(writer));
  // Rank 0 serves the store: if it is gone, so is the store, and a blocking get fails at once.
  // Blocking matters there: rank 0 may set a verdict and stop, and a poll could come too late.
  if (writer_rank == 0) return from_bytes(store_->get(stored));
  const auto deadline = Clock::now() + timeout_;
  int64_t beats = store_->add(heartbeat_key(writer_rank), 0);
  auto last_beat = Clock::now();
  while (!store_->check({stored})) {
    const auto now = Clock::now();
    if (now > deadline) {
      throw std::runtime_error(fmt::format("rank {} set no {} within {} s", writer_rank, stored,
                                           timeout_.count() / 1000));
    }
    const int64_t seen = store_->add(heartbeat_key(writer_rank), 0);
    if (seen != beats) {
      beats = seen;
      last_beat = now;
    } else if (now - last_beat > kQuietWriter) {
      throw std::runtime_error(
          fmt::format("rank {} stopped beating while it owed {}", writer_rank, stored));
    }
    std::this_thread::sleep_for(kStorePoll);
  }
  return from_bytes(store_->get(stored));
}

std::vector<int64_t> StoreGroup::read_heartbeats() {
  std::vector<int64_t> beats;
  for (int64_t r = 0; r < world_.world_size; ++r) {
    beats.push_back(store_->add(heartbeat_key(r), 0));
  }
  return beats;
}

std::string StoreGroup::diagnose() {
  try {
    std::this_thread::sleep_for(kHeartbeatSettle);
    const auto before = read_heartbeats();
    std::this_thread::sleep_for(kHeartbeatWatch);
    const auto after = read_heartbeats();
    std::vector<int64_t> gone;
    for (int64_t r = 0; r < world_.world_size; ++r) {
      if (r != world_.rank && after[r] == before[r]) gone.push_back(r);
    }
    if (gone.empty()) {
      return "every rank still beats: one is stuck or slower than the timeout";
    }
    return fmt::format("{} {} {} gone (no heartbeat for {:.1f} s)",
                       gone.size() == 1 ? "rank" : "ranks", join_integers(gone, ", "),
                       gone.size() == 1 ? "is" : "are", kHeartbeatWatch.count() / 1000.0);
  } catch (const std::exception&) {
    if (world_.rank == 0) return "the rendezvous store stopped answering";
    return fmt::format("rank 0 is gone (its rendezvous store at {} stopped answering)", where());
  }
}

}  // namespace titan
