// Test helpers for the lowering passes: a tiny single-thread interpreter for Form 1 and Form 2
// statement IR, and structural queries on printed or walked IR.
//
// The interpreter runs loops of every kind serially, and a thread_extent / virtual_thread attr
// as a serial loop over its variable, so it only gives GPU semantics for code without cross-
// thread communication. Memory is keyed by a buffer's data var, so Form 1 and Form 2 of the
// same function read and write the same arrays. Fresh allocations hold NaN, so reading storage
// that was never written shows up in the results.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Intrinsics.h"

#include <gtest/gtest.h>
#include <llvm/ADT/DenseMap.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::testing {

using Vec = std::vector<double>;

class Interp {
public:
  /// Storage of a buffer's data var; created with `size` elements on first use.
  std::vector<double> &memory(const Buffer &b, size_t size = 0) {
    auto &m = mem_[b->data.get()];
    if (m.size() < size)
      m.resize(size, 0.0);
    return m;
  }
  std::vector<double> &memory(const Expr &data) { return mem_[data.get()]; }

  void run(const Stmt &s) {
    if (!s.defined())
      return;
    if (const auto *op = s.as<LetStmt>()) {
      env_[op->var.get()] = eval(op->value);
      run(op->body);
    } else if (const auto *op = s.as<AttrStmt>()) {
      const IterVar *iv = std::get_if<IterVar>(&op->node);
      if (iv && (op->key == attr::thread_extent || op->key == attr::virtual_thread))
        loop(iv->var().get(), 0, scalar(op->value), op->body);
      else
        run(op->body);
    } else if (const auto *op = s.as<AssertStmt>()) {
      if (scalar(op->condition) == 0)
        throw std::runtime_error("assertion failed: " + op->message);
      run(op->body);
    } else if (const auto *op = s.as<For>()) {
      int64_t min = scalar(op->min);
      loop(op->loop_var.get(), min, min + scalar(op->extent), op->body);
    } else if (const auto *op = s.as<Allocate>()) {
      int64_t size = 1;
      for (const Expr &e : op->extents)
        size *= scalar(e);
      std::vector<double> saved = std::move(mem_[op->buffer_var.get()]);
      mem_[op->buffer_var.get()] = std::vector<double>(size, std::nan(""));
      run(op->body);
      mem_[op->buffer_var.get()] = std::move(saved);
    } else if (const auto *op = s.as<BufferRealize>()) {
      Layout l;
      int64_t size = 1;
      for (size_t d = op->bounds.size(); d-- > 0;) {
        l.mins.insert(l.mins.begin(), scalar(op->bounds[d].min));
        l.strides.insert(l.strides.begin(), size);
        size *= scalar(op->bounds[d].extent);
      }
      realized_[op->buffer.get()] = l;
      const Expr &data = op->buffer->data;
      std::vector<double> saved = std::move(mem_[data.get()]);
      mem_[data.get()] = std::vector<double>(size, std::nan(""));
      run(op->body);
      mem_[data.get()] = std::move(saved);
      realized_.erase(op->buffer.get());
    } else if (const auto *op = s.as<BufferStore>()) {
      Vec v = eval(op->value);
      std::vector<int64_t> at = addresses(op->buffer, op->indices);
      auto &m = mem_[op->buffer->data.get()];
      for (size_t k = 0; k < at.size(); ++k) {
        check_in_bounds(op->buffer, at[k], m.size());
        m[at[k]] = v.size() == 1 ? v[0] : v[k];
      }
    } else if (const auto *op = s.as<IfThenElse>()) {
      if (scalar(op->condition))
        run(op->then_case);
      else
        run(op->else_case);
    } else if (const auto *op = s.as<Seq>()) {
      for (const Stmt &st : op->stmts)
        run(st);
    } else if (const auto *op = s.as<Evaluate>()) {
      const auto *call = op->value.as<Call>();
      if (call && (call->name == intrinsic::syncthreads ||
                   call->name == intrinsic::cp_async_commit ||
                   call->name == intrinsic::cp_async_wait))
        return;
      // Serially, an asynchronous copy might as well complete at once.
      if (call && call->name == intrinsic::cp_async) {
        auto element = [](const Expr &ptr) { return ptr.as<Call>()->args[0].as<BufferLoad>(); };
        const BufferLoad *dst = element(call->args[0]), *src = element(call->args[1]);
        int64_t n = *as_const_int(call->args[2]) / dst->buffer.dtype().bytes();
        int64_t d = addresses(dst->buffer, dst->indices)[0];
        int64_t from = addresses(src->buffer, src->indices)[0];
        bool copy = scalar(call->args[3]) != 0;
        auto &dm = mem_[dst->buffer->data.get()];
        auto &sm = mem_[src->buffer->data.get()];
        for (int64_t k = 0; k < n; ++k) {
          check_in_bounds(dst->buffer, d + k, dm.size());
          if (copy)
            check_in_bounds(src->buffer, from + k, sm.size());
          dm[d + k] = copy ? sm[from + k] : 0.0;
        }
        return;
      }
      if (is_const(op->value))
        return;
      throw std::runtime_error("interpreter: cannot run " + to_string(s));
    } else {
      throw std::runtime_error("interpreter: unexpected statement " + to_string(s));
    }
  }

