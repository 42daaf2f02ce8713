// Which file system a target's mapped file lives on, told without touching
// the file: from the device numbers /proc/PID/maps gives and the target's
// /proc/PID/mountinfo. A FUSE file system is served by a process, which any
// user may run (in a user namespace, unprivileged) and which may never
// answer: opening, stat-ing or reading a file on it (even resolving a path
// through it) would then wait for good, and the kernel offers no timeout.
// So gpuflame does not touch target files on FUSE at all (said once per
// file; their frames stay module+offset). Network file systems (NFS, CIFS,
// Lustre) hold real users' environments and are read: a hung share stalls
// gpuflame as it stalls the job, and /healthz says so.
#ifndef GPUFLAME_INSPECT_MOUNT_TYPES_H_
#define GPUFLAME_INSPECT_MOUNT_TYPES_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuflame::inspect {

// The most of /proc/PID/mountinfo read (a node with thousands of mounts
// stays far below; beyond, the rest is not looked at).
inline constexpr size_t kMaxMountinfoBytes = 4 << 20;

// The file system type ("ext4", "fuse.sshfs", ...) of the first mount in
// |mountinfo| (proc(5)'s format) whose device is |major|:|minor|; nullopt
// when none is, or the text is not mountinfo.
std::optional<std::string> FsTypeOfDevice(std::string_view mountinfo, uint32_t major, uint32_t minor);

// FUSE in any of its forms: "fuse", "fuseblk", "fuse.<subtype>".
bool ServedByAProcess(std::string_view fstype);

// Whether the file |pid| maps from device |major|:|minor| is on FUSE, per
// its mountinfo. A block device (major != 0) is never looked up: the one
// FUSE kind on one, fuseblk, takes the privilege to open the device. An
// anonymous device's answer is kept kFuseCacheNs per mount namespace: a
// device number freed by an unmount and taken by a new FUSE mount within
// that time is the one case it can miss. A device its mountinfo does not
// list (an overlay's lower layer mounted elsewhere) counts as not FUSE.
// Thread-safe.
bool OnFuse(pid_t pid, uint32_t major, uint32_t minor);
inline constexpr int64_t kFuseCacheNs = 2'000'000'000;

// Files left alone for being on FUSE, once each ("pid N: PATH"), since the
// last call: for one warning each. At most 256 wait; more are counted only.
void NoteFuseFileRefused(pid_t pid, uint64_t inode, uint32_t major, uint32_t minor, std::string_view path);
std::vector<std::string> TakeFuseFilesRefused();
uint64_t FuseFilesRefused();  // all refusals, repeats included

}  // namespace gpuflame::inspect

#endif  // GPUFLAME_INSPECT_MOUNT_TYPES_H_
