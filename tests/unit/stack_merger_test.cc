#include <gtest/gtest.h>

#include "profiler/resolve/stack_merger.h"

namespace gpuflame::profiler {
namespace {

using symbolizer::Frame;
using symbolizer::FrameKind;

const std::string kLibpython = "/usr/lib/libpython3.12.so";

Frame Native(std::string name, std::string module = "/lib/libx.so") {
  Frame f;
  f.kind = FrameKind::kNative;
  f.name = name;
  f.system_name = name;
  f.file = std::move(module);
  return f;
}
Frame Eval() { return Native("_PyEval_EvalFrameDefault", kLibpython); }
Frame Glue(std::string name) { return Native(std::move(name), kLibpython); }
Frame Py(std::string name) {
  Frame f;
  f.kind = FrameKind::kPython;
  f.name = std::move(name);
  return f;
}
Frame Tramp() {
  Frame f;
  f.kind = FrameKind::kTrampoline;
  f.name = symbolizer::kTrampolineName;
  return f;
}

std::string Names(const std::vector<Frame>& frames) {
  std::string out;
  for (const Frame& f : frames) out += (out.empty() ? "" : ";") + (f.kind == FrameKind::kTrampoline ? "T" : f.name);
  return out;
}

TEST(StackMergerTest, EachEvalActivationBecomesItsRunOfPythonFrames) {
  std::vector<Frame> native = {Native("_start", "/bin/python"), Glue("Py_RunMain"), Eval(),
                               Glue("_PyObject_MakeTpCall"), Eval(), Glue("cfunction_call"),
                               Native("THPVariable_empty", "/lib/libtorch_python.so"),
                               Native("at::empty", "/lib/libtorch_cpu.so")};
  std::vector<Frame> python = {Tramp(), Py("<module>"), Py("main"), Tramp(), Py("Model > __init__")};
  EXPECT_EQ(Names(MergeStacks(native, python, kLibpython)),
            "T;<module>;main;T;Model > __init__;THPVariable_empty;at::empty");
  // On request, CPython's own frames (and the start-up ones) stay.
  EXPECT_EQ(Names(MergeStacks(native, python, kLibpython, /*keep_interpreter_frames=*/true)),
            "_start;Py_RunMain;T;<module>;main;_PyObject_MakeTpCall;T;Model > __init__;cfunction_call;"
            "THPVariable_empty;at::empty");
}

TEST(StackMergerTest, PairsFromTheLeafWhenPythonFramesWereTruncated) {
  // Three activations, but the Python walk kept only the innermost two runs.
  std::vector<Frame> native = {Eval(), Eval(), Eval(), Native("leaf_op")};
  std::vector<Frame> python = {Py("[truncated]"), Tramp(), Py("b"), Tramp(), Py("c")};
  EXPECT_EQ(Names(MergeStacks(native, python, kLibpython)), "[truncated];T;b;T;c;leaf_op");
}

TEST(StackMergerTest, Python310RunsAreOneFrameEach) {
  std::vector<Frame> native = {Eval(), Glue("_PyFunction_Vectorcall"), Eval(), Native("op")};
  std::vector<Frame> python = {Py("<module>"), Py("f")};
  EXPECT_EQ(Names(MergeStacks(native, python, kLibpython)), "<module>;f;op");
}

TEST(StackMergerTest, WithoutEvalFramesPythonComesFirst) {
  // The unwind stopped before reaching the interpreter (a frame without CFI).
  std::vector<Frame> native = {Native("ffi_call"), Native("gf_sim_empty")};
  std::vector<Frame> python = {Tramp(), Py("<module>"), Py("f")};
  EXPECT_EQ(Names(MergeStacks(native, python, kLibpython)), "T;<module>;f;ffi_call;gf_sim_empty");
  // And a thread that never ran Python keeps its native stack as it is.
  EXPECT_EQ(Names(MergeStacks(native, {}, kLibpython)), "ffi_call;gf_sim_empty");
}

TEST(StackMergerTest, RecognisesEvalFramesBySymbol) {
  EXPECT_TRUE(IsEvalFrame(Eval()));
  EXPECT_TRUE(IsEvalFrame(Native("PyEval_EvalFrameEx")));
  EXPECT_FALSE(IsEvalFrame(Native("PyEval_EvalCode")));
  EXPECT_FALSE(IsEvalFrame(Py("_PyEval_EvalFrameDefault")));
}

}  // namespace
}  // namespace gpuflame::profiler
