// Destroys the probes of processes that are gone, off the worker thread.
//
// Why a thread of its own: closing a uprobe made as a perf event (USDT
// probes always; every uprobe on a kernel without uprobe_multi,
// uprobe_multi.h) waits for grace periods in the kernel
// (perf_uprobe_destroy -> perf_trace_event_unreg ->
// synchronize_rcu_tasks_trace, and two more): 54-160 ms a probe on the
// development VM (kernel 6.18). A process's ~50 such probes would hold the
// event loop for 4.4 s at its exit (measured), its ring buffer unread. A
// uprobe_multi link waits for one (8-44 ms), and goes here too. Here only
// this thread waits.
//
// One thread, and it gives way: the kernel destroys these probes under its
// global event_mutex, grace period included, and every uprobe attach takes
// that mutex too. More threads would not overlap their waits (measured: 8
// threads destroyed no faster than one) and would queue ahead of the
// worker's attaches, which hold a process at its gate. So before each
// destroy the reaper waits until no attach has started for kQuietNs: a
// burst of attaches (a process's ~50 probes) waits for at most the one
// destroy already under way.
//
// Threads: Reap from the worker thread; the destroys run on the reaper's
// own. A USDT link's destroy returns its spec IDs to their table, which
// locks (usdt_specs.h).
#ifndef GPUFLAME_PROFILER_PROBES_LINK_REAPER_H_
#define GPUFLAME_PROFILER_PROBES_LINK_REAPER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "base/scoped_fd.h"
#include "profiler/probes/usdt_specs.h"

struct bpf_link;

namespace gpuflame::profiler {

struct BpfLinkDeleter {
  void operator()(bpf_link* link) const;  // bpf_link__destroy
};
using BpfLinkPtr = std::unique_ptr<bpf_link, BpfLinkDeleter>;

// A probe's kernel link: libbpf's (perf-event uprobes, tracepoints, perf
// events) or a bare link descriptor (uprobe_multi, which libbpf 1.1 cannot
// make). One of the two is set. A USDT link holds its sites' argument
// specs, which go only after the link has closed: declared first (destroyed
// last), and dropped last when another link is assigned over this one.
struct ProbeLink {
  ProbeLink() = default;
  explicit ProbeLink(BpfLinkPtr link, UsdtSpecRefs refs = {}) : specs(std::move(refs)), bpf(std::move(link)) {}
  explicit ProbeLink(base::ScopedFd link, UsdtSpecRefs refs = {}) : specs(std::move(refs)), fd(std::move(link)) {}
  ProbeLink(ProbeLink&&) noexcept = default;
  ProbeLink& operator=(ProbeLink&& o) noexcept {
    fd = std::move(o.fd);  // the old link closes here, before its specs go
    bpf = std::move(o.bpf);
    specs = std::move(o.specs);
    return *this;
  }

  UsdtSpecRefs specs;
  BpfLinkPtr bpf;
  base::ScopedFd fd;
  explicit operator bool() const { return bpf || fd; }
};

// Hands |link| to the kernel to close as gpuflame exits, without waiting
// here: its descriptors stay open (the probe attached) until then, and
// libbpf's memory for it is freed now.
void AbandonLink(ProbeLink link);

class LinkReaper {
 public:
  // |last_attach_ns|: CLOCK_MONOTONIC of the worker's latest attach.
  explicit LinkReaper(const std::atomic<int64_t>& last_attach_ns);
  static constexpr int64_t kQuietNs = 20'000'000;
  // Joins the thread after the link it is destroying; those still queued
  // are abandoned (AbandonLink): at gpuflame's end, not worth its wait.
  ~LinkReaper();
  LinkReaper(const LinkReaper&) = delete;
  LinkReaper& operator=(const LinkReaper&) = delete;

  void Reap(ProbeLink link);

 private:
  void Run();

  // Waits (bounded by stopping) until no attach started for kQuietNs.
  void GiveWay(std::unique_lock<std::mutex>& lock);

  const std::atomic<int64_t>& last_attach_ns_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<ProbeLink> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: started once the rest exists
};

}  // namespace gpuflame::profiler

#endif  // GPUFLAME_PROFILER_PROBES_LINK_REAPER_H_
