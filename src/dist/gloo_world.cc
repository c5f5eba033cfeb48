// A run of several processes over Gloo (gloo_world.h).
//
// Note [Collectives as messages]: each collective is a round or two of point-to-point messages
// between the members of a group (Gloo unbound buffers on the device's own context, tagged by
// the device's call number), and each member computes its own result from what it received with
// the same functions as the in-process communicator (collective::Combine, AllGather, Chunk), in
// member order. A member receives exactly the pieces it needs:
//   all_reduce        two rounds: member k gets chunk k (a flat range) of every operand and
//                     combines it, then everyone gets every combined chunk (each member sends and
//                     receives 2 (n-1)/n of the operand, as a ring all-reduce, but combined in
//                     member order in double: bitwise the interpreter's, unlike a ring's partial
//                     sums);
//   all_gather        every operand;
//   reduce_scatter    chunk k of every operand, combined;
//   all_to_all        chunk k of every operand, concatenated;
//   collective_permute the source's operand.
// Before its payload every message carries a header with the call's description, so devices that
// run different programs fail with both descriptions instead of exchanging wrong bytes.
//
// Note [Who failed]: a process that dies closes its sockets, and its peers' Gloo calls fail at
// once; one that hangs is found by the timeout. But Gloo hands a broken pair's error to every
// pending operation of the context, so the peer a failed call waited for is not necessarily the
// one that died, and survivors that stop after the victim break their pairs too. The rendezvous
// store knows better:
//   * each process keeps a connection to it as its lifeline (TcpStore::Hello), and the server
//     records the first process whose lifeline closes before its goodbye as "lost"; a process
//     that times out waiting for a peer records that peer (set-if-absent);
//   * every process watches the record (a thread blocked in a get of "lost") and, when it
//     appears, stops its devices' waits with "process R is lost": a survivor blocked on a peer
//     that is alive but stopped learns of the loss at once;
//   * a process that fails closes all its Gloo pairs (BreakConnections), so no peer waits for a
//     message it will never send, and reports the record when there is one;
//   * rank 0, which serves the store, stays at exit until every other process has said goodbye
//     or gone (at most 10 s: LingerAfterFailure), so that the record outlives it.
// When rank 0 itself is gone the survivors say so; with a file store (no server) each reports
// its own view.
#include "dist/gloo_world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/pair.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "core/flags.h"
#include "dist/tcp_store.h"
#include "runtime/collectives_internal.h"

namespace axle::dist {
namespace {

using Clock = std::chrono::steady_clock;
using ir::Literal;
using runtime::CollectiveKind;
using runtime::CollectiveRequest;

// The address this host is reached at from rank 0's: the source address of a route to it.
std::string LocalAddressToward(const std::string& master) {
  if (master.empty()) return "127.0.0.1";
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(master.c_str(), "9", &hints, &res) != 0 || res == nullptr)
    Fail("rendezvous: MASTER_ADDR={} does not resolve", master);
  std::string out;
  const int fd = ::socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {  // UDP: picks a route, sends nothing
    sockaddr_storage me{};
    socklen_t len = sizeof me;
    char host[NI_MAXHOST];
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&me), &len) == 0 &&
        ::getnameinfo(reinterpret_cast<sockaddr*>(&me), len, host, sizeof host, nullptr, 0, NI_NUMERICHOST) == 0)
      out = host;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  if (out.empty()) Fail("rendezvous: no route from this host to MASTER_ADDR={}", master);
  return out;
}

// The header before every payload (Note [Collectives as messages]). Its size is fixed, so a
// peer that runs another program cannot make a receive overflow; a payload that fits travels
// inside it, one message instead of two (most of a training step's collectives are scalars and
// small vectors: the loss, norms, biases).
struct Header {
  uint64_t hash = 0;   // std::hash of the full description
  uint64_t bytes = 0;  // of the payload
  char text[176] = {};
  uint8_t inline_payload[2048 - 192];
};
static_assert(sizeof(Header) == 2048);
constexpr size_t kInlineBytes = sizeof(Header::inline_payload);

Header MakeHeader(const std::string& what, size_t bytes) {
  Header h;
  h.hash = std::hash<std::string>{}(what);
  h.bytes = bytes;
  std::strncpy(h.text, what.c_str(), sizeof h.text - 1);
  return h;
}

struct Outgoing {
  int peer;
  const void* data;
  size_t bytes;
};
struct Incoming {
  int peer;
  void* data;
  size_t bytes;
};

// Abortable waits: buffers a thread is waiting on, so that Abort can wake it.
class Waits {
 public:
  void Add(gloo::transport::UnboundBuffer* b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) throw Error(reason_);
    live_.push_back(b);
  }
  void Remove(gloo::transport::UnboundBuffer* b) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(std::remove(live_.begin(), live_.end(), b), live_.end());
  }
  void Abort(const std::string& reason) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) reason_ = reason;
    aborted_ = true;
    for (auto* b : live_) {
      b->abortWaitRecv();
      b->abortWaitSend();
    }
  }
  std::string reason() const {
    std::lock_guard<std::mutex> lock(mu_);
    return reason_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<gloo::transport::UnboundBuffer*> live_;
  bool aborted_ = false;
  std::string reason_;
};