  /// The value of `e` (one entry per lane); float32 results are rounded to float32.
  Vec eval(const Expr &e) {
    Vec v = eval_exact(e);
    if (e.type().is_float() && e.type().bits() == 32)
      for (double &x : v)
        x = double(float(x));
    return v;
  }

  int64_t scalar(const Expr &e) {
    Vec v = eval(e);
    if (v.size() != 1)
      throw std::runtime_error("interpreter: expected a scalar: " + to_string(e));
    return int64_t(v[0]);
  }

private:
  Vec eval_exact(const Expr &e) {
    if (const auto *op = e.as<IntImm>())
      return {double(op->value)};
    if (const auto *op = e.as<FloatImm>())
      return {op->value};
    if (const auto *op = e.as<Variable>()) {
      auto it = env_.find(op);
      if (it == env_.end())
        throw std::runtime_error("interpreter: unbound variable " + op->name);
      return it->second;
    }
    bool is_int = e.type().is_integer_like();
#define BIN(N, F)                                                                                  \
  if (const auto *op = e.as<N>())                                                                  \
    return zip(eval(op->a), eval(op->b), [&](double x, double y) -> double { return F; });
    BIN(Add, x + y)
    BIN(Sub, x - y)
    BIN(Mul, x * y)
    BIN(Div, is_int ? std::trunc(x / y) : x / y)
    BIN(Mod, std::fmod(x, y))
    BIN(FloorDiv, std::floor(x / y))
    BIN(FloorMod, x - std::floor(x / y) * y)
    BIN(Min, std::min(x, y))
    BIN(Max, std::max(x, y))
    BIN(EQ, x == y)
    BIN(NE, x != y)
    BIN(LT, x < y)
    BIN(LE, x <= y)
    BIN(GT, x > y)
    BIN(GE, x >= y)
    BIN(And, x != 0 && y != 0)
    BIN(Or, x != 0 || y != 0)
#undef BIN
    if (const auto *op = e.as<Not>()) {
      Vec v = eval(op->a);
      for (double &x : v)
        x = x == 0;
      return v;
    }
    if (const auto *op = e.as<Select>()) {
      Vec c = eval(op->condition), t = eval(op->true_value), f = eval(op->false_value);
      Vec r(t.size());
      for (size_t k = 0; k < t.size(); ++k)
        r[k] = (c.size() == 1 ? c[0] : c[k]) ? t[k] : f[k];
      return r;
    }
    if (const auto *op = e.as<Cast>()) {
      Vec v = eval(op->value);
      for (double &x : v)
        x = is_int ? std::trunc(x) : x;
      return v;
    }
    if (const auto *op = e.as<Let>()) {
      env_[op->var.get()] = eval(op->value);
      return eval(op->body);
    }
    if (const auto *op = e.as<Call>()) {
      if (op->name == intrinsic::if_then_else)
        return scalar(op->args[0]) ? eval(op->args[1]) : eval(op->args[2]);
      throw std::runtime_error("interpreter: cannot evaluate " + to_string(e));
    }
    if (const auto *op = e.as<BufferLoad>()) {
      std::vector<int64_t> at = addresses(op->buffer, op->indices);
      auto &m = mem_[op->buffer->data.get()];
      Vec r;
      for (int64_t a : at) {
        check_in_bounds(op->buffer, a, m.size());
        r.push_back(m[a]);
      }
      return r;
    }
    if (const auto *op = e.as<Ramp>()) {
      double base = scalar(op->base), stride = scalar(op->stride);
      Vec r;
      for (int k = 0; k < op->lanes; ++k)
        r.push_back(base + k * stride);
      return r;
    }
    if (const auto *op = e.as<Broadcast>())
      return Vec(op->lanes, eval(op->value).at(0));
    throw std::runtime_error("interpreter: unexpected expression " + to_string(e));
  }

