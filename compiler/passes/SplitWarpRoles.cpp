#include "compiler/passes/SplitWarpRoles.h"

#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/ir/Intrinsics.h"
#include "compiler/passes/IntrinsicStmt.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <functional>

namespace tessel {

namespace {

constexpr int kWarpgroup = 128;
// Named barriers: the one that replaces the consumers' syncthreads (ping-pong: one per consumer
// warpgroup, kConsumerBarrier + its index), and ping-pong's turns (warpgroup g waits on
// kTurnBarrier + g for the other to have issued its main loop).
constexpr int kConsumerBarrier = 1;
constexpr int kTurnBarrier = 3;

using passes_detail::contains;
using passes_detail::intrinsic_stmt;
using passes_detail::is_intrinsic_stmt;

bool has_attr(const Stmt &s, const char *key) {
  return contains(s, [&](const IRNode *n) {
    const auto *a = llvm::dyn_cast<AttrStmt>(n);
    return a && a->key == key;
  });
}

bool has_call(const Stmt &s, const char *name) {
  return contains(s, [&](const IRNode *n) {
    const auto *c = llvm::dyn_cast<Call>(n);
    return c && c->is_intrinsic(name);
  });
}

// The name of the stage a warp_roles attr was put around (its buffer, or its storage var).
std::string stage_name(const AttrStmt *op) {
  if (const auto *b = std::get_if<Buffer>(&op->node))
    return (*b).name();
  if (const auto *e = std::get_if<Expr>(&op->node))
    if (const auto *v = e->as<Variable>())
      return v->name;
  return "?";
}

// The statements of `s` in order, through nested lists and warp_roles attrs (dropped), and
// through the consumers' thread bindings inside the work (each statement under its own copy).
void flatten(const Stmt &s, std::vector<Stmt> &out) {
  if (const auto *a = s.as<AttrStmt>(); a && a->key == attr::warp_roles)
    return flatten(a->body, out);
  if (const auto *a = s.as<AttrStmt>(); a && thread_index_bound_by(s)) {
    std::vector<Stmt> inner;
    flatten(a->body, inner);
    for (const Stmt &x : inner)
      out.push_back(AttrStmt::make(a->node, a->key, a->value, x));
    return;
  }
  if (const auto *q = s.as<Seq>()) {
    for (const Stmt &x : q->stmts)
      flatten(x, out);
    return;
  }
  out.push_back(s);
}

// The producer's part of `s`: the bodies of its warp_producer attrs, inside the loops, lets,
// conditions and attributes around them (which give them their variables), and nothing else.
Stmt producer_part(const Stmt &s) {
  if (!s.defined() || !has_attr(s, attr::warp_producer))
    return Stmt();
  if (const auto *a = s.as<AttrStmt>()) {
    if (a->key == attr::warp_producer)
      return a->body;
    Stmt body = producer_part(a->body);
    return a->key == attr::warp_roles ? body : AttrStmt::make(a->node, a->key, a->value, body);
  }
  if (const auto *q = s.as<Seq>()) {
    std::vector<Stmt> parts;
    for (const Stmt &x : q->stmts)
      if (Stmt p = producer_part(x); p.defined())
        parts.push_back(p);
    return Seq::make(std::move(parts));
  }
  if (const auto *f = s.as<For>())
    return For::make(f->loop_var, f->min, f->extent, f->for_kind, producer_part(f->body),
                     f->thread_tag);
  if (const auto *l = s.as<LetStmt>())
    return LetStmt::make(l->var, l->value, producer_part(l->body));
  if (const auto *i = s.as<IfThenElse>()) {
    Stmt then_case = producer_part(i->then_case), else_case = producer_part(i->else_case);
    if (!then_case.defined())
      return IfThenElse::make(!i->condition, else_case);
    return IfThenElse::make(i->condition, then_case, else_case);
  }
  if (const auto *a = s.as<Allocate>()) {
    // Kept only where the fills use it (they copy into shared buffers allocated further out).
    Stmt body = producer_part(a->body);
    const Variable *buf = a->buffer_var.get();
    bool used = contains(body, [&](const IRNode *n) { return n == buf; });
    return used ? Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope, body) : body;
  }
  internal_error << "split_warp_roles: a warp_producer attr under " << s;
}

// The consumers' part: `s` without its warp_producer (and warp_roles) attrs, syncthreads turned
// into named barrier `id` of `threads` consumer threads (0: left as they are).
class ConsumerPart : public IRMutator {
public:
  explicit ConsumerPart(int threads, Expr id = Expr(kConsumerBarrier))
      : threads_(threads), id_(std::move(id)) {}

protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key == attr::warp_producer)
      return Evaluate::make(Expr(0));
    if (op->key == attr::warp_roles)
      return mutate(op->body);
    return IRMutator::visit(op);
  }
  Stmt visit(const Evaluate *op) override {
    if (threads_ && is_intrinsic_stmt(Stmt(op), intrinsic::syncthreads))
      return intrinsic_stmt(intrinsic::named_barrier_sync, {id_, Expr(threads_)});
    return IRMutator::visit(op);
  }

