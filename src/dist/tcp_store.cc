// The rendezvous store over TCP (tcp_store.h).
//
// Wire format, both directions little-endian as the host (all processes of a run share the
// architecture): a request is op (1 byte: 'S' set, 'G' get, 'A' set-if-absent), key length (u32),
// key, value length (u64), value; the reply is the value length (u64) and the value ('S': empty).
// 'H' (hello, key = a rank) and 'B' (goodbye) make the connection a process's lifeline: one that
// closes between them sets "lost" to "process <rank>".
// The server answers a get of a missing key when some client sets it.
#include "dist/tcp_store.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "core/error.h"

namespace axle::dist {
namespace {

using Clock = std::chrono::steady_clock;

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Writes all of `n` bytes; false when the peer is gone.
bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

// Reads exactly n bytes before `deadline`; false on timeout or a closed connection (`closed`).
bool ReadAll(int fd, void* p, size_t n, Clock::time_point deadline, bool* closed = nullptr) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd pfd{fd, POLLIN, 0};
    const int r = ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) continue;
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (k <= 0) {
      if (closed) *closed = true;
      return false;
    }
    c += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string Reply(const std::vector<char>& value) {
  std::string r(sizeof(uint64_t), '\0');
  const uint64_t n = value.size();
  std::memcpy(r.data(), &n, sizeof n);
  r.append(value.begin(), value.end());
  return r;
}

}  // namespace

struct TcpStoreServer::State {
  struct Client {
    std::string in;  // bytes received, not yet a whole request
  };
  std::map<int, Client> clients;
  std::map<std::string, std::vector<char>> values;
  std::multimap<std::string, int> waiting;  // key -> client fd blocked in a get
  std::map<int, std::string> lifeline;      // client fd -> rank, between hello and goodbye
};

TcpStoreServer::TcpStoreServer(int port) : state_(std::make_unique<State>()) {
  listen_fd_ = ::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool v6 = listen_fd_ >= 0;
  if (!v6) listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) Fail("rendezvous store: socket(): {}", std::strerror(errno));
  const int one = 1, zero = 0;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (v6) {
    ::setsockopt(listen_fd_, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);  // IPv4 clients too
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(listen_fd_, 1024) != 0) {
    const std::string why = std::strerror(errno);
    CloseFd(listen_fd_);
    Fail("rendezvous store: rank 0 cannot listen on port {}: {} (another run, or the launcher's own store, holds "
         "it: pick another MASTER_PORT, or set AXLE_RENDEZVOUS=tcp:HOST:PORT)",
         port, why);
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                            : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) Fail("rendezvous store: pipe(): {}", std::strerror(errno));
  thread_ = std::make_unique<std::thread>([this] { Serve(); });
}

TcpStoreServer::~TcpStoreServer() {
  const char c = 'x';
  [[maybe_unused]] ssize_t k = ::write(wake_[1], &c, 1);
  thread_->join();
  for (auto& [fd, client] : state_->clients) ::close(fd);
  CloseFd(listen_fd_);
  CloseFd(wake_[0]);
  CloseFd(wake_[1]);
}

void TcpStoreServer::Serve() {
  State& s = *state_;
  auto answer_waiters = [&](const std::string& key) {
    auto [b, e] = s.waiting.equal_range(key);
    const std::string answer = Reply(s.values[key]);
    for (auto w = b; w != e; ++w) WriteAll(w->second, answer.data(), answer.size());
    s.waiting.erase(b, e);
  };
  auto drop = [&](int fd) {
    for (auto it = s.waiting.begin(); it != s.waiting.end();) it = it->second == fd ? s.waiting.erase(it) : ++it;
    if (auto it = s.lifeline.find(fd); it != s.lifeline.end()) {
      const std::string lost = "process " + it->second;
      s.values.try_emplace("lost", lost.begin(), lost.end());
      s.lifeline.erase(it);
      answer_waiters("lost");
    }
    s.clients.erase(fd);
    ::close(fd);
    lifelines_.store(static_cast<int>(s.lifeline.size()));
  };
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (auto& [fd, c] : s.clients) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents) return;
    if (fds[1].revents & POLLIN) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd >= 0) {
        const int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        s.clients[fd];
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      const int fd = fds[i].fd;
      char buf[65536];
      const ssize_t k = ::recv(fd, buf, sizeof buf, 0);
      if (k <= 0) {
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        drop(fd);
        continue;
      }
      std::string& in = s.clients[fd].in;
      in.append(buf, static_cast<size_t>(k));
      // Whole requests: op, u32 key length, key, u64 value length, value.
      for (;;) {
        if (in.size() < 5) break;
        uint32_t klen;
        std::memcpy(&klen, in.data() + 1, 4);
        if (in.size() < 5 + size_t{klen} + 8) break;
        uint64_t vlen;
        std::memcpy(&vlen, in.data() + 5 + klen, 8);
        const size_t total = 5 + size_t{klen} + 8 + vlen;
        if (in.size() < total) break;
        const char op = in[0];
        std::string key = in.substr(5, klen);
        std::vector<char> value(in.begin() + static_cast<std::ptrdiff_t>(5 + klen + 8),
                                in.begin() + static_cast<std::ptrdiff_t>(total));
        in.erase(0, total);
        if (op == 'S' || op == 'A') {
          auto [it, fresh] = s.values.try_emplace(key, value);
          if (op == 'S') it->second = std::move(value);
          const std::string reply = Reply(op == 'S' ? std::vector<char>{} : it->second);
          WriteAll(fd, reply.data(), reply.size());
          answer_waiters(key);
        } else if (op == 'H' || op == 'B') {
          if (op == 'H')
            s.lifeline[fd] = key;
          else
            s.lifeline.erase(fd);
          lifelines_.store(static_cast<int>(s.lifeline.size()));
          const std::string reply = Reply({});
          WriteAll(fd, reply.data(), reply.size());
        } else if (op == 'G') {
          if (auto it = s.values.find(key); it != s.values.end()) {
            const std::string reply = Reply(it->second);
            WriteAll(fd, reply.data(), reply.size());
          } else {
            s.waiting.emplace(std::move(key), fd);
          }
        } else {
          drop(fd);  // not a client of ours
          break;
        }
      }
    }
  }
}

