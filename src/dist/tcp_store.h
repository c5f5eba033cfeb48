// The rendezvous store of a run over TCP: rank 0 serves a key-value map at MASTER_ADDR:MASTER_PORT
// and every process (rank 0 too) is a client (docs/spmd.md, "Rendezvous").
//
// Gloo ships a file store and a Redis store but no TCP one (PyTorch keeps its TCPStore in c10d);
// this is the small part of one that rendezvous needs: set, a blocking get with a deadline, and
// set-if-absent (the first failure of a run). It carries the processes' addresses and a few
// bytes of bookkeeping, never tensor data: collectives go through Gloo's pairs.
#pragma once

#include <chrono>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/store.h>

namespace axle::dist {

// The server: a thread that owns the listening socket and the map, until destroyed.
class TcpStoreServer {
 public:
  // Listens on `port` on every interface; throws axle::Error when the port cannot be bound.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  int port() const { return port_; }
  // Waits until no connection is a lifeline (every process said goodbye or is gone), or `limit`
  // passed.
  void WaitForLifelines(std::chrono::milliseconds limit);

 private:
  struct State;
  void Serve();
  int port_ = 0;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};  // a pipe that ends Serve
  std::atomic<int> lifelines_{0};
  std::unique_ptr<State> state_;
  std::unique_ptr<std::thread> thread_;
};

// One connection to the server. Not thread-safe: a thread that blocks in get() holds the
// connection, so each concurrent user makes its own client.
class TcpStore final : public gloo::rendezvous::Store {
 public:
  // Connects to host:port, retrying until `timeout` (the server may start later).
  TcpStore(std::string host, int port, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits for the key until the deadline given at construction.
  std::vector<char> get(const std::string& key) override;
  // Waits for the key at most `timeout`.
  std::vector<char> GetWithin(const std::string& key, std::chrono::milliseconds timeout);
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

  // Sets key to data unless it is set; returns the value the key holds afterwards.
  std::vector<char> SetIfAbsent(const std::string& key, const std::vector<char>& data);

  // Registers this connection as process `rank`'s lifeline: when it closes before Goodbye (the
  // process exited or was killed), the server sets the key "lost" to "process <rank>" unless it
  // is set (Note [Who failed], gloo_world.cc).
  void Hello(int rank);
  void Goodbye();

  std::string address() const;

 private:
  std::vector<char> Request(char op, const std::string& key, const std::vector<char>& data,
                            std::chrono::milliseconds timeout);
  std::string host_;
  int port_ = 0;
  std::chrono::milliseconds timeout_;
  int fd_ = -1;
};

}  // namespace axle::dist
