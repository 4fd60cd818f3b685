// inject_pipeline: prologue + steady state on an N-times grown buffer, cp.async for copies from
// global to shared memory, or no change when unsafe.
#include "compiler/ir/IRPrinter.h"
#include "compiler/passes/InjectPipeline.h"
#include "compiler/passes/StorageFlatten.h"
#include "passes_test_util.h"

#include <gtest/gtest.h>

using namespace tessel;
using namespace tessel::testing;

namespace {

struct KLoop {
  Buffer A = Buffer::make("A", Float(32), {64});
  Buffer C = Buffer::make("C", Float(32), {16});
  Buffer AS = Buffer::make("A.shared", Float(32), {16}, "shared");
  Var ko{"ko"}, t{"t"};

  Stmt fill(Expr src_tile) {
    return For::make(t, 0, 16, ForKind::Serial,
                     BufferStore::make(AS, A.load({src_tile * 16 + t}), {t}));
  }
  Stmt compute() {
    return For::make(t, 0, 16, ForKind::Serial,
                     BufferStore::make(C, C.load({t}) + AS.load({t}) * 2.0f, {t}));
  }
  Stmt marked(Stmt s) { return AttrStmt::make(AS->data, attr::pipeline_scope, 2, s); }

  // Form 2, the allocation outside the loop: for ko { fill(ko); compute }.
  Stmt program(int min = 0) {
    Stmt body = Seq::make({marked(fill(ko)), compute()});
    return Allocate::make(Var(AS->data.as<Variable>()), Float(32), {16}, "shared",
                          For::make(ko, min, 4, ForKind::Serial, body));
  }

  std::vector<double> run(const Stmt &s) {
    Interp in;
    iota(in.memory(A, 64), 0.5);
    in.memory(C, 16);
    in.run(s);
    return in.memory(C);
  }
};

} // namespace

TEST(PassInjectPipeline, PrologueAndSteadyStateOnDoubledBuffer) {
  KLoop k;
  Stmt s = k.program();
  Stmt out = inject_pipeline(s);
  std::string text = to_string(out);
  EXPECT_EQ(text, "allocate(A.shared, float32, [32]), storage_scope = shared;\n"
                  "for (t: int32, 0, 16) {\n"
                  "  @cp_async(@address_of(A.shared[floormod(0, 2) * 16 + t]), "
                  "@address_of(A[0 * 16 + t]), 4, true)\n"
                  "}\n"
                  "@cp_async_commit()\n"
                  "for (ko: int32, 0, 4) {\n"
                  "  @cp_async_wait(0)\n"
                  "  @syncthreads()\n"
                  "  if (ko + 1 < 4) {\n"
                  "    attr [A.shared] \"pipeline_fill\" = 0;\n"
                  "    for (t: int32, 0, 16) {\n"
                  "      @cp_async(@address_of(A.shared[floormod(ko + 1, 2) * 16 + t]), "
                  "@address_of(A[(ko + 1) * 16 + t]), 4, true)\n"
                  "    }\n"
                  "  }\n"
                  "  @cp_async_commit()\n"
                  "  for (t: int32, 0, 16) {\n"
                  "    C[t] = C[t] + A.shared[floormod(ko, 2) * 16 + t] * 2f32\n"
                  "  }\n"
                  "}\n");
  EXPECT_EQ(k.run(out), k.run(s));
  // Only the fill's marker for insert_thread_syncs is left.
  EXPECT_EQ(find_all<AttrStmt>(out).size(), 1u);
}

TEST(PassInjectPipeline, LoopWithNonZeroMin) {
  KLoop k;
  Stmt s = k.program(2);
  // Reads A tiles 2..5: A has 128 elements here.
  Stmt out = inject_pipeline(s);
  std::string text = to_string(out);
  EXPECT_NE(text.find("if (ko + 1 < 6)"), std::string::npos) << text;
  EXPECT_NE(text.find("A.shared[floormod(ko + 1 - 2, 2) * 16 + t]"), std::string::npos) << text;
  EXPECT_NE(text.find("A.shared[floormod(ko - 2, 2) * 16 + t]"), std::string::npos) << text;
  Interp a, b;
  for (Interp *in : {&a, &b}) {
    iota(in->memory(k.A, 128));
    in->memory(k.C, 16);
  }
  a.run(s);
  b.run(out);
  EXPECT_EQ(a.memory(k.C), b.memory(k.C));
}