// Names a Gloo rank of a context in messages ("process 2 (device 5)").
using PeerName = std::function<std::string(int peer)>;
// Turns a failure seen by this process into the run's (Note [Who failed]); `hung` is the process
// that did not answer within the timeout, -1 when the failure was not a timeout.
using FailureRecord = std::function<std::string(const std::string& mine, int hung)>;

// One round of messages on `ctx` (Note [Collectives as messages]): sends every Outgoing and
// receives every Incoming, headers first. `slot` must be unique to this round among the
// messages between any two ranks of the context.
// `ranks_per_process`: the context's ranks of one process (peer / it = the peer's process).
void Round(gloo::Context& ctx, uint64_t slot, const std::string& what, std::span<const Outgoing> out,
           std::span<const Incoming> in, std::chrono::milliseconds timeout, Waits& waits, const PeerName& name,
           const FailureRecord& record, int ranks_per_process) {
  using Buffer = std::unique_ptr<gloo::transport::UnboundBuffer>;
  const auto deadline = Clock::now() + timeout;
  std::vector<Header> out_headers, in_headers(in.size());
  out_headers.reserve(out.size());  // never reallocated: the sends point into it
  std::vector<Buffer> sends, header_recvs, payload_recvs;
  auto fail = [&](int peer, const char* doing, const std::string& why, bool timed_out = false) {
    const std::string mine = fmt::format("{}: {} {} failed: {}", what, doing, name(peer), why);
    throw Error(record(mine, timed_out ? peer / ranks_per_process : -1));
  };
  // Registered with `waits` for as long as they exist.
  struct Guard {
    Waits& w;
    std::vector<gloo::transport::UnboundBuffer*> bufs;
    ~Guard() {
      for (auto* b : bufs) w.Remove(b);
    }
  } guard{waits, {}};
  auto track = [&](Buffer b) {
    waits.Add(b.get());
    guard.bufs.push_back(b.get());
    return b;
  };
  auto wait = [&](gloo::transport::UnboundBuffer& b, bool recv, int peer) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    bool done = false;
    try {
      done = recv ? b.waitRecv(nullptr, std::max(left, std::chrono::milliseconds(1)))
                  : b.waitSend(nullptr, std::max(left, std::chrono::milliseconds(1)));
    } catch (const std::exception& e) {
      const std::string why = e.what();
      if (Clock::now() >= deadline || why.find("Timed out") != std::string::npos)
        fail(peer, recv ? "waiting for" : "sending to",
             fmt::format("no answer within {} s (AXLE_COLLECTIVE_TIMEOUT); it is hung, or waits for another "
                         "process",
                         timeout.count() / 1000),
             /*timed_out=*/true);
      fail(peer, recv ? "receiving from" : "sending to",
           fmt::format("the connection broke (the process exited or was killed): {}", why));
    }
    if (!done) throw Error(waits.reason());  // Abort woke us
  };
  try {
    for (const Incoming& m : in) {
      header_recvs.push_back(track(ctx.createUnboundBuffer(&in_headers[header_recvs.size()], sizeof(Header))));
      header_recvs.back()->recv(m.peer, slot);
    }
    for (const Outgoing& m : out) {
      out_headers.push_back(MakeHeader(what, m.bytes));
      if (m.bytes > 0 && m.bytes <= kInlineBytes) std::memcpy(out_headers.back().inline_payload, m.data, m.bytes);
      sends.push_back(track(ctx.createUnboundBuffer(&out_headers.back(), sizeof(Header))));
      sends.back()->send(m.peer, slot);
      if (m.bytes > kInlineBytes) {
        sends.push_back(track(ctx.createUnboundBuffer(const_cast<void*>(m.data), m.bytes)));
        sends.back()->send(m.peer, slot + 1);
      }
    }
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(out.empty() ? in.front().peer : out.front().peer, "posting messages to", e.what());
  }
  const Header want = MakeHeader(what, 0);
  for (size_t i = 0; i < in.size(); ++i) {
    wait(*header_recvs[i], true, in[i].peer);
    const Header& h = in_headers[i];
    if (h.hash != want.hash || h.bytes != in[i].bytes)
      Fail("{} and {} disagree at the same call: this one runs {} ({} bytes expected), {} runs {} ({} bytes): every "
           "process must run the same program with the same flags",
           name(-1), name(in[i].peer), what, in[i].bytes, name(in[i].peer),
           std::string(h.text, strnlen(h.text, sizeof h.text)), h.bytes);
    if (in[i].bytes == 0) continue;
    if (in[i].bytes <= kInlineBytes) {
      std::memcpy(in[i].data, h.inline_payload, in[i].bytes);
      continue;
    }
    payload_recvs.push_back(track(ctx.createUnboundBuffer(in[i].data, in[i].bytes)));
    try {
      payload_recvs.back()->recv(in[i].peer, slot + 1);
    } catch (const std::exception& e) {
      fail(in[i].peer, "receiving from", e.what());
    }
  }
  size_t k = 0;
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i].bytes > kInlineBytes) wait(*payload_recvs[k++], true, in[i].peer);
  k = 0;
  for (const Outgoing& m : out) {
    wait(*sends[k++], false, m.peer);
    if (m.bytes > kInlineBytes) wait(*sends[k++], false, m.peer);
  }
}

