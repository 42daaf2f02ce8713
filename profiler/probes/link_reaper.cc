#include "profiler/probes/link_reaper.h"

#include <bpf/libbpf.h>
#include <pthread.h>

#include <time.h>

#include <chrono>
#include <utility>

namespace gpuflame::profiler {

void BpfLinkDeleter::operator()(bpf_link* link) const { bpf_link__destroy(link); }

void AbandonLink(ProbeLink link) {
  // Disconnected, libbpf's destroy frees its memory and leaves the
  // descriptors (and the probe) to the kernel, which closes them at exit.
  if (link.bpf) bpf_link__disconnect(link.bpf.get());
  (void)link.fd.release();  // the same: open until gpuflame's exit closes it
  link.specs.Keep();        // still read by the open link
}

LinkReaper::LinkReaper(const std::atomic<int64_t>& last_attach_ns)
    : last_attach_ns_(last_attach_ns), thread_([this] { Run(); }) {}

LinkReaper::~LinkReaper() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
  for (ProbeLink& link : queue_) AbandonLink(std::move(link));
}

void LinkReaper::Reap(ProbeLink link) {
  if (!link) return;
  {
    std::lock_guard lock(mutex_);
    queue_.push_back(std::move(link));
  }
  wake_.notify_one();
}

void LinkReaper::GiveWay(std::unique_lock<std::mutex>& lock) {
  for (;;) {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t quiet = now.tv_sec * 1'000'000'000ll + now.tv_nsec - last_attach_ns_.load(std::memory_order_relaxed);
    if (stopping_ || quiet >= kQuietNs) return;
    wake_.wait_for(lock, std::chrono::nanoseconds(kQuietNs - quiet));
  }
}

void LinkReaper::Run() {
  pthread_setname_np(pthread_self(), "gf-link-reaper");
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    GiveWay(lock);
    if (stopping_) return;
    {
      ProbeLink doomed = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
    }  // destroyed here, unlocked: the link closes, then its specs go
    lock.lock();
  }
}

}  // namespace gpuflame::profiler