private:
  int threads_;
  Expr id_;
};

// `s` with its bindings of threadIdx.y given `extent` (the consumers' own, once the producer's
// warpgroup is added: all bindings of an axis in a kernel have one extent).
Stmt with_y_extent(const Stmt &s, int extent) {
  class Relaunch : public IRMutator {
  public:
    explicit Relaunch(int extent) : extent_(extent) {}
    Stmt visit(const AttrStmt *op) override {
      const IterVar *iv = thread_index_bound_by(Stmt(op));
      if (!iv || iv->thread_tag() != "threadIdx.y")
        return IRMutator::visit(op);
      return AttrStmt::make(op->node, op->key, Expr(extent_), mutate(op->body));
    }

  private:
    int extent_;
  };
  return Relaunch(extent).mutate(s);
}

// `stmts` with the runs of consecutive statements under one binding (flatten's copies) put
// back under one.
std::vector<Stmt> regroup(const std::vector<Stmt> &stmts) {
  std::vector<Stmt> out;
  for (size_t k = 0; k < stmts.size();) {
    const auto *a = stmts[k].as<AttrStmt>();
    const IterVar *iv = a ? thread_index_bound_by(stmts[k]) : nullptr;
    size_t end = k + 1;
    while (iv && end < stmts.size()) {
      const IterVar *next = thread_index_bound_by(stmts[end]);
      if (!next || next->var().get() != iv->var().get())
        break;
      ++end;
    }
    if (end == k + 1) {
      out.push_back(stmts[k]);
      ++k;
      continue;
    }
    std::vector<Stmt> bodies;
    for (size_t j = k; j < end; ++j)
      bodies.push_back(stmts[j].as<AttrStmt>()->body);
    out.push_back(AttrStmt::make(a->node, a->key, a->value, Seq::make(regroup(bodies))));
    k = end;
  }
  return out;
}

// `s` inside the consumers' thread bindings flatten put around it.
Stmt unbound(Stmt s) {
  while (const auto *a = s.as<AttrStmt>()) {
    if (!thread_index_bound_by(s))
      break;
    s = a->body;
  }
  return s;
}

// `s` with f applied inside those bindings.
Stmt rebound(const Stmt &s, const std::function<Stmt(const Stmt &)> &f) {
  const auto *a = s.as<AttrStmt>();
  if (!a || !thread_index_bound_by(s))
    return f(s);
  return AttrStmt::make(a->node, a->key, a->value, rebound(a->body, f));
}

bool waits_on_ring(const Stmt &s) { return has_call(s, intrinsic::mbarrier_wait); }

// `s` with `before` and `after` around its main loop: the statements that wait on the ring's
// full barriers, found through the lets, conditions, allocations and attributes around them.
Stmt around_main_loop(const Stmt &s, const Stmt &before, const Stmt &after) {
  if (const auto *l = s.as<LetStmt>())
    return LetStmt::make(l->var, l->value, around_main_loop(l->body, before, after));
  if (const auto *a = s.as<AttrStmt>())
    return AttrStmt::make(a->node, a->key, a->value, around_main_loop(a->body, before, after));
  if (const auto *a = s.as<Allocate>())
    return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope,
                          around_main_loop(a->body, before, after));
  if (const auto *i = s.as<IfThenElse>(); i && !i->else_case.defined())
    return IfThenElse::make(i->condition, around_main_loop(i->then_case, before, after));
  if (const auto *q = s.as<Seq>()) {
    std::vector<size_t> waits;
    for (size_t k = 0; k < q->stmts.size(); ++k)
      if (waits_on_ring(q->stmts[k]))
        waits.push_back(k);
    internal_check(!waits.empty()) << "split_warp_roles: no main loop in " << s;
    std::vector<Stmt> stmts(q->stmts.begin(), q->stmts.end());
    if (waits.size() == 1 && !stmts[waits[0]].as<For>()) {
      stmts[waits[0]] = around_main_loop(stmts[waits[0]], before, after);
    } else {
      stmts.insert(stmts.begin() + waits.back() + 1, after);
      stmts.insert(stmts.begin() + waits.front(), before);
    }
    return Seq::make(std::move(stmts));
  }
  internal_check(s.as<For>()) << "split_warp_roles: the main loop is not a loop: " << s;
  return Seq::make({before, s, after});
}

