// Devices of every process as Gloo ranks (gloo_communicator.h).
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
#include "dist/gloo_communicator.h"

#include <gloo/context.h>

#include <fmt/format.h>

#include <cstring>
#include <mutex>

#include "core/error.h"
#include "runtime/collectives_internal.h"

namespace axle::dist {
namespace {

using ir::Literal;
using runtime::CollectiveKind;
using runtime::CollectiveRequest;

// Devices of every process as Gloo ranks (Note [Collectives as messages]).
class GlooCommunicatorImpl final : public GlooCommunicator {
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
  GlooCommunicatorImpl(int global, int first, int local_devices, std::vector<std::shared_ptr<gloo::Context>> contexts,
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
  void AbortAll(const std::string& message) override {
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

}  // namespace

std::unique_ptr<GlooCommunicator> NewGlooCommunicator(int global, int first, int local,
                                                      std::vector<std::shared_ptr<gloo::Context>> contexts,
                                                      std::chrono::milliseconds timeout, FailureRecord record,
                                                      std::function<void()> on_abort) {
  return std::make_unique<GlooCommunicatorImpl>(global, first, local, std::move(contexts), timeout, std::move(record),
                                                std::move(on_abort));
}

}  // namespace axle::dist
