// The one printer of IR. Its output is what users read (lower() results, error messages) and
// what golden tests match, so it is stable: same IR, same text.
//
// The format follows TVM's lowered IR: `for (i: int32, 0, 16) {`, `attr [...] "thread_extent"
// = 32;`, `allocate(A.shared, float16, [12288]), storage_scope = shared;`, with the difference
// that arithmetic is printed with the fewest parentheses that keep its structure. Distinct
// variables that share a name are printed as name, name_1, name_2, ...
#pragma once

#include "compiler/ir/IR.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/StringSet.h>

#include <ostream>
#include <string>

namespace llvm {
class raw_ostream;
}

namespace tessel {

class IRPrinter {
public:
  explicit IRPrinter(llvm::raw_ostream &os, int indent = 0) : os_(os), indent_(indent) {}

  void print(const Expr &e);
  void print(const Stmt &s);
  void print(const Range &r);
  void print(const IterVar &iv);

  /// The printed name of a variable or buffer, unique within this printer.
  std::string name_of(const Variable *v);
  std::string name_of(const BufferNode *b);

private:
  void print_expr(const Expr &e, int parent_prec, bool is_right);
  void print_stmt(const Stmt &s);
  void print_body(const Stmt &s);
  void print_args(const std::vector<Expr> &args);
  void print_attr_node(const AttrNode &n);
  void print_binary(const char *op, int prec, const Expr &a, const Expr &b, int parent_prec,
                    bool is_right);
  void print_call_like(const char *name, const Expr &a, const Expr &b);
  void do_indent();
  std::string unique_name(const void *key, const std::string &base);

  llvm::raw_ostream &os_;
  int indent_;
  llvm::DenseMap<const void *, std::string> names_;
  llvm::StringSet<> used_names_;
};

std::string to_string(const Expr &e);
std::string to_string(const Stmt &s);

std::ostream &operator<<(std::ostream &os, const Expr &e);
std::ostream &operator<<(std::ostream &os, const Stmt &s);
std::ostream &operator<<(std::ostream &os, const Range &r);
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const Expr &e);
llvm::raw_ostream &operator<<(llvm::raw_ostream &os, const Stmt &s);

} // namespace tessel