// The consumers' tile loop (attr tile_loop around `for (it, 0, n)`) for ping-pong warpgroup
// `group` (0 or 1; the loop's body is tile `it`'s work): the warpgroup walks its own tiles
//   for (it.wg, 0, ceil(n / 2)) { let it = it.wg * 2 + group; if (it < n) {
//     ... if (1 <= it) named_barrier_sync(turn + group)        // the other issued tile it - 1
//     <main loop> if (tile it + 1 exists) named_barrier_arrive(turn + 1 - group) ... } }
// so that the main loops run in the tiles' order, each warpgroup's epilogue beside the
// other's main loop. Tile it + 1 exists where the loop's guard (the tile index within the
// tiles) holds for it + 1.
class PingPongTiles : public IRMutator {
public:
  explicit PingPongTiles(Expr group) : group_(std::move(group)) {}
  bool found = false;

protected:
  Stmt visit(const AttrStmt *op) override {
    if (op->key != attr::tile_loop)
      return IRMutator::visit(op);
    const auto *loop = op->body.as<For>();
    auto n = loop ? as_const_int(loop->extent) : std::nullopt;
    internal_check(n && is_zero(loop->min)) << "split_warp_roles: a tile loop from 0 to a "
                                               "constant expected, got " << op->body;
    found = true;
    const Var it = loop->loop_var;
    Expr next = it + 1 < make_const(it.type(), *n);
    // The guard of a tile in the last iteration: if (f(lets..., it)) under the loop's lets.
    std::vector<std::pair<Var, Expr>> lets;
    Stmt body = loop->body;
    while (const auto *l = body.as<LetStmt>()) {
      lets.push_back({l->var, l->value});
      body = l->body;
    }
    if (const auto *guard = body.as<IfThenElse>(); guard && !guard->else_case.defined()) {
      Expr cond = guard->condition;
      for (auto l = lets.rbegin(); l != lets.rend(); ++l)
        cond = substitute(cond, {{l->first.get(), l->second}});
      next = next && substitute(cond, {{it.get(), it + 1}});
    }
    const Expr threads(2 * kWarpgroup);
    Stmt wait = IfThenElse::make(
        make_const(it.type(), 1) <= it,
        intrinsic_stmt(intrinsic::named_barrier_sync, {kTurnBarrier + group_, threads}));
    Stmt arrive = IfThenElse::make(
        next,
        intrinsic_stmt(intrinsic::named_barrier_arrive, {kTurnBarrier + 1 - group_, threads}));
    Stmt work = around_main_loop(loop->body, wait, arrive);
    Var own(it->name + ".wg", it.type());
    if (*n % 2)
      work = IfThenElse::make(it < make_const(it.type(), *n), work);
    work = LetStmt::make(it, own * 2 + group_, work);
    Stmt own_loop = For::make(own, 0, int((*n + 1) / 2), loop->for_kind, work, loop->thread_tag);
    return AttrStmt::make(Expr(own), op->key, op->value, own_loop);
  }

private:
  Expr group_;
};

// Walks down the statements every thread of the block runs before its work (allocations, lets,
// attributes: the thread bindings among them) to the work, which it splits.
class Splitter {
public:
  explicit Splitter(Remarks *remarks) : remarks_(remarks) {}

