#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>
#include <utility>

#include "base/heartbeat.h"
#include "base/json_string.h"
#include "base/redact.h"
#include "base/regular_file.h"
#include "base/scoped_fd.h"
#include "base/utf8.h"
#include "gtest/gtest.h"

namespace gpuflame::base {
namespace {

TEST(JsonStringTest, EscapesControlCharacters) {
  EXPECT_EQ(JsonString("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
}

TEST(Utf8Test, InvalidBytesFromProfiledProcessesBecomeReplacementCharacters) {
  EXPECT_EQ(ValidUtf8("Trainer > step"), "Trainer > step");
  EXPECT_EQ(ValidUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5");
  EXPECT_EQ(ValidUtf8("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(ValidUtf8("\xC3"), "\xEF\xBF\xBD");                       // truncated
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_TRUE(IsValidUtf8(ValidUtf8(std::string("\x80\x81\xFE", 3))));
}

// Whether |fd| is an open descriptor of this process: F_GETFD fails with
// EBADF once it is closed (tests run single-threaded, so nothing reuses the
// number between the close and the check).
bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

int OpenDevNull() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

TEST(ScopedFdTest, EmptyAndNegativeHoldNothing) {
  ScopedFd none;
  EXPECT_FALSE(none.valid());
  EXPECT_FALSE(none);
  EXPECT_EQ(none.get(), -1);
  ScopedFd failed(-5);  // e.g. a failed syscall's result, passed straight in
  EXPECT_EQ(failed.get(), -1);
  EXPECT_EQ(failed.release(), -1);
  EXPECT_EQ(none.Close(), 0);
}

TEST(ScopedFdTest, ClosesOnDestruction) {
  int raw = -1;
  {
    ScopedFd fd(OpenDevNull());
    ASSERT_TRUE(fd);
    raw = fd.get();
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(ScopedFdTest, MovedFromOwnerDoesNotClose) {
  ScopedFd a(OpenDevNull());
  const int raw = a.get();
  {
    ScopedFd b(std::move(a));
    EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the point of the test
    EXPECT_EQ(b.get(), raw);
    a = ScopedFd();  // destroying the moved-from owner's contents closes nothing
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));  // b's destructor
}

TEST(ScopedFdTest, MoveAssignmentClosesWhatWasHeld) {
  ScopedFd a(OpenDevNull()), b(OpenDevNull());
  const int raw_a = a.get(), raw_b = b.get();
  b = std::move(a);
  EXPECT_FALSE(IsOpen(raw_b));
  EXPECT_TRUE(IsOpen(raw_a));
  EXPECT_EQ(b.get(), raw_a);
  ScopedFd& same = b;
  b = std::move(same);  // self-move keeps the descriptor
  EXPECT_EQ(b.get(), raw_a);
  EXPECT_TRUE(IsOpen(raw_a));
}

TEST(ScopedFdTest, ResetClosesAndReleaseDoesNot) {
  ScopedFd fd(OpenDevNull());
  const int first = fd.get();
  const int second = OpenDevNull();
  fd.reset(second);
  EXPECT_FALSE(IsOpen(first));
  EXPECT_EQ(fd.get(), second);
  fd.reset(second);  // the same descriptor handed back is kept, not closed
  EXPECT_TRUE(IsOpen(second));

  const int released = fd.release();
  EXPECT_EQ(released, second);
  EXPECT_FALSE(fd.valid());
  EXPECT_TRUE(IsOpen(released));
  fd.reset();  // holds nothing: closes nothing
  EXPECT_TRUE(IsOpen(released));
  ScopedFd again(released);  // a new owner, so the test leaks nothing

  errno = ENOENT;
  again.reset();
  EXPECT_EQ(errno, ENOENT);  // error paths can read errno after an owner closed
  EXPECT_FALSE(IsOpen(released));
}

TEST(ScopedFdTest, CloseReportsAndEmpties) {
  ScopedFd fd(OpenDevNull());
  const int raw = fd.get();
  EXPECT_EQ(fd.Close(), 0);
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(IsOpen(raw));
}

TEST(ScopedFdTest, DupIsTheSameFileAndCloseOnExec) {
  ScopedFd fd(OpenDevNull());
  ScopedFd copy = ScopedFd::Dup(fd.get());
  ASSERT_TRUE(copy);
  EXPECT_NE(copy.get(), fd.get());
  EXPECT_EQ(fcntl(copy.get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  struct stat a = {};
  struct stat b = {};
  ASSERT_EQ(fstat(fd.get(), &a), 0);
  ASSERT_EQ(fstat(copy.get(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_FALSE(ScopedFd::Dup(-1).valid());
}

TEST(PipeTest, EndsAreCloseOnExecAndClosingTheWriterGivesEof) {
  std::optional<Pipe> p = Pipe::Open();
  ASSERT_TRUE(p.has_value());
  for (const ScopedFd* end : {&p->read_end, &p->write_end}) {
    ASSERT_TRUE(end->valid());
    EXPECT_EQ(fcntl(end->get(), F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  }
  ASSERT_EQ(write(p->write_end.get(), "x", 1), 1);
  const int raw_write = p->write_end.get();
  p->write_end.reset();
  EXPECT_FALSE(IsOpen(raw_write));
  char buf[2];
  EXPECT_EQ(read(p->read_end.get(), buf, sizeof(buf)), 1);
  EXPECT_EQ(read(p->read_end.get(), buf, sizeof(buf)), 0);  // EOF: no writer left
}

TEST(ScopedDirTest, ClosesTheStream) {
  int raw = -1;
  {
    ScopedDir dir(opendir("/proc/self/fd"));
    ASSERT_NE(dir, nullptr);
    raw = dirfd(dir.get());
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
}

TEST(RedactTest, CredentialsNeverLeaveInAUrl) {
  EXPECT_EQ(RedactUrl("http://user:secret@pyroscope:4040/"), "http://***@pyroscope:4040/");
  EXPECT_EQ(RedactUrl("https://token@pyro.example/push?key=abc"), "https://***@pyro.example/push?***");
  EXPECT_EQ(RedactUrl("http://pyroscope:4040"), "http://pyroscope:4040");
  EXPECT_EQ(RedactUrl("http://a@b@host/x"), "http://***@host/x");
  EXPECT_EQ(RedactUrl("pyroscope:4040"), "pyroscope:4040");
  EXPECT_EQ(RedactUrl("http://u:p@h#frag"), "http://***@h");
  // A password with an unescaped '/' or '?' is still not printed.
  EXPECT_EQ(RedactUrl("http://u:pa/ss@host:4040/x"), "http://***@host:4040/x");
  EXPECT_EQ(RedactUrl("http://u:pa/ss@host?q=1"), "http://***@host?***");
}

TEST(RedactTest, CredentialsAreTakenOutOfAUrlOnce) {
  UrlCredentials c = SplitUrlCredentials("http://al%40ice:s3%3Acret@pyroscope:4040/base");
  EXPECT_TRUE(c.had_credentials);
  EXPECT_EQ(c.url, "http://pyroscope:4040/base");
  EXPECT_EQ(c.user, "al@ice");
  EXPECT_EQ(c.password, "s3:cret");
  c = SplitUrlCredentials("https://u:p/w@h");
  EXPECT_EQ(c.url, "https://h");
  EXPECT_EQ(c.password, "p/w");
  c = SplitUrlCredentials("http://pyroscope:4040/?a=b@c");
  EXPECT_FALSE(c.had_credentials);
  EXPECT_EQ(c.url, "http://pyroscope:4040/?a=b@c");
  EXPECT_EQ(SplitUrlCredentials("http://u@h").password, "");
  EXPECT_EQ(SplitUrlCredentials("http://u:%4@h").password, "%4");  // not an escape: kept as is
}

TEST(RedactTest, HeaderValuesWithLineBreaksAreRefused) {
  EXPECT_TRUE(HasControlCharacters("tenant\r\nX-Evil: 1"));
  EXPECT_TRUE(HasControlCharacters(std::string("a\0b", 3)));
  EXPECT_FALSE(HasControlCharacters("team-a_prod.1"));
}

TEST(RegularFileTest, OpensOnlyRegularFilesAndOnlyTheOneMeant) {
  char dir[] = "/tmp/gf-regular-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string file = std::string(dir) + "/lib.so", fifo = std::string(dir) + "/fifo";
  {
    ScopedFd w(open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_EQ(write(w.get(), "x", 1), 1);
  }
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  struct stat st{};
  ASSERT_EQ(stat(file.c_str(), &st), 0);
  const FileIdentity id{st.st_ino, major(st.st_dev), minor(st.st_dev)};

  ScopedFd fd = OpenRegularFile(file, id);
  ASSERT_TRUE(fd);
  char c = 0;
  EXPECT_EQ(read(fd.get(), &c, 1), 1);
  EXPECT_EQ(c, 'x');
  // A FIFO has no writer: a plain open() would wait here forever.
  EXPECT_FALSE(OpenRegularFile(fifo));
  EXPECT_EQ(errno, EINVAL);
  EXPECT_FALSE(OpenRegularFile(dir));
  EXPECT_FALSE(OpenRegularFile("/dev/null"));
  // Another file at the path the process named.
  EXPECT_FALSE(OpenRegularFile(file, FileIdentity{st.st_ino + 1, id.dev_major, id.dev_minor}));
  EXPECT_EQ(errno, ESTALE);
  EXPECT_FALSE(OpenRegularFile(std::string(dir) + "/missing"));
  unlink(file.c_str());
  unlink(fifo.c_str());
  rmdir(dir);
}

TEST(HeartbeatTest, StallsCountFromTheLastBeatAndNotBeforeTheFirst) {
  Heartbeat beat;
  EXPECT_EQ(beat.StalledNs(), 0);
  beat.Beat();
  usleep(2000);
  EXPECT_GE(beat.StalledNs(), 2'000'000);
  beat.Beat();
  EXPECT_LT(beat.StalledNs(), 2'000'000'000);
}

}  // namespace
}  // namespace gpuflame::base
