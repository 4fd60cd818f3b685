// Remarks: lowering says what became of each vectorize, unroll and pipeline request, and warns
// about the ones it could not apply (compiler/support/Remarks.h).
#include "compiler/passes/UnrollLoops.h"
#include "compiler/tessel.h"
#include "schedules/Gemm.h"
#include "schedules/GemmWgmma.h"

#include <gtest/gtest.h>
#include <llvm/Support/raw_ostream.h>

#include <string>

using namespace tessel;

namespace {

bool has(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

// The remarks of `kind` whose message contains `part`.
std::vector<Remark> remarks_with(const LoweredModule &m, Remark::Kind kind,
                                 const std::string &part) {
  std::vector<Remark> out;
  for (const Remark &r : m.remarks)
    if (r.kind == kind && has(r.message, part))
      out.push_back(r);
  return out;
}

std::string all(const LoweredModule &m) {
  std::string s;
  for (const Remark &r : m.remarks)
    s += r.str() + "\n";
  return s;
}

// T = A transposed, through a shared tile whose rows are padded to 33 floats (no bank
// conflicts on the column reads): the copy into it is vectorized, but T's vectorized loop reads
// the tile down a column, 33 floats apart.
struct Transpose {
  Tensor A = placeholder({64, 64}, Float(32), "A");
  Tensor T = compute({64, 64}, [this](Var i, Var j) { return A(j, i); }, "T", {"i", "j"});
  Schedule s = create_schedule({T});

  Transpose() {
    Tensor AS = s.cache_read(A, "shared", {T});
    auto [i, j] = s[T].axes<2>();
    auto [bi, ti] = s[T].split(i, 32);
    auto [bj, tj] = s[T].split(j, 32);
    s[T].reorder({bi, bj, ti, tj});
    auto [tjo, tji] = s[T].split(tj, 8);
    s[T].bind(bi, thread_axis("blockIdx.y")).bind(bj, thread_axis("blockIdx.x"));
    s[T].bind(ti, thread_axis("threadIdx.y")).bind(tjo, thread_axis("threadIdx.x"));
    s[T].vectorize(tji);
    s[AS].compute_at(s[T], bj);
    auto [ai, aj] = s[AS].axes<2>();
    s[AS].storage_align(ai, 32, 1);
    auto [ajo, aji] = s[AS].split(aj, 8);
    s[AS].bind(ai, thread_axis("threadIdx.y")).bind(ajo, thread_axis("threadIdx.x"));
    s[AS].vectorize(aji);
  }
};

} // namespace

TEST(Remarks, StridedReadKeepsTheLoopAndSaysWhy) {
  Transpose t;
  ::testing::internal::CaptureStderr();
  LoweredModule m = lower(t.s, {t.A, t.T});
  std::string warnings = ::testing::internal::GetCapturedStderr();

  const std::string why = "vectorize of axis 'j.inner.inner' of stage 'T' (8 lanes) not "
                          "applied: the read of 'A.shared' has stride 33 along it; it runs as a "
                          "serial loop. To vectorize, make that access contiguous along it";
  auto missed = remarks_with(m, Remark::Kind::Missed, "vectorize of axis");
  ASSERT_EQ(missed.size(), 1u) << all(m);
  EXPECT_EQ(missed[0].step, "vectorize_loops");
  EXPECT_TRUE(has(missed[0].message, why)) << missed[0].message;
  EXPECT_TRUE(has(missed[0].message, "or drop vectorize")) << missed[0].message;
  // The warning, once; the loop is still there.
  EXPECT_TRUE(has(warnings, "tessel: warning: " + why)) << warnings;
  EXPECT_EQ(warnings.find("tessel: warning:"), warnings.rfind("tessel: warning:")) << warnings;
  EXPECT_TRUE(has(to_string(m), "for (j.inner.inner: int32, 0, 8)")) << to_string(m);
}

TEST(Remarks, AppliedVectorizeIsListedNotWarned) {
  Transpose t;
  LoweredModule m = lower(t.s, {t.A, t.T});
  auto applied = remarks_with(m, Remark::Kind::Applied, "vectorize of axis");
  ASSERT_EQ(applied.size(), 1u) << all(m);
  EXPECT_EQ(applied[0].str(), "remark: vectorize_loops: vectorize of axis 'ax1.inner' of stage "
                              "'A.shared' (8 lanes): applied");
}

TEST(Remarks, PrintRemarksListsEveryDecisionInsteadOfWarning) {
  Transpose t;
  std::string printed;
  llvm::raw_string_ostream os(printed);
  LowerOptions options;
  options.print_remarks = true;
  options.print_stream = &os;
  ::testing::internal::CaptureStderr();
  LoweredModule m = lower(t.s, {t.A, t.T}, options);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(os.str(), "// ---- remarks ----\n" + all(m));
  EXPECT_TRUE(has(printed, "remark: vectorize_loops: missed: vectorize of axis 'j.inner.inner'"))
      << printed;
  EXPECT_TRUE(has(printed, "remark: vectorize_loops: vectorize of axis 'ax1.inner'")) << printed;
}

// gemm_shared's double-buffered tiles: 4-byte copies of float32 become cp.async, 2-byte copies
// of float16 cannot, and the pipeline then hides little: a warning that says so.
TEST(Remarks, PipelineWithoutCpAsyncSaysWhy) {
  ScheduledProgram f32 = gemm_shared(128, 128, 64, Float(32));
  LoweredModule m32 = lower(f32.schedule, f32.args);
  EXPECT_EQ(remarks_with(m32, Remark::Kind::Missed, "").size(), 0u) << all(m32);
  EXPECT_EQ(remarks_with(m32, Remark::Kind::Applied, "pipeline(2) of 'A.shared' over 'k.outer' "
                                                     "(2 stages): applied, filled by cp.async")
                .size(),
            1u)
      << all(m32);

  ScheduledProgram f16 = gemm_shared(128, 128, 64, Float(16));
  LoweredModule m16 = lower(f16.schedule, f16.args);
  for (const char *buffer : {"A.shared", "B.shared"})
    EXPECT_EQ(remarks_with(m16, Remark::Kind::Missed,
                           std::string("pipeline(2) of '") + buffer +
                               "' over 'k.outer' (2 stages): applied, but its fill waits for "
                               "its loads before the compute runs: it is not cp.async, because "
                               "the copy into '" + buffer + "' moves 2 bytes per thread")
                  .size(),
              1u)
        << all(m16);
}

// A K loop of one step is removed before inject_pipeline: nothing to pipeline, a note only.
TEST(Remarks, PipelineOfALoopThatRunsOnceIsANote) {
  GemmWgmmaTiles tiles{.block_m = 64, .block_n = 128, .block_k = 64, .warpgroups_m = 1,
                       .stages = 2};
  ScheduledProgram p = gemm_wgmma(64, 128, 64, tiles);
  ::testing::internal::CaptureStderr();
  LoweredModule m = lower(p.schedule, p.args);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(remarks_with(m, Remark::Kind::Note, "pipeline(2) of 'A.shared' not applied: its fill "
                                                "is in no loop")
                .size(),
            1u)
      << all(m);
}

// unroll() of a loop whose extent is not a constant (a hand-built one: schedules give every
// loop a constant extent) keeps the loop, and says so.
TEST(Remarks, UnrollOfAVariableExtentSaysWhy) {
  Buffer C = Buffer::make("C", Float(32), {64});
  Var i("i"), n("n");
  Stmt loop = For::make(i, 0, n, ForKind::Unrolled, BufferStore::make(C, 1.0f, {i}));
  Remarks remarks;
  Stmt out = unroll_loops(loop, 0, &remarks);
  EXPECT_TRUE(out.as<For>()) << out;
  ASSERT_EQ(remarks.list().size(), 1u);
  EXPECT_EQ(remarks.list()[0].str(),
            "remark: unroll_loops: missed: unroll of axis 'i' of stage 'C' not applied: its "
            "extent (n) is not a constant; it stays a loop (#pragma unroll leaves it to nvcc). "
            "To unroll it, split it by a constant factor and unroll the inner loop");

  Remarks constant;
  unroll_loops(For::make(i, 0, 4, ForKind::Unrolled, BufferStore::make(C, 1.0f, {i})), 0,
               &constant);
  ASSERT_EQ(constant.list().size(), 1u);
  EXPECT_EQ(constant.list()[0].str(),
            "remark: unroll_loops: unroll of axis 'i' of stage 'C' (4 copies): applied");
}