  Stmt descend(const Stmt &s) {
    if (const auto *a = s.as<Allocate>())
      return Allocate::make(a->buffer_var, a->dtype, a->extents, a->scope, descend(a->body));
    if (const auto *l = s.as<LetStmt>())
      return LetStmt::make(l->var, l->value, descend(l->body));
    if (const auto *a = s.as<AttrStmt>()) {
      if (a->key == attr::warp_roles)
        return descend(a->body);
      if (const IterVar *iv = thread_index_bound_by(s))
        return thread_binding(a, *iv);
      return AttrStmt::make(a->node, a->key, a->value, descend(a->body));
    }
    return split(s);
  }

private:
  Stmt thread_binding(const AttrStmt *a, const IterVar &iv) {
    const std::string &tag = iv.thread_tag();
    auto extent = as_const_int(a->value);
    user_check(extent.has_value(), "warp_specialize")
        << "stage '" << stage_ << "': " << tag << " has extent " << a->value
        << "; warp roles need constant thread extents";
    if (tag == "threadIdx.x")
      user_check(*extent == kWarpgroup, "warp_specialize")
          << "stage '" << stage_ << "': threadIdx.x has " << *extent
          << " threads; warp roles are whole warpgroups: bind 128 threads to threadIdx.x and "
             "the warpgroups to threadIdx.y";
    if (tag == "threadIdx.z")
      user_check(*extent == 1, "warp_specialize")
          << "stage '" << stage_ << "': threadIdx.z has " << *extent
          << " threads; the producer warpgroup is added on threadIdx.y, so bind the consumer "
             "warpgroups to threadIdx.y only (warpgroups_n = 1)";
    if (tag != "threadIdx.y")
      return AttrStmt::make(a->node, a->key, a->value, descend(a->body));
    user_check(!ping_pong || *extent == 1, "warp_specialize")
        << "stage '" << stage_ << "': threadIdx.y has " << *extent
        << " warpgroups; ping-pong consumers are two warpgroups that each compute a whole tile: "
           "compute the stage with one warpgroup (nothing bound to threadIdx.y)";
    role_var_ = iv.var();
    consumer_groups_ = int(*extent);
    Stmt body = descend(a->body);
    // One warpgroup more, the producer, where the work was split.
    return AttrStmt::make(a->node, a->key, split_ ? Expr(consumer_groups_ + 1) : a->value, body);
  }