// Devices of every process as Gloo ranks (Note [Collectives as messages]).
class GlooCommunicator final : public runtime::Communicator {
  // One of this process's devices.
  struct Dev {
    std::shared_ptr<gloo::Context> ctx;
    uint64_t call = 0;       // collectives called since the run began: the slot of their messages
    int64_t step_call = 0;   // since the step began (messages)
    runtime::CollectiveStats stats;
    Waits waits;
    std::vector<std::vector<uint8_t>> scratch;  // all_reduce's received chunks, reused across calls
  };
 public:
  GlooCommunicator(int global, int first, int local_devices, std::vector<std::shared_ptr<gloo::Context>> contexts,
                   std::chrono::milliseconds timeout, FailureRecord record, std::function<void()> on_abort)
      : global_(global), first_(first), local_(local_devices), timeout_(timeout),
        record_(std::move(record)), on_abort_(std::move(on_abort)), devices_(static_cast<size_t>(local_devices)) {
    for (int d = 0; d < local_devices; ++d) devices_[static_cast<size_t>(d)].ctx = std::move(contexts[static_cast<size_t>(d)]);
  }

  int num_devices() const override { return global_; }

  void AllReduce(int device, const Literal& in, Literal& out, ir::ReduceKind kind,
                 const ir::ReplicaGroups& groups) override {
    CollectiveRequest r{CollectiveKind::kAllReduce, kind, 0, 0, groups, in.type()};
    auto [members, position] = runtime::GroupOf(device, r, global_);
    runtime::CheckOut(r, out, runtime::CollectiveResultType(r, static_cast<int64_t>(members.size())));
    Dev& dev = Begin(device, r);
    const int64_t n = static_cast<int64_t>(members.size()), e = out.NumElements(), w = DTypeSize(out.dtype());
    auto begin = [&](int64_t k) { return e * k / n; };
    const int64_t p = static_cast<int64_t>(position), mine_b = begin(p), mine_n = begin(p + 1) - mine_b;
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    if (std::vector<const void*> direct; IsSumProdFloat(out.dtype(), kind)) {
      // f32/f64 sum/prod: the peers' chunks land in this device's scratch buffers and combine
      // with its own straight into `out` (no copies of its own chunk, no fresh buffers).
      dev.scratch.resize(members.size());
      for (int64_t k = 0; k < n; ++k) {
        if (k == p) {
          direct.push_back(in.bytes().data() + mine_b * w);
          continue;
        }
        std::vector<uint8_t>& buf = dev.scratch[static_cast<size_t>(k)];
        buf.resize(static_cast<size_t>(mine_n * w));
        const int peer = members[static_cast<size_t>(k)];
        send.push_back({peer, in.bytes().data() + begin(k) * w, static_cast<size_t>((begin(k + 1) - begin(k)) * w)});
        recv.push_back({peer, buf.data(), buf.size()});
        direct.push_back(buf.data());
      }
      Exchange(dev, device, r, 0, send, recv);
      runtime::collective::CombineContiguous(out.dtype(), kind, direct, out.mutable_bytes().data() + mine_b * w,
                                             mine_n);
    } else {
      ExchangePieces(dev, device, r, in, out, kind, members, p, mine_b, mine_n, begin);
    }
    // Round 2: every combined chunk to everyone.
    send.clear();
    recv.clear();
    for (int64_t k = 0; k < n; ++k) {
      if (k == p) continue;
      const int peer = members[static_cast<size_t>(k)];
      send.push_back({peer, out.bytes().data() + mine_b * w, static_cast<size_t>(mine_n * w)});
      recv.push_back({peer, out.mutable_bytes().data() + begin(k) * w, static_cast<size_t>((begin(k + 1) - begin(k)) * w)});
    }
    Exchange(dev, device, r, 1, send, recv);
    dev.stats.all_reduce_bytes += in.type().ByteSize();
  }

  static bool IsSumProdFloat(DType t, ir::ReduceKind k) {
    return (t == DType::kF32 || t == DType::kF64) && (k == ir::ReduceKind::kSum || k == ir::ReduceKind::kProd);
  }

