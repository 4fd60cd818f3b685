// 64-bit indices where a buffer needs them: lowering indexes an argument of 2^31 elements or
// more in int64 (computed so from its leaves), every other buffer in int32; the CPU executor
// reports index arithmetic that overflows its type.
#include "TestUtil.h"
#include "interp_kernels.h"

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/tessel.h"
#include "runtime/Build.h"
#include "runtime/Check.h"
#include "runtime/Nvrtc.h"
#include "runtime/interp/Executor.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

using namespace tessel;

namespace {

// The line of `src` that stores to `buffer` what it reads from `read` ("C[...] = ... A[...").
std::string store_line(const std::string &src, const std::string &buffer, const std::string &read) {
  for (size_t at = src.find(buffer + "["); at != std::string::npos;
       at = src.find(buffer + "[", at + 1)) {
    size_t line = src.rfind('\n', at) + 1;
    std::string text = src.substr(line, src.find('\n', at) - line);
    if (src.find_first_not_of(' ', line) == at && text.find(read + "[") != std::string::npos)
      return text;
  }
  return "";
}

} // namespace

// C of 70000 x 70000 (4.9e9 elements): its index is int64 from blockIdx / threadIdx up (int32
// would wrap at row 30678); A (70000 x 16) and B (16 x 70000) keep int32 indices.
TEST(WideIndex, LargeOutputIndexedInInt64Only) {
  ScheduledProgram p = gemm_naive(70000, 70000, 16, Float(32));
  LoweredModule m = lower(p.schedule, p.args);
  std::string ir = to_string(m);
  std::string c_store = store_line(ir, "C", "A");
  EXPECT_NE(c_store.find("cast(int64, blockIdx.y) * 1120000i64"), std::string::npos) << ir;
  EXPECT_NE(c_store.find("A[blockIdx.y * 256 + threadIdx.y * 16 + k]"), std::string::npos) << ir;
  EXPECT_NE(c_store.find("B[k * 70000 + blockIdx.x * 16 + threadIdx.x]"), std::string::npos) << ir;

  std::string src = codegen_cuda(m);
  c_store = store_line(src, "C", "A");
  EXPECT_NE(c_store.find("((long long)((int)blockIdx.y)) * 1120000LL"), std::string::npos) << src;
  EXPECT_EQ(c_store.find("A[((long long)"), std::string::npos) << src;
  CompileOptions o;
  o.arch = "sm_80";
  EXPECT_FALSE(nvrtc_compile(src, nvrtc_options(o), "gemm_naive_70000.cu").cubin.empty());

  // The same program at 1000 x 1000 keeps int32 everywhere.
  ScheduledProgram small = gemm_naive(1000, 1000, 16, Float(32));
  EXPECT_EQ(to_string(lower(small.schedule, small.args)).find("int64"), std::string::npos);
}

// The int64 path computes the same values: run with the threshold lowered so that every
// argument is wide, on the executor, against the float64 reference.
TEST(WideIndex, Int64IndicesRunOnTheExecutor) {
  ScheduledProgram p = gemm_shared(100, 70, 33, Float(16));
  LowerOptions o;
  o.wide_index_elements = 1;
  LoweredModule m = lower(p.schedule, p.args, o);
  ASSERT_NE(to_string(m).find("cast(int64"), std::string::npos);
  HostTensor a = random_tensor(p.args[0], 1), b = random_tensor(p.args[1], 2);
  std::vector<double> ref = evaluate_reference(p.args[2], {{p.args[0], a}, {p.args[1], b}});
  interp::HostBuffer A = interp::HostBuffer::from_doubles(a.dtype, a.values);
  interp::HostBuffer B = interp::HostBuffer::from_doubles(b.dtype, b.values);
  interp::HostBuffer C(Float(32), ref.size());
  interp::execute(m, {&A, &B, &C});
  std::vector<double> c = C.to_doubles();
  CompareResult r = compare(ref, c.data(), c.size(), tolerance_for(Float(32), Float(16), 33));
  EXPECT_TRUE(r.ok) << r.str();
}

// An int32 index that overflows is reported with the expression and the thread, before it
// could wrap to a wrong (here: in-bounds) element.
TEST(WideIndex, ExecutorReportsIndexOverflow) {
  using namespace tessel::interp_test;
  Buffer in = flat("in", Int(32), 4), out = flat("out", Int(32), 4);
  IterVar tx = thread_axis("threadIdx.x");
  LoweredFunc f;
  f.name = "overflow";
  f.args = {in, out};
  f.arg_shapes = {{4}, {4}};
  f.launch = launch(1, 1, 4, 1);
  // t * 2^30 * 4 + t would wrap to t: the in-bounds element, read silently.
  Expr index = Expr(tx.var()) * (1 << 30) * 4 + tx.var();
  f.body = bind(tx, 4, st(out, tx.var(), ld(in, index)));
  interp::HostBuffer I = interp::HostBuffer::from_doubles(Int(32), {1, 2, 3, 4});
  interp::HostBuffer O(Int(32), 4);
  test::expect_error([&] { interp::execute(f, {&I, &O}); },
                     {"index arithmetic overflows int32", "thread (2,0,0)"});
}

// A loop counter stays 32-bit: fusing two axes past 2^31 iterations is refused, naming the loop.
TEST(WideIndex, LoopsPast32BitsAreRefused) {
  Tensor a = placeholder({70000, 70000}, Float(16), "a");
  Tensor b = compute({70000, 70000}, [&](Var i, Var j) { return a(i, j) + 1.0f; }, "b");
  Schedule s = create_schedule({b});
  auto [i, j] = s[b].axes<2>();
  s[b].fuse(i, j);
  test::expect_error([&] { lower(s, {a, b}); },
                     {"stage 'b'", "fusing", "4900000000", "more than a 32-bit loop counter holds"});
}