  Stmt split(const Stmt &work) {
    std::vector<Stmt> stmts;
    flatten(work, stmts);
    auto first_fill = std::find_if(stmts.begin(), stmts.end(), [](const Stmt &x) {
      return has_attr(x, attr::warp_producer);
    });
    if (first_fill == stmts.end()) {
      // No ring to run ahead on: its loop had one step (a note, as pipeline's), or there is
      // no bulk copy pipelined in the stage's loops at all (missed).
      if (remarks_) {
        std::string what = "warp_specialize of '" + stage_ + "' not applied: ";
        if (has_call(work, intrinsic::tma_load) || has_call(work, intrinsic::tma_load_im2col))
          remarks_->note("split_warp_roles",
                         what + "its TMA copies are filled once (a loop of one step), so "
                                "there is nothing for a producer to run ahead of");
        else
          remarks_->missed("split_warp_roles",
                           what + "no TMA ring (bulk_copy + pipeline of a shared stage "
                                  "computed at one of its loops) is filled in its loops");
      }
      return ConsumerPart(0).mutate(work); // drops the warp_roles attrs; no syncthreads change
    }
    check_inner_bindings(work);
    // The ring's barriers are initialized by the last statement with mbarrier_init before the
    // loop, and published by the next syncthreads: all threads run those, then the roles part.
    auto init = std::find_if(std::make_reverse_iterator(first_fill), stmts.rend(),
                             [](const Stmt &x) { return has_call(x, intrinsic::mbarrier_init); });
    user_check(init != stmts.rend() && !has_call(*first_fill, intrinsic::mbarrier_init),
               "warp_specialize")
        << "stage '" << stage_ << "': the TMA ring's loop runs more than once per block (it is "
           "inside another loop of the block's work); warp roles split a ring that the block "
           "fills and drains once: compute the stage at the block's tile (or, to walk several "
           "tiles per block, make the output stage persistent: Stage::persistent)";
    auto init_at = std::prev(init.base());
    auto sync = std::find_if(init_at, first_fill, [](const Stmt &x) {
      return is_intrinsic_stmt(unbound(x), intrinsic::syncthreads);
    });
    internal_check(sync != first_fill) << "split_warp_roles: no syncthreads after the ring's "
                                          "mbarrier_init";
    std::vector<Stmt> shared(init_at, sync + 1), roles(stmts.begin(), init_at);
    roles.insert(roles.end(), sync + 1, stmts.end());
    Stmt work_of_roles = Seq::make(regroup(roles));

    split_ = true;
    // One warpgroup (nothing on threadIdx.y): threadIdx.y is bound here, with the producer.
    // Ping-pong makes two consumer warpgroups of the stage's one.
    const bool new_axis = !role_var_.defined();
    if (new_axis)
      consumer_groups_ = inner_groups_ ? inner_groups_ : 1;
    if (ping_pong)
      consumer_groups_ = 2;
    if (new_axis) {
      iv_ = inner_groups_ ? inner_y_ : thread_axis(Range(0, consumer_groups_ + 1), "threadIdx.y");
      role_var_ = iv_.var();
    }
    if (remarks_)
      remarks_->applied("split_warp_roles",
                        "warp_specialize of '" + stage_ + "': a producer warpgroup issues the "
                        "TMA ring's copies, " + std::to_string(consumer_groups_) +
                        (ping_pong ? " ping-pong consumer warpgroups take the tiles in turn"
                                   : " consumer warpgroup(s) compute"));
    // The ring's barriers are initialized by the block's first thread. Where one warpgroup was
    // bound, its condition names threadIdx.x alone, which the producer's first thread matches
    // too: the first consumer warpgroup's only.
    shared.front() = rebound(shared.front(), [&](const Stmt &x) {
      const auto *init_if = x.as<IfThenElse>();
      internal_check(init_if && !init_if->else_case.defined())
          << "split_warp_roles: the ring's mbarrier_init is not under a leader's condition";
      if (uses_var(init_if->condition, role_var_))
        return x;
      return IfThenElse::make(role_var_ == 0 && init_if->condition, init_if->then_case);
    });
    // The rest of the setup (inject_pipeline's zeroing of a clipped fill's ring, written for
    // the warpgroup that was) is the first warpgroup's too, not repeated by the new ones.
    for (size_t k = 1; k + 1 < shared.size(); ++k)
      if (!uses_var(shared[k], role_var_) &&
          contains(shared[k], [](const IRNode *n) { return llvm::isa<BufferStore>(n); }))
        shared[k] = rebound(shared[k],
                            [&](const Stmt &x) { return IfThenElse::make(role_var_ == 0, x); });
    auto [producer_regs, consumer_regs] = warp_role_registers(consumer_groups_);
    Stmt producer = Seq::make(
        {intrinsic_stmt(intrinsic::setmaxnreg, {Expr(producer_regs), Expr(0)}),
         IfThenElse::make(thread_x_ == make_zero(Int(32)), producer_part(work_of_roles))});
    Stmt consumer_work =
        ping_pong ? ConsumerPart(kWarpgroup, kConsumerBarrier + Expr(role_var_)).mutate(work_of_roles)
                  : ConsumerPart(consumer_groups_ * kWarpgroup).mutate(work_of_roles);
    if (ping_pong) {
      PingPongTiles turns{Expr(role_var_)};
      consumer_work = turns.mutate(consumer_work);
      if (!turns.found) {
        // One tile per block (a persistent grid with as many blocks as tiles, whose tile loop
        // of one iteration is gone, or no tile loop at all): the first warpgroup computes it.
        consumer_work = IfThenElse::make(role_var_ == 0, consumer_work);
        if (remarks_)
          remarks_->missed("split_warp_roles",
                           "ping-pong consumers of '" + stage_ + "': a block computes one "
                           "tile, so its second consumer warpgroup idles (ping-pong pays where "
                           "blocks walk several tiles: Stage::persistent with fewer blocks "
                           "than tiles)");
      }
    }
    Stmt consumer = Seq::make({intrinsic_stmt(intrinsic::setmaxnreg, {Expr(consumer_regs), Expr(1)}),
                               consumer_work});
    Stmt roles_branch = AttrStmt::make(
        AttrNode(), attr::warp_specialize, Expr(kWarpgroup),
        IfThenElse::make(role_var_ == consumer_groups_, producer, consumer));
    shared = regroup(shared);
    shared.push_back(roles_branch);
    Stmt result = Seq::make(std::move(shared));
    if (inner_y_.defined())
      result = with_y_extent(result, consumer_groups_ + 1);
    if (new_axis)
      result = AttrStmt::make(iv_, attr::thread_extent, Expr(consumer_groups_ + 1), result);
    return result;
  }

