// A run of several processes over Gloo (gloo_world.h): rendezvous, the host exchanges, failures.
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
//     or gone (at most 10 s: LingerAtExit), so that the record outlives it.
// When rank 0 itself is gone the survivors say so; with a file store (no server) each reports
// its own view.
#include "dist/gloo_world.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gloo/context.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/pair.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/flags.h"
#include "dist/gloo_communicator.h"
#include "dist/messages.h"
#include "dist/tcp_store.h"

namespace axle::dist {
namespace {


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
    comm_ = NewGlooCommunicator(
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

  // Rank 0 serves the store, so it stays at exit until the other processes have left it (at most
  // 10 s): after a failure, so that they read the run's first failure (Note [Who failed]) instead
  // of finding the store gone; after a clean run too, because a peer may still be reading the last
  // keyed exchange when rank 0 has its answers (Note [Keyed exchanges]: rank 0 commits a
  // checkpoint, gets every process's reply to "committed" and could exit before a slower process
  // has read rank 0's; seen in CI, where that process then reported process 0 lost).
  void LingerAtExit() {
    std::lock_guard<std::mutex> lock(failure_mu_);
    try {
      if (auto* tcp = dynamic_cast<TcpStore*>(failures_.get())) tcp->Goodbye();  // a clean exit: not lost
    } catch (const std::exception&) {
    }
    if (server_) server_->WaitForLifelines(std::chrono::seconds(10));
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

  // Note [Keyed exchanges]: each process sets "keyed/<key>/<rank>" in the rendezvous store and
  // waits for the others' in slices of a fraction of a second, checking between slices whether a
  // process was lost (the watcher aborts host_waits_), so a loss ends the wait at once rather than
  // at the timeout. A TCP get that times out leaves its connection out of step: each empty slice
  // opens a new one. A process that has every answer may exit while a peer still reads; rank 0,
  // whose exit takes the store along, waits for its peers at exit (LingerAtExit).
  std::vector<std::vector<uint8_t>> ExchangeByKey(std::string_view key, std::span<const uint8_t> mine,
                                                  std::string_view what) override {
    using Clock = std::chrono::steady_clock;
    const std::string prefix = fmt::format("keyed/{}/", key);
    const int n = env_.size, me = env_.rank;
    std::vector<std::vector<uint8_t>> out(static_cast<size_t>(n));
    out[static_cast<size_t>(me)].assign(mine.begin(), mine.end());
    auto store_gone = [&](const std::string& why) {
      if (why.find("connection closed") != std::string::npos || why.find("no store at") != std::string::npos)
        Fail("{} (keyed exchange '{}'): process 0 is lost (the rendezvous store it served is gone: {})", what, key,
             why);
    };
    // Short connection deadlines: a store that is gone (process 0 was lost) must end the exchange
    // in seconds, not after the collective timeout.
    const auto connect = std::chrono::seconds(5);
    try {
      if (!dir_.empty())
        gloo::rendezvous::FileStore(dir_).set(prefix + std::to_string(me), std::vector<char>(mine.begin(), mine.end()));
      else
        TcpStore(host_, port_, connect).set(prefix + std::to_string(me), std::vector<char>(mine.begin(), mine.end()));
    } catch (const std::exception& e) {
      store_gone(e.what());
      Fail("{} (keyed exchange '{}'): process {} cannot reach the rendezvous store: {}", what, key, me, e.what());
    }
    const auto deadline = Clock::now() + timeout_;
    const auto slice = std::chrono::milliseconds(250);
    for (int p = 0; p < n; ++p) {
      if (p == me) continue;
      const std::string k = prefix + std::to_string(p);
      for (;;) {
        if (const std::string lost = host_waits_.reason(); !lost.empty())
          Fail("{} (keyed exchange '{}'): {}", what, key, lost);
        std::optional<std::vector<char>> value;
        try {
          if (!dir_.empty()) {
            gloo::rendezvous::FileStore files(dir_);
            files.wait({k}, slice);
            value = files.get(k);
          } else {
            value = TcpStore(host_, port_, connect).GetWithin(k, slice);
          }
        } catch (const std::exception& e) {
          store_gone(e.what());  // else a slice that found nothing
        }
        if (value) {
          out[static_cast<size_t>(p)].assign(value->begin(), value->end());
          break;
        }
        if (Clock::now() > deadline)
          Fail("{} (keyed exchange '{}'): process {} did not take part within {} s (AXLE_COLLECTIVE_TIMEOUT): it is "
               "stuck, late, or running another program",
               what, key, p, timeout_.count() / 1000);
      }
    }
    return out;
  }

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
  std::atexit([] { joined->LingerAtExit(); });
  return std::unique_ptr<runtime::World>(world);
}

}  // namespace axle::dist