  // all_reduce's first round for every other dtype and kind: chunk `p` of every operand as
  // literals, combined by collective::Combine into out's chunk.
  template <typename Begin>
  void ExchangePieces(Dev& dev, int device, const CollectiveRequest& r, const Literal& in, Literal& out,
                      ir::ReduceKind kind, const std::vector<int>& members, int64_t p, int64_t mine_b, int64_t mine_n,
                      const Begin& begin) {
    const int64_t n = static_cast<int64_t>(members.size()), w = DTypeSize(out.dtype());
    const ir::TensorType piece(out.dtype(), Shape({mine_n}));
    std::vector<Literal> pieces;
    pieces.reserve(members.size());
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    for (int64_t k = 0; k < n; ++k) {
      pieces.push_back(Literal::Uninitialized(piece));
      if (k == p) {
        std::memcpy(pieces.back().mutable_bytes().data(), in.bytes().data() + mine_b * w, static_cast<size_t>(mine_n * w));
        continue;
      }
      const int peer = members[static_cast<size_t>(k)];
      send.push_back({peer, in.bytes().data() + begin(k) * w, static_cast<size_t>((begin(k + 1) - begin(k)) * w)});
      recv.push_back({peer, pieces.back().mutable_bytes().data(), static_cast<size_t>(mine_n * w)});
    }
    Exchange(dev, device, r, 0, send, recv);
    std::vector<const Literal*> group;
    for (const Literal& l : pieces) group.push_back(&l);
    Literal combined = Literal::Uninitialized(piece);
    runtime::collective::Combine(group, kind, combined, 0, mine_n);
    if (mine_n > 0)
      std::memcpy(out.mutable_bytes().data() + mine_b * w, combined.bytes().data(), static_cast<size_t>(mine_n * w));
  }

  void AllGather(int device, const Literal& in, Literal& out, int64_t dim, const ir::ReplicaGroups& groups) override {
    CollectiveRequest r{CollectiveKind::kAllGather, ir::ReduceKind::kSum, dim, 0, groups, in.type()};
    auto [members, position] = runtime::GroupOf(device, r, global_);
    runtime::CheckOut(r, out, runtime::CollectiveResultType(r, static_cast<int64_t>(members.size())));
    Dev& dev = Begin(device, r);
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= in.shape().dim(d);
    if (outer == 1) {
      // Each member's operand is one contiguous block of the result: received in place.
      const size_t block = in.bytes().size();
      for (size_t k = 0; k < members.size(); ++k) {
        uint8_t* dst = out.mutable_bytes().data() + k * block;
        if (k == position) {
          if (block > 0) std::memcpy(dst, in.bytes().data(), block);
          continue;
        }
        send.push_back({members[k], in.bytes().data(), block});
        recv.push_back({members[k], dst, block});
      }
      Exchange(dev, device, r, 0, send, recv);
      dev.stats.all_gather_bytes += in.type().ByteSize();
      return;
    }
    std::vector<Literal> theirs;
    theirs.reserve(members.size());
    std::vector<const Literal*> group;
    for (size_t k = 0; k < members.size(); ++k) {
      if (k == position) continue;
      theirs.push_back(Literal::Uninitialized(in.type()));
      send.push_back({members[k], in.bytes().data(), in.bytes().size()});
      recv.push_back({members[k], theirs.back().mutable_bytes().data(), in.bytes().size()});
    }
    Exchange(dev, device, r, 0, send, recv);
    for (size_t k = 0, j = 0; k < members.size(); ++k) group.push_back(k == position ? &in : &theirs[j++]);
    runtime::collective::AllGather(group, dim, out);
    dev.stats.all_gather_bytes += in.type().ByteSize();
  }