// The usual case from ScheduleOps: the shared tile is realized inside the K loop (its attach
// point), so the allocation must move out of the loop to survive across iterations.
TEST(PassInjectPipeline, AfterStorageFlattenAllocationMovesOutOfTheLoop) {
  Buffer A = Buffer::make("A", Float(32), {8, 16}), C = Buffer::make("C", Float(32), {16});
  Buffer AS = Buffer::make("A.shared", Float(32), {8, 16}, "shared");
  Var ko("ko"), t("t");
  Stmt fill = AttrStmt::make(
      AS, attr::pipeline_scope, 2,
      For::make(t, 0, 16, ForKind::Serial, BufferStore::make(AS, A.load({ko, t}), {ko, t})));
  Stmt compute = For::make(t, 0, 16, ForKind::Serial,
                           BufferStore::make(C, C.load({t}) + AS.load({ko, t}), {t}));
  Stmt form1 = For::make(ko, 0, 8, ForKind::Serial,
                         BufferRealize::make(AS, {Range(ko, 1), Range(0, 16)},
                                             Seq::make({fill, compute})));
  Stmt flat = storage_flatten(form1, {A, C});
  Stmt out = inject_pipeline(flat);
  std::string text = to_string(out);
  ASSERT_EQ(text.rfind("allocate(A.shared, float32, [32]), storage_scope = shared;\n", 0), 0u)
      << text;
  EXPECT_EQ(count_of(text, "allocate"), 1) << text;

  std::vector<std::vector<double>> results;
  for (const Stmt &s : {form1, flat, out}) {
    Interp in;
    iota(in.memory(A, 128), 0.5);
    in.memory(C, 16);
    in.run(s);
    results.push_back(in.memory(C));
  }
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// Cases where moving the fill one iteration ahead would change results: the buffer stays
// single, the attr goes away, and nothing else changes.
TEST(PassInjectPipeline, UnsafeCasesAreLeftSingle) {
  KLoop k;
  Var x("x");
  Stmt write_a = BufferStore::make(k.A, make_zero(Float(32)), {k.ko * 16});
  Stmt read_early =
      BufferStore::make(k.C, k.AS.load({0}), {0}); // reads the tile before this iteration's fill
  std::vector<std::pair<const char *, Stmt>> bodies = {
      {"fill reads storage the loop writes", Seq::make({k.marked(k.fill(k.ko)), write_a})},
      {"buffer read before the fill", Seq::make({read_early, k.marked(k.fill(k.ko))})},
      {"fill uses a variable bound in the loop",
       LetStmt::make(x, k.ko + 0, Seq::make({k.marked(k.fill(x)), k.compute()}))},
  };
  for (auto &[what, body] : bodies) {
    Stmt s = Allocate::make(Var(k.AS->data.as<Variable>()), Float(32), {16}, "shared",
                            For::make(k.ko, 0, 4, ForKind::Serial, body));
    Stmt out = inject_pipeline(s);
    std::string text = to_string(out);
    EXPECT_NE(text.find("[16]"), std::string::npos) << what << "\n" << text;
    EXPECT_EQ(text.find("pipeline_scope"), std::string::npos) << what << "\n" << text;
    EXPECT_EQ(text.find("floormod"), std::string::npos) << what << "\n" << text;
  }
}

// A barrier inside control flow that depends on threadIdx would hang: a loop there stays single.
TEST(PassInjectPipeline, LoopUnderThreadDependentBranchIsLeftSingle) {
  KLoop k;
  IterVar tx = thread_axis("threadIdx.x");
  Stmt loop = For::make(k.ko, 0, 4, ForKind::Serial,
                        Seq::make({k.marked(k.fill(k.ko)), k.compute()}));
  Stmt s = AttrStmt::make(tx, attr::thread_extent, 32,
                          Allocate::make(Var(k.AS->data.as<Variable>()), Float(32), {16}, "shared",
                                         IfThenElse::make(Expr(tx) < 8, loop)));
  std::string text = to_string(inject_pipeline(s));
  EXPECT_NE(text.find("[16]"), std::string::npos) << text;
  EXPECT_EQ(text.find("syncthreads"), std::string::npos) << text;
  EXPECT_EQ(text.find("cp_async"), std::string::npos) << text;
  // The same loop outside the branch is pipelined.
  Stmt uniform = AttrStmt::make(tx, attr::thread_extent, 32,
                                Allocate::make(Var(k.AS->data.as<Variable>()), Float(32), {16},
                                               "shared", loop));
  EXPECT_NE(to_string(inject_pipeline(uniform)).find("@syncthreads()"), std::string::npos);
}

// Three stages: two fills ahead, cp_async_wait(1), the stage (ko % 3); same results.
TEST(PassInjectPipeline, ThreeStagesOnAConstantLoop) {
  KLoop k;
  Stmt body = Seq::make({AttrStmt::make(k.AS->data, attr::pipeline_scope, 3, k.fill(k.ko)),
                         k.compute()});
  Stmt s = Allocate::make(Var(k.AS->data.as<Variable>()), Float(32), {16}, "shared",
                          For::make(k.ko, 0, 4, ForKind::Serial, body));
  Stmt out = inject_pipeline(s);
  std::string text = to_string(out);
  EXPECT_NE(text.find("allocate(A.shared, float32, [48])"), std::string::npos) << text;
  EXPECT_EQ(count_of(text, "@cp_async_commit()"), 3) << text;
  EXPECT_NE(text.find("@cp_async_wait(1)"), std::string::npos) << text;
  EXPECT_NE(text.find("if (ko + 2 < 4)"), std::string::npos) << text;
  EXPECT_NE(text.find("floormod(ko + 2, 3) * 16"), std::string::npos) << text;
  EXPECT_NE(text.find("floormod(ko, 3) * 16"), std::string::npos) << text;
  EXPECT_EQ(k.run(out), k.run(s));
}
