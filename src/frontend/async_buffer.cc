// AsyncBuffer (lazy.h): a step's result that the execution thread publishes once it has run (a
// buffer, shards or an error), and that readers wait for.
#include "frontend/lazy.h"

#include <map>

#include "frontend/sharded_step.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace axle::detail {

void AsyncBuffer::Set(runtime::BufferPtr buffer) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    buffer_ = std::move(buffer);
    ready_ = true;
  }
  cv_.notify_all();
}

void AsyncBuffer::SetError(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    error_ = std::move(error);
    ready_ = true;
  }
  cv_.notify_all();
}

AsyncBuffer::AsyncBuffer(std::shared_ptr<ShardedData> ready)
    : sharding(ready->sharding), mesh(ready->mesh), sharded_(std::move(ready)), ready_(true) {}

void AsyncBuffer::SetSharded(std::shared_ptr<ShardedData> shards) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    sharded_ = std::move(shards);
    ready_ = true;
  }
  cv_.notify_all();
}

void AsyncBuffer::WaitReady(std::unique_lock<std::mutex>& lock) {
  if (ready_) return;
  runtime::CompetingScope blocked(HostBlocked());
  runtime::profile::TraceScope span("wait for a step's result");
  cv_.wait(lock, [&] { return ready_; });
}

const runtime::BufferPtr& AsyncBuffer::Get() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitReady(lock);
  if (error_) std::rethrow_exception(error_);
  if (buffer_ == nullptr && sharded_ != nullptr) buffer_ = AssembleShards(*sharded_);
  AXLE_CHECK(buffer_ != nullptr, "a donated buffer was read after its step took it");
  return buffer_;
}

runtime::BufferPtr AsyncBuffer::Take() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitReady(lock);
  if (error_) std::rethrow_exception(error_);
  if (buffer_ == nullptr && sharded_ != nullptr) buffer_ = AssembleShards(*sharded_);
  sharded_ = nullptr;
  return std::move(buffer_);
}

std::shared_ptr<ShardedData> AsyncBuffer::GetSharded() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitReady(lock);
  if (error_) std::rethrow_exception(error_);
  return sharded_;
}

std::vector<runtime::BufferPtr> AsyncBuffer::ExclusiveBuffers() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!ready_ || error_) return {};
  if (sharded_ == nullptr) {
    if (buffer_ == nullptr || buffer_.use_count() != 1) return {};
    return {buffer_};
  }
  if (sharded_.use_count() != 1 || (buffer_ != nullptr && buffer_.use_count() != 1)) return {};
  std::map<const ir::Literal*, long> uses;  // replicas may share one buffer
  for (const runtime::BufferPtr& b : sharded_->shards)
    if (b != nullptr) ++uses[b.get()];
  for (const runtime::BufferPtr& b : sharded_->shards)
    if (b != nullptr && b.use_count() != uses[b.get()]) return {};
  buffer_ = nullptr;  // the assembled copy, if any: rebuilt from the shards when read again
  return sharded_->shards;
}

std::shared_ptr<ShardedData> AsyncBuffer::TakeSharded() {
  std::unique_lock<std::mutex> lock(mu_);
  WaitReady(lock);
  if (error_) std::rethrow_exception(error_);
  if (sharded_ != nullptr) buffer_ = nullptr;
  return std::move(sharded_);
}

bool AsyncBuffer::ready() {
  std::lock_guard<std::mutex> lock(mu_);
  return ready_;
}

}  // namespace axle::detail
