#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "inspect/mount_types.h"
#include "inspect/proc_maps.h"

namespace gpuflame::inspect {
namespace {

// proc(5)'s example and kinds seen on GPU nodes: optional fields, a mount
// point with an escaped space, FUSE with a subtype, a truncated last line.
constexpr char kMountinfo[] =
    "36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
    "100 36 0:52 / /home/u/my\\040models rw,nosuid,nodev shared:7 master:3 - fuse.sshfs u@h:/m rw,user_id=1000\n"
    "101 36 0:53 / /data rw - fuse /dev/fuse rw\n"
    "102 36 0:54 / /overlay rw - overlay overlay rw,lowerdir=/a:/b\n"
    "103 36 0:55 / /x - rw -\n"
    "104 36 0:56 / /cut rw";

TEST(MountTypesTest, FindsTheTypeOfADevicesMount) {
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 98, 0), "ext3");
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 52), "fuse.sshfs");
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 53), "fuse");
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 54), "overlay");
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 55), "rw");  // as written: its type field says "rw"
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 56), std::nullopt);  // no " - ": not a whole line
  EXPECT_EQ(FsTypeOfDevice(kMountinfo, 0, 99), std::nullopt);
  EXPECT_EQ(FsTypeOfDevice("", 0, 52), std::nullopt);
  EXPECT_EQ(FsTypeOfDevice("1 2 0:52x / / rw - fuse f rw\n", 0, 52), std::nullopt);
}

TEST(MountTypesTest, FuseInEveryFormIsServedByAProcess) {
  for (const char* t : {"fuse", "fuseblk", "fuse.sshfs", "fuse.gcsfuse"}) EXPECT_TRUE(ServedByAProcess(t)) << t;
  for (const char* t : {"ext4", "overlay", "nfs4", "fusectl", "tmpfs", ""}) EXPECT_FALSE(ServedByAProcess(t)) << t;
}

TEST(MountTypesTest, OurOwnFilesAreNotOnFuse) {
  // This test binary and /proc/self/maps' first file: block devices or
  // overlay/tmpfs in CI, never FUSE.
  auto maps = ReadProcMaps(getpid());
  ASSERT_TRUE(maps.ok());
  int files = 0;
  for (const Mapping& m : *maps) {
    if (m.inode == 0) continue;
    files++;
    EXPECT_FALSE(OnFuse(getpid(), m.dev_major, m.dev_minor)) << m.path;
    PinnedFile pinned = PinnedFile::Open(getpid(), m);
    EXPECT_TRUE(pinned.ok()) << m.path;
  }
  EXPECT_GT(files, 0);
  EXPECT_EQ(FuseFilesRefused(), 0u);
  EXPECT_TRUE(TakeFuseFilesRefused().empty());
}

}  // namespace
}  // namespace gpuflame::inspect