  struct Layout {
    std::vector<int64_t> mins, strides;
  };

  void loop(const Variable *v, int64_t begin, int64_t end, const Stmt &body) {
    for (int64_t i = begin; i < end; ++i) {
      env_[v] = {double(i)};
      run(body);
    }
  }

  template <typename F> static Vec zip(const Vec &a, const Vec &b, F f) {
    size_t n = std::max(a.size(), b.size());
    Vec r(n);
    for (size_t k = 0; k < n; ++k)
      r[k] = f(a.size() == 1 ? a[0] : a[k], b.size() == 1 ? b[0] : b[k]);
    return r;
  }

  // The element addresses (one per lane) of an access, in Form 1 (a realized region or an
  // argument's row-major layout) or Form 2 (one flat index).
  std::vector<int64_t> addresses(const Buffer &b, const std::vector<Expr> &indices) {
    Layout l;
    auto it = realized_.find(b.get());
    if (it != realized_.end()) {
      l = it->second;
    } else {
      for (const Expr &s : b.effective_strides()) {
        l.mins.push_back(0);
        l.strides.push_back(scalar(s));
      }
    }
    if (indices.size() == 1 && l.strides.size() != 1) // flat access of a multi-dim buffer
      l = Layout{{0}, {1}};
    size_t lanes = 1;
    std::vector<Vec> idx;
    for (const Expr &i : indices) {
      idx.push_back(eval(i));
      lanes = std::max(lanes, idx.back().size());
    }
    std::vector<int64_t> out(lanes, 0);
    for (size_t k = 0; k < lanes; ++k)
      for (size_t d = 0; d < idx.size(); ++d)
        out[k] += (int64_t(idx[d].size() == 1 ? idx[d][0] : idx[d][k]) - l.mins[d]) *
                  l.strides[d];
    return out;
  }

  static void check_in_bounds(const Buffer &b, int64_t a, size_t size) {
    if (a < 0 || size_t(a) >= size)
      throw std::runtime_error("interpreter: access " + std::to_string(a) + " out of bounds of " +
                               b.name() + " (" + std::to_string(size) + " elements)");
  }

  llvm::DenseMap<const void *, std::vector<double>> mem_;
  llvm::DenseMap<const Variable *, Vec> env_;
  llvm::DenseMap<const BufferNode *, Layout> realized_;
};

/// How many times `needle` occurs in `hay`.
inline int count_of(const std::string &hay, const std::string &needle) {
  int n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1))
    ++n;
  return n;
}

/// The nodes of type T in `s`, in post order.
template <typename T> std::vector<const T *> find_all(const Stmt &s) {
  std::vector<const T *> out;
  post_order_visit(s, [&](const IRNode *n) {
    if (const auto *t = llvm::dyn_cast<T>(n))
      out.push_back(t);
  });
  return out;
}

inline bool is_sync(const Stmt &s) {
  const auto *e = s.as<Evaluate>();
  const auto *c = e ? e->value.as<Call>() : nullptr;
  return c && c->name == intrinsic::syncthreads;
}

inline Stmt sync_stmt() {
  return Evaluate::make(Call::make(Void(), intrinsic::syncthreads, {}, Call::Intrinsic));
}

/// Fills `m` with 0, 1, 2, ... (exact in float32 for the sizes the tests use).
inline void iota(std::vector<double> &m, double scale = 1) {
  for (size_t i = 0; i < m.size(); ++i)
    m[i] = double(i) * scale;
}

} // namespace tessel::testing
