// Rounds of point-to-point messages (messages.h).
#include "dist/messages.h"

#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/error.h"

namespace axle::dist {
namespace {

using Clock = std::chrono::steady_clock;

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

}  // namespace

void Waits::Add(gloo::transport::UnboundBuffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) throw Error(reason_);
  live_.push_back(b);
}

void Waits::Remove(gloo::transport::UnboundBuffer* b) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(std::remove(live_.begin(), live_.end(), b), live_.end());
}

void Waits::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!aborted_) reason_ = reason;
  aborted_ = true;
  for (auto* b : live_) {
    b->abortWaitRecv();
    b->abortWaitSend();
  }
}

std::string Waits::reason() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reason_;
}

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

}  // namespace axle::dist