  void ReduceScatter(int device, const Literal& in, Literal& out, ir::ReduceKind kind, int64_t dim,
                     const ir::ReplicaGroups& groups) override {
    CollectiveRequest r{CollectiveKind::kReduceScatter, kind, dim, 0, groups, in.type()};
    auto [members, position] = runtime::GroupOf(device, r, global_);
    runtime::CheckOut(r, out, runtime::CollectiveResultType(r, static_cast<int64_t>(members.size())));
    Dev& dev = Begin(device, r);
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d) outer *= in.shape().dim(d);
    if (outer == 1 && IsSumProdFloat(in.dtype(), kind)) {
      // Chunk k is one contiguous block of the operand: sent from it, received into scratch,
      // combined straight into `out` (as all_reduce's first round).
      const size_t block = out.bytes().size();
      const int64_t n = static_cast<int64_t>(members.size());
      dev.scratch.resize(members.size());
      std::vector<Outgoing> send;
      std::vector<Incoming> recv;
      std::vector<const void*> direct;
      for (int64_t k = 0; k < n; ++k) {
        if (k == static_cast<int64_t>(position)) {
          direct.push_back(in.bytes().data() + k * block);
          continue;
        }
        std::vector<uint8_t>& buf = dev.scratch[static_cast<size_t>(k)];
        buf.resize(block);
        send.push_back({members[static_cast<size_t>(k)], in.bytes().data() + k * block, block});
        recv.push_back({members[static_cast<size_t>(k)], buf.data(), block});
        direct.push_back(buf.data());
      }
      Exchange(dev, device, r, 0, send, recv);
      runtime::collective::CombineContiguous(out.dtype(), kind, direct, out.mutable_bytes().data(),
                                             out.NumElements());
      dev.stats.reduce_scatter_bytes += in.type().ByteSize();
      return;
    }
    std::vector<Literal> parts = ChunksFor(dev, device, r, in, dim, members, position, out.type());
    std::vector<const Literal*> group;
    for (const Literal& l : parts) group.push_back(&l);
    runtime::collective::Combine(group, kind, out, 0, out.NumElements());
    dev.stats.reduce_scatter_bytes += in.type().ByteSize();
  }

  void AllToAll(int device, const Literal& in, Literal& out, int64_t split_dim, int64_t concat_dim,
                const ir::ReplicaGroups& groups) override {
    CollectiveRequest r{CollectiveKind::kAllToAll, ir::ReduceKind::kSum, split_dim, concat_dim, groups, in.type()};
    auto [members, position] = runtime::GroupOf(device, r, global_);
    runtime::CheckOut(r, out, runtime::CollectiveResultType(r, static_cast<int64_t>(members.size())));
    Dev& dev = Begin(device, r);
    std::vector<int64_t> dims = in.shape().dims();
    dims[static_cast<size_t>(split_dim)] /= static_cast<int64_t>(members.size());
    std::vector<Literal> parts =
        ChunksFor(dev, device, r, in, split_dim, members, position, ir::TensorType(in.dtype(), Shape(dims)));
    std::vector<const Literal*> group;
    for (const Literal& l : parts) group.push_back(&l);
    runtime::collective::AllGather(group, concat_dim, out);
    dev.stats.all_to_all_bytes += in.type().ByteSize();
  }

  void CollectivePermute(int device, const Literal& in, Literal& out, const ir::ReplicaGroups& pairs) override {
    CollectiveRequest r{CollectiveKind::kCollectivePermute, ir::ReduceKind::kSum, 0, 0, pairs, in.type()};
    const runtime::PermuteRoute route = runtime::RouteOf(device, pairs, global_);
    runtime::CheckOut(r, out, in.type());
    Dev& dev = Begin(device, r);
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    for (int t : route.targets)
      if (t != device) send.push_back({t, in.bytes().data(), in.bytes().size()});
    if (route.source == device) {
      if (!in.bytes().empty()) std::memcpy(out.mutable_bytes().data(), in.bytes().data(), in.bytes().size());
    } else if (route.source >= 0) {
      recv.push_back({route.source, out.mutable_bytes().data(), out.bytes().size()});
    } else if (!out.bytes().empty()) {
      std::memset(out.mutable_bytes().data(), 0, out.bytes().size());
    }
    Exchange(dev, device, r, 0, send, recv);
    if (!route.targets.empty()) dev.stats.collective_permute_bytes += in.type().ByteSize();
  }

  void Abort(int device, const std::string& reason) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (abort_.empty()) abort_ = fmt::format("device {} failed: {}", device, reason);
      // The pairs may hold half-sent messages: this run cannot go on (Reset keeps the abort).
      for (Dev& d : devices_) d.waits.Abort(abort_);
    }
    on_abort_();  // the other processes must not wait for this one (Note [Who failed])
  }

  // Every device of this process stops waiting and fails with `message` (the run lost a process).
  void AbortAll(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (abort_.empty()) abort_ = message;
    for (Dev& d : devices_) d.waits.Abort(abort_);
  }

  void EndStep(int) override {}

  std::string abort_message() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return abort_;
  }

  void Reset() override {
    for (Dev& d : devices_) {
      d.stats = {};
      d.step_call = 0;
    }
  }

  // Each device's counters are touched by its own thread only (its calls, and RunCollectiveNode
  // around them); the host reads them after the step.
  runtime::CollectiveStats stats(int device) const override {
    return devices_.at(static_cast<size_t>(Local(device))).stats;
  }
  void AddSeconds(int device, double seconds) override {
    devices_.at(static_cast<size_t>(Local(device))).stats.seconds += seconds;
  }

 private:

  int Local(int device) const {
    if (device < first_ || device >= first_ + local_)
      Fail("collective called for device {}, which is not one of this process's devices [{}, {})", device, first_,
           first_ + local_);
    return device - first_;
  }

  Dev& Begin(int device, const CollectiveRequest&) {
    Dev& dev = devices_[static_cast<size_t>(Local(device))];
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!abort_.empty()) throw Error(abort_);
    }
    ++dev.call;
    ++dev.step_call;
    ++dev.stats.collectives;
    return dev;
  }

  std::string PeerName(int device) const {
    return fmt::format("process {} (device {})", device / local_, device);
  }

  void Exchange(Dev& dev, int device, const CollectiveRequest& r, int round, std::span<const Outgoing> send,
                std::span<const Incoming> recv) {
    if (send.empty() && recv.empty()) return;
    const std::string what = fmt::format("collective #{} of the step, {}", dev.step_call - 1, r.ToString());
    const uint64_t slot = (dev.call << 3) | (static_cast<uint64_t>(round) << 1);
    Round(*dev.ctx, slot, what, send, recv, timeout_, dev.waits,
          [&](int peer) { return peer < 0 ? fmt::format("device {}", device) : PeerName(peer); }, record_, local_);
  }

  // Chunk k (along dim) of `in` to member k, and chunk `position` of every member's operand back,
  // in member order (this device's own included).
  std::vector<Literal> ChunksFor(Dev& dev, int device, const CollectiveRequest& r, const Literal& in, int64_t dim,
                                 const std::vector<int>& members, size_t position, const ir::TensorType& part) {
    const int64_t n = static_cast<int64_t>(members.size());
    std::vector<Literal> mine, parts;
    mine.reserve(members.size());
    parts.reserve(members.size());
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    for (int64_t k = 0; k < n; ++k) {
      mine.push_back(runtime::collective::Chunk(in, dim, k, n));
      if (k == static_cast<int64_t>(position)) {
        parts.push_back(mine.back());
        continue;
      }
      parts.push_back(Literal::Uninitialized(part));
      const int peer = members[static_cast<size_t>(k)];
      send.push_back({peer, mine.back().bytes().data(), mine.back().bytes().size()});
      recv.push_back({peer, parts.back().mutable_bytes().data(), parts.back().bytes().size()});
    }
    Exchange(dev, device, r, 0, send, recv);
    return parts;
  }

  const int global_, first_, local_;
  const std::chrono::milliseconds timeout_;
  const FailureRecord record_;
  const std::function<void()> on_abort_;
  std::vector<Dev> devices_;
  mutable std::mutex mu_;
  std::string abort_;
};

