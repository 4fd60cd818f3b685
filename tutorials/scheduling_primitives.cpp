// The scheduling primitives one by one: each example schedules a small computation with one
// primitive (or one idea) and prints the lowered IR. docs/SCHEDULING.md shows each example's
// code and the IR it prints; a test checks every IR excerpt of that document against this
// program's output with FileCheck, so the document stays true.
//
//   ./build/tutorials/scheduling_primitives            # every example
//   ./build/tutorials/scheduling_primitives split      # one example
//   ./build/tutorials/scheduling_primitives --list
#include "compiler/tessel.h"

#include <functional>
#include <iostream>
#include <map>
#include <string>

using namespace tessel;

namespace {

// B[i] = A[i] * 2 over 10 elements, and 2-D / reduction variants.
struct Vec {
  Tensor A = placeholder({10}, Float(32), "A");
  Tensor B = compute({10}, [this](Var i) { return A(i) * 2.0f; }, "B");
};
struct Mat {
  Tensor A = placeholder({8, 6}, Float(32), "A");
  Tensor B = compute({8, 6}, [this](Var i, Var j) { return A(i, j) + 1.0f; }, "B", {"i", "j"});
};
struct RowSum {
  Tensor A = placeholder({4, 64}, Float(32), "A");
  IterVar k = reduce_axis({0, 64}, "k");
  Tensor B = compute({4}, [this](Var i) { return sum(A(i, k), {k}); }, "B");
};

std::string lowered(const Schedule &s, const std::vector<Tensor> &args) {
  return to_string(lower(s, args));
}

const std::map<std::string, std::function<std::string()>> &examples() {
  static const std::map<std::string, std::function<std::string()>> table = {
      {"split", [] {
         auto [A, B] = Vec();
         Schedule s = create_schedule({B});
         auto [io, ii] = s[B].split(s[B].op_axis(0), 4); // 10 = 3 x 4, the last guarded
         (void)io, (void)ii;
         return lowered(s, {A, B});
       }},
      {"tile_reorder", [] {
         auto [A, B] = Mat();
         Schedule s = create_schedule({B});
         auto [i, j] = s[B].axes<2>();
         auto [io, jo, ii, ji] = s[B].tile(i, j, 4, 3);
         s[B].reorder({jo, io, ji, ii});
         return lowered(s, {A, B});
       }},
      {"fuse", [] {
         auto [A, B] = Mat();
         Schedule s = create_schedule({B});
         auto [i, j] = s[B].axes<2>();
         s[B].fuse(i, j); // one loop of 48
         return lowered(s, {A, B});
       }},
      {"bind", [] {
         auto [A, B] = Mat();
         Schedule s = create_schedule({B});
         auto [i, j] = s[B].axes<2>();
         s[B].bind(i, thread_axis("blockIdx.x"));
         s[B].bind(j, thread_axis("threadIdx.x"));
         return lowered(s, {A, B});
       }},
      {"compute_inline", [] {
         Tensor A = placeholder({8}, Float(32), "A");
         Tensor T = compute({8}, [&](Var i) { return A(i) * A(i); }, "T");
         Tensor B = compute({8}, [&](Var i) { return T(i) + 1.0f; }, "B");
         Schedule s = create_schedule({B});
         s[T].compute_inline();
         return lowered(s, {A, B});
       }},
      {"compute_at_local", [] {
         Tensor A = placeholder({8, 6}, Float(32), "A");
         Tensor T = compute({8, 6}, [&](Var i, Var j) { return A(i, j) * 3.0f; }, "T");
         Tensor B = compute({8, 6}, [&](Var i, Var j) { return T(i, j) - 1.0f; }, "B");
         Schedule s = create_schedule({B});
         auto [i, j] = s[B].axes<2>();
         s[B].bind(i, thread_axis("blockIdx.x"));
         s[T].compute_at(s[B], i); // a row of T per block, in registers
         s[T].set_scope("local");
         (void)j;
         return lowered(s, {A, B});
       }},
      {"cache_read_shared", [] {
         auto [A, B] = Mat();
         Schedule s = create_schedule({B});
         Tensor AS = s.cache_read(A, "shared", {B});
         auto [i, j] = s[B].axes<2>();
         auto [io, ii] = s[B].split(i, 4);
         s[B].bind(io, thread_axis("blockIdx.x"));
         s[B].bind(ii, thread_axis("threadIdx.y"));
         s[B].bind(j, thread_axis("threadIdx.x"));
         s[AS].compute_at(s[B], io); // the block's 4 rows, copied by its threads together
         auto [ai, aj] = s[AS].axes<2>();
         s[AS].bind(ai, thread_axis("threadIdx.y"));
         s[AS].bind(aj, thread_axis("threadIdx.x"));
         return lowered(s, {A, B});
       }},
      {"cache_write_local", [] {
         auto [A, k, B] = RowSum();
         Schedule s = create_schedule({B});
         Tensor BL = s.cache_write(B, "local"); // accumulate in a register
         s[B].bind(s[B].op_axis(0), thread_axis("threadIdx.x"));
         s[BL].compute_at(s[B], s[B].op_axis(0));
         return lowered(s, {A, B});
       }},
      {"vectorize_unroll", [] {
         Tensor A = placeholder({4, 8}, Float(16), "A");
         Tensor B = compute({4, 8}, [&](Var i, Var j) { return A(i, j); }, "B", {"i", "j"});
         Schedule s = create_schedule({B});
         auto [i, j] = s[B].axes<2>();
         s[B].unroll(i);
         s[B].vectorize(j); // 8 halves: one 16-byte access
         return lowered(s, {A, B});
       }},
      {"reduce_across_threads", [] {
         auto [A, k, B] = RowSum();
         Schedule s = create_schedule({B});
         auto [ko, ki] = s[B].split(k, 32);
         s[B].bind(s[B].op_axis(0), thread_axis("blockIdx.x"));
         s[B].bind(ki, thread_axis("threadIdx.x")); // a reduction across 32 threads
         (void)ko;
         return lowered(s, {A, B});
       }},
      {"rfactor", [] {
         auto [A, k, B] = RowSum();
         Schedule s = create_schedule({B});
         auto [ko, ki] = s[B].split(k, 32);
         Tensor BF = s.rfactor(B, ki); // B.rf[ki, i] = sum over ko
         IterVar tx = s[B].reduce_axis()[0];
         s[B].bind(s[B].op_axis(0), thread_axis("blockIdx.x"));
         s[B].bind(tx, thread_axis("threadIdx.x"));
         s[BF].compute_at(s[B], tx);
         s[BF].set_scope("local");
         (void)ko;
         return lowered(s, {A, B});
       }},
      {"thread_extents", [] {
         // B's rows use 2 x 8 threads, the copy of A into shared memory 4 x 8: the block has
         // 4 x 8 threads and B's statement is guarded to its 2 rows of threads.
         Tensor A = placeholder({4, 8}, Float(32), "A");
         Tensor B = compute({2, 8}, [&](Var i, Var j) { return A(i, j) + A(i + 2, j); }, "B");
         Schedule s = create_schedule({B});
         Tensor AS = s.cache_read(A, "shared", {B});
         auto [i, j] = s[B].axes<2>();
         s[B].bind(i, thread_axis("threadIdx.y"));
         s[B].bind(j, thread_axis("threadIdx.x"));
         auto [ai, aj] = s[AS].axes<2>();
         s[AS].bind(ai, thread_axis("threadIdx.y"));
         s[AS].bind(aj, thread_axis("threadIdx.x"));
         return lowered(s, {A, B});
       }},
      // Refusals: each prints the tessel::Error.
      {"refuse_compute_at_outside", [] {
         Tensor A = placeholder({8, 6}, Float(32), "A");
         Tensor T = compute({8, 6}, [&](Var i, Var j) { return A(i, j) * 3.0f; }, "T");
         Tensor B = compute({8, 6}, [&](Var i, Var j) { return T(i, j) - 1.0f; }, "B");
         Schedule s = create_schedule({B});
         Tensor BL = s.cache_write(B, "local");
         auto [i, j] = s[B].axes<2>();
         s[BL].compute_at(s[B], i);
         s[T].compute_at(s[B], j); // T's reader BL is computed at i, outside j
         s[T].set_scope("local");
         return lowered(s, {A, B});
       }},
      {"refuse_reduce_on_y", [] {
         auto [A, k, B] = RowSum();
         Schedule s = create_schedule({B});
         s[B].bind(k, thread_axis("threadIdx.y"));
         return lowered(s, {A, B});
       }},
      {"refuse_shared_in_two_kernels", [] {
         Tensor A = placeholder({8}, Float(32), "A");
         Tensor T = compute({8}, [&](Var i) { return A(i) * 2.0f; }, "T");
         Tensor U = compute({8}, [&](Var i) { return T(i) + 1.0f; }, "U");
         Tensor B = compute({8}, [&](Var i) { return T(i) * U(i); }, "B");
         Schedule s = create_schedule({B});
         s[T].set_scope("shared"); // U (a global workspace: its own kernel) and B both read T
         return lowered(s, {A, B});
       }},
      {"refuse_vectorize_long", [] {
         Tensor A = placeholder({100}, Float(32), "A");
         Tensor B = compute({100}, [&](Var i) { return A(i); }, "B");
         Schedule s = create_schedule({B});
         s[B].vectorize(s[B].op_axis(0));
         return lowered(s, {A, B});
       }},
  };
  return table;
}

} // namespace

int main(int argc, char **argv) {
  const auto &table = examples();
  std::vector<std::string> names;
  if (argc > 1 && std::string(argv[1]) == "--list") {
    for (const auto &[name, f] : table)
      std::cout << name << "\n";
    return 0;
  }
  for (int a = 1; a < argc; ++a)
    names.push_back(argv[a]);
  if (names.empty())
    for (const auto &[name, f] : table)
      names.push_back(name);
  for (const std::string &name : names) {
    auto it = table.find(name);
    if (it == table.end()) {
      std::cerr << "no example '" << name << "'; --list shows them\n";
      return 2;
    }
    std::cout << "// ---- " << name << " ----\n";
    try {
      std::cout << it->second();
    } catch (const Error &e) {
      std::cout << "tessel::Error: " << e.what() << "\n";
    }
  }
  return 0;
}
