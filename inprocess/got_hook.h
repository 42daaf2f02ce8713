// Redirects one library's calls to a function in another, from inside the
// process: the caller's GOT slot for the symbol is rewritten to point at a
// replacement (memray's technique for malloc). Only the calls of the named
// library change; the function itself, and every other caller, stay as they
// are. Why not an inline patch of the callee: that rewrites code other
// threads may be executing, and breaks uprobes placed there.
#ifndef GPUFLAME_INPROCESS_GOT_HOOK_H_
#define GPUFLAME_INPROCESS_GOT_HOOK_H_

#include <string>

namespace gpuflame::inprocess {

inline constexpr int kMaxGotSlots = 4;

struct GotHookResult {
  int slots = 0;                   // GOT slots rewritten (0: nothing to hook)
  void** slot[kMaxGotSlots] = {};  // where, for the first kMaxGotSlots
  void* original = nullptr;        // the function the slots pointed to, resolved
  bool write_failed = false;       // a slot was found but could not be made writable
  std::string error;               // why not, when slots == 0
};

// Where the hook finds the original: stored before the first slot changes,
// so a call that races the patch never sees it unset.
using OriginalSink = void (*)(void* original);

// In the first loaded library whose file name starts with |library_prefix|
// (e.g. "libc10_cuda.so"), points every GOT slot bound to |symbol| at
// |replacement|. The original is resolved through the library's own lookup
// scope (dlsym on its handle), not read from the slot: with lazy binding the
// slot may still point at the PLT stub, which would rebind it over the hook.
GotHookResult HookGot(const char* library_prefix, const char* symbol, void* replacement, OriginalSink sink);

// Whether the first loaded library named |library_prefix|... binds any
// symbol whose name starts with |symbol_prefix| through its GOT: tells "it
// calls another version of the function" from "it does not call it".
bool GotHasSymbolWithPrefix(const char* library_prefix, const char* symbol_prefix);

// Points |slot| at |value| again if something (the dynamic loader's lazy
// binding, racing the first patch) rewrote it; true if it had to.
bool RestoreGotSlot(void** slot, void* value);

}  // namespace gpuflame::inprocess

#endif  // GPUFLAME_INPROCESS_GOT_HOOK_H_