class GlooWorld final : public runtime::World {
 public:
  GlooWorld(const LaunchEnv& env, int local_devices, std::chrono::milliseconds timeout)
      : env_(env), local_(local_devices), timeout_(timeout) {}

  // Note [A failed rendezvous is leaked]: Gloo's pair connect can outlive its timeout when a peer
  // dies halfway (seen: minutes), and destroying half-connected pairs can block too. So each
  // connect runs on a detached thread that owns what it touches, the caller waits for it until
  // the deadline, and a world whose rendezvous failed is never destroyed: the process is about to
  // exit with the error anyway.
  void Join() {
    if (local_ < 1) Fail("a process of a run needs at least one device (AXLE_CPU_DEVICES={})", local_);
    const std::string& r = env_.rendezvous;
    if (r.rfind("tcp:", 0) == 0) {
      const size_t colon = r.rfind(':');
      host_ = r.substr(4, colon - 4);
      port_ = std::stoi(r.substr(colon + 1));
      if (env_.rank == 0) server_ = std::make_unique<TcpStoreServer>(port_);
    } else if (r.rfind("file:", 0) == 0) {
      dir_ = r.substr(5);
      std::error_code ec;
      std::filesystem::create_directories(dir_, ec);
      if (ec) Fail("rendezvous: cannot create {}: {}", dir_, ec.message());
    } else {
      Fail("rendezvous '{}': expected tcp:HOST:PORT or file:DIR", r);
    }
    failures_ = NewStore();
    if (auto* tcp = dynamic_cast<TcpStore*>(failures_.get())) tcp->Hello(env_.rank);
    gloo::transport::tcp::attr attr;
    if (std::optional<std::string> iface = flags::LauncherVariable("GLOO_SOCKET_IFNAME"); iface && !iface->empty())
      attr.iface = *iface;
    else
      attr.hostname = LocalAddressToward(host_.empty() ? env_.master_addr : host_);
    try {
      device_ = gloo::transport::tcp::CreateDevice(attr);
    } catch (const std::exception& e) {
      Fail("Gloo: cannot open a TCP device on {}: {}", attr.iface.empty() ? attr.hostname : attr.iface, e.what());
    }
    // The processes' context, then every device's, connected at once (each waits for all the
    // others' addresses).
    const int global = env_.size * local_, first = env_.rank * local_;
    struct Connecting {
      std::mutex mu;
      std::condition_variable cv;
      int left = 0;
      std::vector<std::shared_ptr<gloo::Context>> contexts;
      std::vector<std::string> errors;
    };
    auto state = std::make_shared<Connecting>();
    state->left = local_ + 1;
    state->contexts.resize(static_cast<size_t>(local_) + 1);
    state->errors.resize(static_cast<size_t>(local_) + 1);
    for (int k = 0; k <= local_; ++k)
      std::thread([this, state, k, first, global] {
        std::shared_ptr<gloo::Context> ctx;
        std::string error;
        try {
          ctx = k == local_ ? Connect("host", env_.rank, env_.size) : Connect("devices", first + k, global);
        } catch (const std::exception& e) {
          error = e.what();
        }
        std::lock_guard<std::mutex> lock(state->mu);
        state->contexts[static_cast<size_t>(k)] = std::move(ctx);
        state->errors[static_cast<size_t>(k)] = std::move(error);
        if (--state->left == 0) state->cv.notify_all();
      }).detach();
    {
      std::unique_lock<std::mutex> lock(state->mu);
      if (!state->cv.wait_for(lock, timeout_ + std::chrono::seconds(5), [&] { return state->left == 0; }))
        Fail("rendezvous ({}): process {} could not connect to every device of the run within {} s "
             "(AXLE_COLLECTIVE_TIMEOUT): a process died or never started",
             env_.rendezvous, env_.rank, timeout_.count() / 1000);
      for (const std::string& e : state->errors)
        if (!e.empty()) throw Error(e);
    }
    host_ctx_ = state->contexts.back();
    state->contexts.pop_back();
    device_contexts_ = state->contexts;
    comm_ = std::make_unique<GlooCommunicator>(
        global, first, local_, std::move(state->contexts), timeout_,
        [this](const std::string& mine, int hung) { return RecordFailure(mine, hung); },
        [this] { BreakConnections(); });
    // No process goes on before all are connected: one that failed right after would otherwise
    // leave the others half connected until the timeout.
    Barrier("the end of the rendezvous");
    if (!host_.empty()) {
      // Note [Who failed]: a process blocked on a peer that is alive but stopped (it failed on
      // another peer) learns of the loss from the store, at once.
      std::thread([this] {
        try {
          TcpStore watch(host_, port_, timeout_);
          const std::vector<char> lost = watch.GetWithin("lost", std::chrono::hours(24 * 365));
          const std::string message =
              fmt::format("{} is lost (it exited, was killed or stopped answering)", std::string(lost.begin(), lost.end()));
          comm_->AbortAll(message);
          host_waits_.Abort(message);
          BreakConnections();
        } catch (const std::exception&) {
          // The store is gone (rank 0 is): the broken pairs tell the others.
        }
      }).detach();
    }
  }