void TcpStoreServer::WaitForLifelines(std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  while (lifelines_.load() > 0 && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

TcpStore::TcpStore(std::string host, int port, std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), timeout_(timeout) {
  const auto deadline = Clock::now() + timeout;
  std::string last_error;
  for (int attempt = 0;; ++attempt) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const std::string service = std::to_string(port_);
    if (const int rc = ::getaddrinfo(host_.c_str(), service.c_str(), &hints, &res); rc != 0) {
      last_error = ::gai_strerror(rc);
    } else {
      for (addrinfo* a = res; a != nullptr && fd_ < 0; a = a->ai_next) {
        int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          fd_ = fd;
        } else {
          last_error = std::strerror(errno);
          ::close(fd);
        }
      }
      ::freeaddrinfo(res);
    }
    if (fd_ >= 0) break;
    if (Clock::now() >= deadline)
      Fail("rendezvous: no store at {}:{} after {} s ({}): is rank 0 running, and are MASTER_ADDR/MASTER_PORT "
           "the same for every process? (AXLE_COLLECTIVE_TIMEOUT sets the wait)",
           host_, port_, timeout.count() / 1000, last_error);
    std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 10 ? 20 : 200));
  }
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

TcpStore::~TcpStore() { CloseFd(fd_); }

std::string TcpStore::address() const { return "tcp:" + host_ + ":" + std::to_string(port_); }

std::vector<char> TcpStore::Request(char op, const std::string& key, const std::vector<char>& data,
                                    std::chrono::milliseconds timeout) {
  if (fd_ < 0) Fail("rendezvous store {}: the connection was lost earlier", address());
  std::string req(1, op);
  const uint32_t klen = static_cast<uint32_t>(key.size());
  const uint64_t vlen = data.size();
  req.append(reinterpret_cast<const char*>(&klen), 4).append(key);
  req.append(reinterpret_cast<const char*>(&vlen), 8).append(data.begin(), data.end());
  const auto deadline = Clock::now() + timeout;
  uint64_t n = 0;
  bool closed = false;
  if (!WriteAll(fd_, req.data(), req.size()) || !ReadAll(fd_, &n, sizeof n, deadline, &closed) || closed) {
    CloseFd(fd_);  // a reply may still come: the connection is out of step
    if (closed)
      Fail("rendezvous store {}: the connection closed while asking for key '{}' (rank 0, which serves the store, "
           "exited or was killed)",
           address(), key);
    Fail("rendezvous store {}: no answer for key '{}' within {} s (the process that should set it, or rank 0 that "
         "serves the store, is gone or late)",
         address(), key, timeout.count() / 1000);
  }
  std::vector<char> value(n);
  if (n > 0 && !ReadAll(fd_, value.data(), n, deadline + std::chrono::seconds(10))) {
    CloseFd(fd_);
    Fail("rendezvous store {}: the answer for key '{}' was cut off", address(), key);
  }
  return value;
}

void TcpStore::set(const std::string& key, const std::vector<char>& data) { Request('S', key, data, timeout_); }

std::vector<char> TcpStore::get(const std::string& key) { return Request('G', key, {}, timeout_); }

std::vector<char> TcpStore::GetWithin(const std::string& key, std::chrono::milliseconds timeout) {
  return Request('G', key, {}, timeout);
}

void TcpStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  for (const std::string& k : keys) Request('G', k, {}, timeout);
}

void TcpStore::Hello(int rank) { Request('H', std::to_string(rank), {}, timeout_); }
void TcpStore::Goodbye() { Request('B', "", {}, timeout_); }

std::vector<char> TcpStore::SetIfAbsent(const std::string& key, const std::vector<char>& data) {
  return Request('A', key, data, timeout_);
}

}  // namespace axle::dist
