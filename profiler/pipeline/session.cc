#include "profiler/pipeline/session.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "profiler/probes/preflight.h"

namespace gpuflame::profiler {

absl::StatusOr<std::unique_ptr<Session>> Session::Start(const Options& options) {
  if (auto s = CheckPrivileges(); !s.ok()) return s;
  if (auto s = CheckKernel(); !s.ok()) return s;
  std::unique_ptr<Session> s(new Session());
  s->native_ = std::make_unique<symbolizer::NativeSymbolizer>(s->elves_);

  BpfProbes::Options bopt;
  bopt.filter_targets = !options.system_wide;
  bopt.ring_bytes = options.ring_bytes;
  bopt.native_stacks = options.native_stacks;
  Session* raw = s.get();
  auto probes = BpfProbes::Load(bopt, [raw](std::span<const uint8_t> rec) { raw->events_->OnRecord(rec); });
  if (!probes.ok()) return ExplainBpfFailure(probes.status());
  s->probes_ = std::move(*probes);

  ProcessRegistry::Options ropt;
  ropt.filtered = !options.system_wide;
  ropt.target_flags = GF_TARGET_TRACE | GF_TARGET_FOLLOW;
  s->registry_ = std::make_unique<ProcessRegistry>(*s->probes_, s->elves_, ropt, s->native_.get());
  s->resolver_ = std::make_unique<StackResolver>(s->registry_.get(), *s->native_,
                                                 StackResolver::Options{options.show_trampolines,
                                                                        options.keep_interpreter_frames});
  s->unwinder_ = std::make_unique<NativeUnwinder>(*s->native_);
  s->events_ = std::make_unique<EventProcessor>(s->registry_.get(), *s->resolver_, s->unwinder_.get());
  s->refresher_ = std::make_unique<FrameRefresher>(options.binary_dirs);
  if (options.cpu_hz > 0) {
    s->events_->SetCpuSampling(1'000'000'000 / options.cpu_hz, options.thread_names);
    if (auto st = s->probes_->StartCpuSampling(options.cpu_hz); !st.ok())
      return absl::Status(st.code(), absl::StrCat("CPU profile: ", st.message(), " (use --cpu-hz 0 to go without)"));
  }
  if (options.system_wide) s->registry_->ScanAll();
  return s;
}

Session::~Session() = default;

absl::Status Session::AddTarget(pid_t pid) { return registry_->AddTarget(pid); }

absl::Status Session::AddGatedChild(pid_t pid) {
  return probes_->SetTarget(pid, GF_TARGET_TRACE | GF_TARGET_GATE | GF_TARGET_FOLLOW);
}

int Session::Poll(int timeout_ms) {
  int n = probes_->Poll(timeout_ms);
  registry_->Tick();
  return n;
}

void Session::Drain() {
  for (int i = 0; i < 1000 && probes_->Poll(0) > 0; i++) {
  }
}

void Session::DetachProbesInBackground() {
  int alive[2];
  if (pipe(alive) != 0) return;
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; fd++) dup2(null, fd);
    close(alive[1]);
    char b;
    while (read(alive[0], &b, 1) < 0 && errno == EINTR) {
    }
    _exit(0);  // read returns 0 once the parent has exited
  }
  close(alive[0]);  // the write end stays open until we exit
}

}  // namespace gpuflame::profiler