  // Note [Who failed]: rank 0 serves the store that holds the run's first failure; when it has
  // seen one, it stays until the other processes have left the store (at most a few seconds), so
  // that they can read the record instead of finding the store gone.
  void LingerAfterFailure() {
    std::lock_guard<std::mutex> lock(failure_mu_);
    try {
      if (auto* tcp = dynamic_cast<TcpStore*>(failures_.get())) tcp->Goodbye();  // a clean exit: not lost
    } catch (const std::exception&) {
    }
    if (server_ && failure_seen_.load()) server_->WaitForLifelines(std::chrono::seconds(10));
  }

  int rank() const override { return env_.rank; }
  int size() const override { return env_.size; }
  int local_devices() const override { return local_; }
  runtime::Communicator& device_communicator() override { return *comm_; }

  std::string Describe() const override {
    return fmt::format("process {} of {} ({} device{} each; rendezvous {}; launched by {})", env_.rank, env_.size,
                       local_, local_ == 1 ? "" : "s", env_.rendezvous, env_.launcher);
  }

  std::vector<std::vector<uint8_t>> AllGatherBytes(std::span<const uint8_t> mine, std::string_view what) override {
    std::lock_guard<std::mutex> lock(host_mu_);
    const int n = env_.size, me = env_.rank;
    const uint64_t slot = (++host_call_) << 3;
    const std::string text = fmt::format("host exchange #{}: {}", host_call_, what);
    auto name = [&](int peer) { return peer < 0 ? fmt::format("process {}", me) : fmt::format("process {}", peer); };
    auto record = [this](const std::string& m, int hung) { return RecordFailure(m, hung); };
    // Sizes, then bytes.
    const uint64_t my_size = mine.size();
    std::vector<uint64_t> sizes(static_cast<size_t>(n), 0);
    std::vector<Outgoing> send;
    std::vector<Incoming> recv;
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      send.push_back({p, &my_size, sizeof my_size});
      recv.push_back({p, &sizes[static_cast<size_t>(p)], sizeof(uint64_t)});
    }
    Round(*host_ctx_, slot, text + " (sizes)", send, recv, timeout_, host_waits_, name, record, 1);
    std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n));
    out[static_cast<size_t>(me)].assign(mine.begin(), mine.end());
    send.clear();
    recv.clear();
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      out[static_cast<size_t>(p)].resize(sizes[static_cast<size_t>(p)]);
      send.push_back({p, mine.data(), mine.size()});
      recv.push_back({p, out[static_cast<size_t>(p)].data(), out[static_cast<size_t>(p)].size()});
    }
    Round(*host_ctx_, slot | 2, text, send, recv, timeout_, host_waits_, name, record, 1);
    return out;
  }

  void Barrier(std::string_view what) override { AllGatherBytes({}, what); }

  std::shared_ptr<gloo::Context> host_context() const { return host_ctx_; }

 private:
  std::unique_ptr<gloo::rendezvous::Store> NewStore() {
    if (!dir_.empty()) return std::make_unique<gloo::rendezvous::FileStore>(dir_);
    return std::make_unique<TcpStore>(host_, port_, timeout_);
  }

  std::shared_ptr<gloo::Context> Connect(const std::string& prefix, int rank, int size) {
    std::unique_ptr<gloo::rendezvous::Store> store = NewStore();
    gloo::rendezvous::PrefixStore scoped(prefix, *store);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
    ctx->setTimeout(timeout_);
    try {
      ctx->connectFullMesh(scoped, device_);
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      Fail("rendezvous ({}, {} rank {} of {}): {}", env_.rendezvous, prefix, rank, size, e.what());
    }
    return ctx;
  }

  // Closes every Gloo pair of this process, once: a process that failed must not leave its peers
  // waiting for messages it will never send (they would notice only when it exits, or at the
  // timeout). Its store connection stays: it is not lost, and the store still names the one that is.
  void BreakConnections() {
    if (broken_.exchange(true)) return;
    std::vector<std::shared_ptr<gloo::Context>> all = device_contexts_;
    all.push_back(host_ctx_);
    for (const auto& ctx : all) {
      if (ctx == nullptr) continue;
      for (int i = 0; i < ctx->size; ++i) {
        if (i == ctx->rank) continue;
        try {
          if (auto& pair = ctx->getPair(i)) pair->close();
        } catch (const std::exception&) {
        }
      }
    }
  }

  std::string RecordFailure(const std::string& mine, int hung) {
    std::lock_guard<std::mutex> lock(failure_mu_);
    failure_seen_.store(true);
    std::string unknown;
    if (dir_.empty() && hung >= 0) {
      // A process that stopped answering is lost too: the first to time out says which.
      try {
        TcpStore(host_, port_, std::chrono::seconds(2)).SetIfAbsent("lost", [&] {
          const std::string p = fmt::format("process {}", hung);
          return std::vector<char>(p.begin(), p.end());
        }());
      } catch (const std::exception&) {
      }
    }
    BreakConnections();
    if (dir_.empty()) {
      try {
        // A connection of its own: a get that times out leaves it out of step.
        TcpStore probe(host_, port_, std::chrono::seconds(2));
        const std::vector<char> lost = probe.get("lost");
        return fmt::format("{} is lost (it exited, was killed or stopped answering; process {} saw: {})",
                           std::string(lost.begin(), lost.end()), env_.rank, mine);
      } catch (const std::exception& e) {
        const std::string why = e.what();
        if (env_.rank != 0 && (why.find("connection closed") != std::string::npos ||
                               why.find("no store at") != std::string::npos))
          return fmt::format("process 0 is lost (the rendezvous store it served is gone: {}; process {} saw: {})", why,
                             env_.rank, mine);
        unknown = fmt::format(" (no process is known lost: {})", e.what());
      }
    }
    return fmt::format("process {} saw: {}{}", env_.rank, mine, unknown);
  }

  LaunchEnv env_;
  const int local_;
  const std::chrono::milliseconds timeout_;
  std::string host_, dir_;
  int port_ = 0;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<gloo::rendezvous::Store> failures_;
  std::mutex failure_mu_;
  std::atomic<bool> failure_seen_{false}, broken_{false};
  std::vector<std::shared_ptr<gloo::Context>> device_contexts_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> host_ctx_;
  std::mutex host_mu_;
  uint64_t host_call_ = 0;
  Waits host_waits_;
  std::unique_ptr<GlooCommunicator> comm_;
};

}  // namespace

std::shared_ptr<gloo::Context> HostGlooContext(runtime::World& world) {
  auto* w = dynamic_cast<GlooWorld*>(&world);
  if (w == nullptr) Fail("HostGlooContext: the world was not made by JoinGlooWorld");
  return w->host_context();
}

std::unique_ptr<runtime::World> JoinGlooWorld(const LaunchEnv& env, int local_devices,
                                              std::chrono::milliseconds timeout) {
  // A peer that dies leaves sockets that SIGPIPE a writer: the write must fail with EPIPE instead,
  // so that this process reports the lost peer (Note [Who failed]) rather than vanish.
  ::signal(SIGPIPE, SIG_IGN);
  auto* world = new GlooWorld(env, local_devices, timeout);
  world->Join();  // on failure, `world` is leaked (Note [A failed rendezvous is leaked])
  static GlooWorld* joined = world;
  std::atexit([] { joined->LingerAfterFailure(); });
  return std::unique_ptr<runtime::World>(world);
}

}  // namespace axle::dist