  // Threads bound inside the block's work are the consumers' own (a copy split over the
  // warpgroups' threads, the warpgroups bound at a split of the work): threadIdx.x of one
  // warpgroup and threadIdx.y of the consumer warpgroups, which the consumers run as they are;
  // the producer's part has none. Where nothing binds threadIdx.y around the work, the
  // consumers are the warpgroups bound inside (inner_groups_).
  void check_inner_bindings(const Stmt &work) {
    post_order_visit(work, [&](const IRNode *n) {
      const auto *a = llvm::dyn_cast<AttrStmt>(n);
      const IterVar *iv = a ? thread_index_bound_by(Stmt(a)) : nullptr;
      if (!iv)
        return;
      const std::string &tag = iv->thread_tag();
      auto extent = as_const_int(a->value);
      const int around = role_var_.defined() ? consumer_groups_ : inner_groups_;
      user_check(extent && (tag == "threadIdx.x" ||
                            (tag == "threadIdx.y" && (!around || *extent == around))),
                 "warp_specialize")
          << "stage '" << stage_ << "': " << tag << " is bound inside the block's work with "
          << a->value << " threads; warp roles take the consumers' own threads there (threadIdx.x, "
          << "threadIdx.y over the consumer warpgroups" << (around ? ", " : "")
          << (around ? std::to_string(around) : std::string()) << "): bind the others around it";
      user_check(!ping_pong || tag != "threadIdx.y", "warp_specialize")
          << "stage '" << stage_ << "': threadIdx.y is bound inside the block's work; ping-pong "
             "consumers are two warpgroups that each compute a whole tile: compute the stage "
             "with one warpgroup (nothing bound to threadIdx.y)";
      if (tag == "threadIdx.y") {
        inner_y_ = *iv;
        if (!role_var_.defined())
          inner_groups_ = int(*extent);
      }
    });
  }

public:
  Expr thread_x_;            ///< threadIdx.x, as the kernel binds it
  std::string stage_ = "?"; ///< the stage that asked for warp_specialize
  bool ping_pong = false;   ///< its consumers are ConsumerRoles::ping_pong

private:
  Remarks *remarks_;
  Var role_var_;
  IterVar iv_;
  int consumer_groups_ = 0;
  int inner_groups_ = 0; ///< the consumer warpgroups bound inside the work (threadIdx.y)
  IterVar inner_y_;      ///< a binding of threadIdx.y inside the work (the roles' test's axis
                         ///< where none is around it)
  bool split_ = false; ///< the work was split into roles
};

} // namespace

std::pair<int, int> warp_role_registers(int consumer_warpgroups) {
  // setmaxnreg moves registers within the block's pool (SASS: USETMAXREG ... CTAPOOL): what
  // the block got at launch, its threads times the registers ptxas gave each, the most that
  // __launch_bounds__ allows (64K over the threads, in multiples of 8, at most 255). The
  // producer keeps 40; the consumers share the rest in multiples of 8, at most 248 (a thread
  // addresses 255; one consumer warpgroup keeps its launch count, 248). Asking for
  // more than the pool holds waits forever: 4 consumer warpgroups (640 threads, 96 registers
  // each at launch) asking for 112 hung on the H100.
  constexpr int kProducer = 40;
  const int groups = std::max(1, consumer_warpgroups);
  const int threads = kWarpgroup * (groups + 1);
  const int at_launch = std::min(255, 65536 / threads) / 8 * 8;
  const int consumer = (at_launch * threads - kWarpgroup * kProducer) / (kWarpgroup * groups) / 8 * 8;
  return {kProducer, std::min(248, consumer)};
}

Stmt split_warp_roles(Stmt s, Remarks *remarks) {
  if (!has_attr(s, attr::warp_roles) && !has_attr(s, attr::warp_producer))
    return s;
  // The root's statements are the module's kernels (split_host_device): each on its own.
  if (const auto *q = s.as<Seq>()) {
    std::vector<Stmt> kernels;
    for (const Stmt &x : q->stmts)
      kernels.push_back(split_warp_roles(x, remarks));
    return Seq::make(std::move(kernels));
  }
  Splitter splitter(remarks);
  post_order_visit(s, [&](const IRNode *n) {
    const auto *a = llvm::dyn_cast<AttrStmt>(n);
    const IterVar *iv = a ? std::get_if<IterVar>(&a->node) : nullptr;
    if (a && a->key == attr::warp_roles) {
      splitter.stage_ = stage_name(a);
      splitter.ping_pong = is_one(a->value);
    }
    // The producer's one issuing thread is its threadIdx.x 0.
    if (a && a->key == attr::thread_extent && iv && iv->thread_tag() == "threadIdx.x")
      splitter.thread_x_ = iv->var();
  });
  user_check(splitter.thread_x_.defined(), "warp_specialize")
      << "stage '" << splitter.stage_ << "' is warp-specialized, but its kernel binds no "
      << "threadIdx.x; bind a warpgroup (128 threads) to it";
  return splitter.descend(s);
}

} // namespace tessel
