#include "compiler/lower/Tensorize.h"

#include "compiler/arith/CanonicalForm.h"
#include "compiler/arith/IndexInterval.h"
#include "compiler/arith/Simplify.h"
#include "compiler/ir/IREquality.h"
#include "compiler/ir/IRMutator.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/ir/Substitute.h"
#include "compiler/support/Error.h"

#include <algorithm>
#include <set>
#include <sstream>

namespace tessel {

std::vector<int64_t> aligned_strides(const std::vector<int64_t> &extents,
                                     const std::vector<std::array<int64_t, 3>> &aligns) {
  std::vector<int64_t> strides(extents.size());
  int64_t stride = 1;
  for (size_t d = extents.size(); d-- > 0;) {
    for (const auto &[dim, factor, offset] : aligns)
      if (dim == int64_t(d))
        stride += ((factor + offset - stride % factor) % factor + factor) % factor;
    strides[d] = stride;
    stride *= extents[d];
  }
  return strides;
}

std::vector<int64_t> interleaved_strides(const std::string &stage,
                                         const std::vector<int64_t> &extents, int64_t chunk,
                                         int64_t *chunk_stride) {
  user_check(!extents.empty() && extents.back() % chunk == 0, "storage_interleave")
      << "stage '" << stage << "' is stored in chunks of " << chunk
      << " elements of its last dimension, but that dimension's realized extent is "
      << (extents.empty() ? 0 : extents.back())
      << "; make the tile's last extent a multiple of " << chunk;
  std::vector<int64_t> strides(extents.size());
  int64_t stride = chunk;
  strides.back() = 1;
  for (size_t d = extents.size() - 1; d-- > 0;) {
    strides[d] = stride;
    stride *= extents[d];
  }
  *chunk_stride = stride;
  return strides;
}

namespace {

struct RegionDim {
  Expr min;
  int64_t extent;
};

std::string extents_text(const std::vector<IterVar> &ivs, const DomainMap &dom) {
  std::string s;
  for (const IterVar &iv : ivs)
    s += (s.empty() ? "" : ", ") + iv.name() + "=" + std::to_string(const_extent(dom, iv));
  return s;
}

// An index in the form both sides of a match are compared in: a canonical sum, simplified first
// where it is not affine (an intrinsic's permuted columns, `floordiv(0 + j, 32)` at a region's
// start, wgmma_fp8_a_column).
Expr normal_index(const Expr &i) {
  bool affine = true;
  post_order_visit(i, [&](const IRNode *n) {
    affine = affine && !llvm::isa<FloorDiv>(n) && !llvm::isa<FloorMod>(n);
  });
  return arith::canonical_sum(affine ? i : arith::simplify(i));
}

// Replaces the stage's input loads by loads of the intrinsic's placeholders at indices relative
// to the region each input is read in, so the two expressions can be compared.
class LoadNormalizer : public IRMutator {
public:
  LoadNormalizer(const VarIntervals &env, const std::vector<Tensor> &placeholders,
                 const std::string &context)
      : env_(env), placeholders_(placeholders), context_(context) {}
  using IRMutator::mutate;

  std::vector<Tensor> inputs; ///< the stage's inputs, in first-use order
  std::vector<std::vector<RegionDim>> regions;

protected:
  Expr visit(const TensorLoad *op) override {
    size_t j = 0;
    while (j < inputs.size() && inputs[j] != op->tensor)
      ++j;
    if (j == inputs.size()) {
      user_check(j < placeholders_.size(), context_)
          << "the stage reads more tensors than the intrinsic's " << placeholders_.size()
          << " inputs (extra: '" << op->tensor.name() << "')";
      inputs.push_back(op->tensor);
      regions.emplace_back();
    }
    const Tensor &p = placeholders_[j];
    user_check(p.dtype() == op->tensor.dtype(), context_)
        << "the intrinsic's input '" << p.name() << "' is " << p.dtype() << " but the stage reads '"
        << op->tensor.name() << "' of " << op->tensor.dtype();
    size_t n = op->indices.size(), k = p.ndim();
    user_check(n >= k, context_) << "'" << op->tensor.name() << "' has " << n
                                 << " dimensions, fewer than the intrinsic's input '" << p.name()
                                 << "' (" << k << ")";
    std::vector<RegionDim> region;
    std::vector<Expr> rel;
    for (size_t d = 0; d < n; ++d) {
      auto iv = eval_interval(op->indices[d], env_);
      user_check(iv.has_value(), context_)
          << "cannot bound index " << op->indices[d] << " of '" << op->tensor.name() << "'";
      region.push_back({iv->min_expr(), iv->extent()});
      if (d < n - k) {
        user_check(iv->extent() == 1, context_)
            << "'" << op->tensor.name() << "' is read over " << iv->extent()
            << " elements in dimension " << d << ", which the intrinsic's input '" << p.name()
            << "' does not cover";
        continue;
      }
      rel.push_back(normal_index(op->indices[d] - iv->min_expr()));
    }
    if (regions[j].empty())
      regions[j] = region;
    return TensorLoad::make(p, rel);
  }

private:
  const VarIntervals &env_;
  const std::vector<Tensor> &placeholders_;
  std::string context_;
};

// The intrinsic's own expression with the same index normalization.
class IndexCanonicalizer : public IRMutator {
public:
  using IRMutator::mutate;

protected:
  Expr visit(const TensorLoad *op) override {
    std::vector<Expr> idx;
    for (const Expr &i : op->indices)
      idx.push_back(normal_index(i));
    return TensorLoad::make(op->tensor, idx);
  }
};

BoundBuffer bind_buffer(const Buffer &decl, const Buffer &buffer, const BufferLayout &layout,
                        const std::vector<RegionDim> &region, const std::string &context) {
  user_check(decl.scope().empty() || decl.scope() == buffer.scope(), context)
      << "the intrinsic expects buffer '" << decl.name() << "' in scope '" << decl.scope()
      << "' but '" << buffer.name() << "' is in '" << buffer.scope() << "'";
  user_check(decl.dtype() == buffer.dtype(), context)
      << "the intrinsic's buffer '" << decl.name() << "' is " << decl.dtype() << " but '"
      << buffer.name() << "' is " << buffer.dtype();
  user_check(decl->interleave == layout.interleave, context)
      << "the intrinsic's buffer '" << decl.name() << "' expects "
      << (decl->interleave ? "storage interleaved in chunks of " + std::to_string(decl->interleave)
                           : std::string("row-major storage"))
      << " but '" << buffer.name() << "' is "
      << (layout.interleave ? "interleaved in chunks of " + std::to_string(layout.interleave)
                            : std::string("row major"))
      << (decl->interleave
              ? "; call storage_interleave(" + std::to_string(decl->interleave) + ") on its stage"
              : std::string("; remove storage_interleave from its stage"));
  user_check(decl->swizzle == layout.swizzle, context)
      << "the intrinsic's buffer '" << decl.name() << "' expects "
      << (decl->swizzle ? "the " + std::to_string(decl->swizzle) + "-byte swizzled layout"
                        : std::string("a layout without swizzling"))
      << " but '" << buffer.name() << "' is "
      << (layout.swizzle ? "swizzled (" + std::to_string(layout.swizzle) + " bytes)"
                         : std::string("not swizzled"))
      << (decl->swizzle ? "; call swizzle(" + std::to_string(decl->swizzle) + ") on its stage"
                        : std::string("; remove swizzle from its stage"));
  arith::LinearForm off(Int(32));
  std::vector<Expr> mins, offsets;
  for (size_t d = 0; d < region.size(); ++d) {
    mins.push_back(region[d].min);
    arith::LinearForm rel = arith::linear_form(region[d].min);
    rel.add(arith::linear_form(layout.mins[d]), -1);
    offsets.push_back(arith::to_expr(rel));
    if (layout.interleave && d + 1 == region.size()) {
      // The region starts on a chunk boundary of the last dimension: whole chunks before it.
      // Swizzled storage: or inside a chunk, on a 16-byte unit (a pointer into the unswizzled
      // row, which is how wgmma's descriptors address the k slices of a 128-byte row).
      Expr col = arith::to_expr(rel);
      auto chunks = divide_exact(col, layout.interleave);
      int64_t unit = layout.swizzle ? 16 / buffer.dtype().bytes() : layout.interleave;
      user_check(chunks.has_value() || (layout.swizzle && divide_exact(col, unit)), context)
          << "the region of '" << buffer.name() << "' starts at column " << offsets.back()
          << " of storage interleaved in chunks of " << layout.interleave << ", not on "
          << (layout.swizzle ? "a 16-byte unit" : "a chunk boundary")
          << "; split the loops so each call starts on one";
      if (chunks) {
        off.add(arith::linear_form(chunks->defined() ? *chunks : Expr(0)), layout.chunk_stride);
      } else {
        Expr c = make_const(col.type(), layout.interleave);
        off.add(arith::linear_form(floordiv(col, c)), layout.chunk_stride);
        off.add(arith::linear_form(floormod(col, c)), 1);
      }
    } else {
      off.add(rel, layout.strides[d]);
    }
  }
  Expr elem_offset = arith::to_expr(off);
  int64_t factor = decl->offset_factor;
  user_check(factor <= 1 || divide_exact(elem_offset, factor), context)
      << "the region of '" << buffer.name() << "' starts at element offset " << elem_offset
      << ", which is not a multiple of the offset_factor " << factor << " of the intrinsic's buffer '"
      << decl.name() << "'";
  int64_t align_elems = decl->data_alignment / std::max(1, decl.dtype().bytes());
  user_check(align_elems <= 1 || divide_exact(elem_offset, align_elems), context)
      << "the region of '" << buffer.name() << "' starts at element offset " << elem_offset
      << ", which is not aligned to " << decl->data_alignment << " bytes as the intrinsic's buffer '"
      << decl.name() << "' requires";
  size_t k = decl.ndim();
  std::vector<int64_t> strides(layout.strides.end() - k, layout.strides.end());
  return BoundBuffer(decl, buffer, mins, offsets, elem_offset, strides, layout.chunk_stride);
}

// Where the readers of stage `s` reduce over it: the one dimension among its last `ndim` that
// their reduction axes index (a GEMM operand's k), counted from the first of those.
struct ReaderReduction {
  int dim = -1; ///< -1: no reader reduces over exactly one of those dimensions
  std::string reader;
};

ReaderReduction reader_reduction(const StageNode *s, const StageBodies &bodies,
                                 const ScheduleNode *sch, size_t ndim) {
  ReaderReduction r;
  std::set<int> dims;
  auto it = bodies.consumers.find(s);
  if (it == bodies.consumers.end())
    return r;
  for (const StageNode *reader : it->second) {
    const auto *c = reader->op.as<ComputeOpNode>();
    if (!c || c->reduce_axis.empty())
      continue;
    auto reduces = [&](const Variable *v) {
      return std::any_of(c->reduce_axis.begin(), c->reduce_axis.end(),
                         [&](const IterVar &k) { return k.var().get() == v; });
    };
    post_order_visit(bodies.body.lookup(reader), [&](const IRNode *n) {
      const auto *load = llvm::dyn_cast<TensorLoad>(n);
      if (!load || stage_of(sch, load->tensor) != s || load->indices.size() < ndim)
        return;
      size_t first = load->indices.size() - ndim;
      for (size_t d = first; d < load->indices.size(); ++d)
        if (uses_var(load->indices[d], reduces)) {
          dims.insert(int(d - first));
          r.reader = reader->op.name();
        }
    });
  }
  if (dims.size() == 1)
    r.dim = *dims.begin();
  return r;
}

// One attempt to match the stage with one pattern of the intrinsic.
struct PatternMatch {
  const TensorIntrin *intrin = nullptr;
  std::string failure;  ///< why the pattern does not match; empty when it does
  Expr expected, found; ///< when the failure is the body's: both sides, normalized
  VarMap to_pattern;
  std::vector<Expr> limits;   ///< of the output's dimensions, for partial blocks
  std::vector<Tensor> inputs; ///< the stage's, in the order of the pattern's inputs
  std::vector<std::vector<RegionDim>> regions;
};

// Matches the loops of stage `s` from leaf `t` inward, and its body, with an intrinsic's
// patterns. Mistakes that no other layout would mend (types, the combiner) throw at once.
class StageMatcher {
public:
  StageMatcher(const StageNode *s, size_t t, const Expr &body, const DomainMap &dom,
               const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
               const ReaderReduction &reader, std::string context)
      : s_(s), t_(t), body_(body), dom_(dom), reader_(reader), context_(std::move(context)),
        leaves_(s->leaf_iter_vars), inner_(leaves_.begin() + t, leaves_.end()) {
    llvm::DenseMap<const IterVarNode *, Expr> values = leaf_value;
    for (const IterVar &iv : inner_) {
      values[iv.get()] = iv.var();
      env_[iv.var().get()] = IndexInterval::constant(0, const_extent(dom, iv) - 1);
    }
    root_value_ = pass_up_index(s, dom, values);
  }

  // The region each root axis covers while the inner loops run.
  RegionDim region_of(const IterVar &root) const {
    auto iv = eval_interval(root_value_.lookup(root.var().get()), env_);
    internal_check(iv) << "region of " << root.name();
    return RegionDim{iv->min_expr(), iv->extent()};
  }

  PatternMatch match(const TensorIntrin &intrin) const {
    PatternMatch m;
    m.intrin = &intrin;
    const auto *c = s_->op.as<ComputeOpNode>();
    const auto *pat = intrin.op.as<ComputeOpNode>();
    if (intrin.reduced_output_dim >= 0 && reader_.dim >= 0 &&
        intrin.reduced_output_dim != reader_.dim) {
      size_t first = c->axis.size() - pat->axis.size();
      m.failure = "'" + reader_.reader + "' reduces over dimension " +
                  std::to_string(first + reader_.dim) + " of '" + s_->op.name() +
                  "', but this layout holds k in dimension " +
                  std::to_string(first + intrin.reduced_output_dim);
      return m;
    }
    if (!match_region(intrin, c->axis, pat->axis, true, &m) ||
        !match_region(intrin, c->reduce_axis, pat->reduce_axis, false, &m))
      return m;
    int64_t covered = 1, region = 1;
    for (const IterVar &iv : inner_)
      covered *= const_extent(dom_, iv);
    for (const IterVar &r : c->axis)
      region *= region_of(r).extent;
    for (const IterVar &r : c->reduce_axis)
      region *= region_of(r).extent;
    if (covered != region) {
      m.failure = "the loops from '" + leaves_[t_].name() + "' inward (" +
                  extents_text(inner_, dom_) + ") do not cover the intrinsic's block exactly; " +
                  describe_mismatch(pat);
      return m;
    }

    // Compare the stage's expression with the pattern.
    VarIntervals pat_env;
    for (const auto *axes : {&pat->axis, &pat->reduce_axis})
      for (const IterVar &p : *axes)
        pat_env[p.var().get()] = IndexInterval::constant(0, *as_const_int(p->dom.extent) - 1);
    LoadNormalizer norm(pat_env, intrin.inputs, context_);
    const Reduce *sr = body_.as<Reduce>();
    const Reduce *pr = pat->body.as<Reduce>();
    user_check(bool(sr) == bool(pr), context_)
        << (pr ? "the intrinsic is a reduction but the stage is not"
               : "the stage is a reduction but the intrinsic is not");
    m.found = norm.mutate(substitute(sr ? sr->source : body_, m.to_pattern));
    m.inputs = norm.inputs;
    m.regions = norm.regions;
    m.expected = IndexCanonicalizer().mutate(pr ? pr->source : pat->body);
    user_check(!sr || sr->combiner == pr->combiner, context_)
        << "the intrinsic reduces with " << Reduce::name(pr->combiner) << " but the stage with "
        << Reduce::name(sr->combiner);
    if (!structural_equal(m.found, m.expected)) {
      std::ostringstream why;
      why << "the stage's body does not match the intrinsic's pattern.\n  expected (intrinsic): "
          << m.expected << "\n  found (stage):        " << m.found;
      m.failure = why.str();
      return m;
    }
    user_check(!sr || is_one(sr->condition), context_)
        << "a reduction with a 'where' condition cannot be tensorized";
    user_check(norm.inputs.size() == intrin.inputs.size(), context_)
        << "the stage reads " << norm.inputs.size() << " tensors, the intrinsic "
        << intrin.inputs.size();
    return m;
  }

private:
  // Matches the region of `roots` with the pattern's axes `prs`, trailing dimensions first.
  bool match_region(const TensorIntrin &intrin, const std::vector<IterVar> &roots,
                    const std::vector<IterVar> &prs, bool output, PatternMatch *m) const {
    const auto *pat = intrin.op.as<ComputeOpNode>();
    if (roots.size() < prs.size()) {
      m->failure = describe_mismatch(pat);
      return false;
    }
    size_t lead = roots.size() - prs.size();
    for (size_t d = 0; d < roots.size(); ++d) {
      RegionDim r = region_of(roots[d]);
      if (d < lead) {
        if (r.extent != 1) {
          m->failure = describe_mismatch(pat);
          return false;
        }
        m->to_pattern[roots[d].var().get()] = r.min;
        continue;
      }
      const IterVar &p = prs[d - lead];
      if (r.extent != *as_const_int(p->dom.extent)) {
        m->failure = describe_mismatch(pat);
        return false;
      }
      m->to_pattern[roots[d].var().get()] = r.min + p.var();
      // The intrinsic needs the whole block in range: no guards inside it. A split of the root
      // that shifts its tail inwards by a multiple of the block keeps every block whole.
      int64_t dom_extent = const_extent(dom_, roots[d]);
      // The factor of a split of the root by whole intrinsic blocks with this tail; 0: none.
      auto split_by_blocks = [&](TailStrategy tail) -> int64_t {
        for (const auto &rel : s_->relations) {
          const auto *sp = std::get_if<SplitRelation>(&rel);
          if (sp && sp->parent.same_as(roots[d]) && sp->tail == tail && sp->factor &&
              *sp->factor % r.extent == 0)
            return *sp->factor;
        }
        return 0;
      };
      bool shifted = split_by_blocks(TailStrategy::ShiftInwards) != 0;
      // An intrinsic that stores part of its block takes an output axis whose split guards its
      // tail, by blocks of whole intrinsic blocks: the last one stores what is inside (its
      // intrinsic blocks past the range, of a block larger than the range, store nothing).
      int64_t guarded_by =
          output && intrin.partial_output ? split_by_blocks(TailStrategy::GuardWithIf) : 0;
      bool guarded = guarded_by != 0;
      if (!shifted && !guarded && dom_extent % r.extent != 0) {
        m->failure = "axis '" + roots[d].name() + "' has extent " + std::to_string(dom_extent) +
                     ", not a multiple of the intrinsic's " + std::to_string(r.extent) +
                     "; choose a shape (or a padding) that divides";
        return false;
      }
      if (output)
        m->limits.push_back(
            guarded && dom_extent % guarded_by != 0
                ? arith::simplify(dom_.lookup(roots[d].get()).min + Expr(int(dom_extent)) - r.min)
                : Expr());
    }
    return true;
  }

  std::string describe_mismatch(const ComputeOpNode *pat) const {
    std::ostringstream m;
    m << "the intrinsic computes a ";
    std::vector<IterVar> pax = pat->axis;
    pax.insert(pax.end(), pat->reduce_axis.begin(), pat->reduce_axis.end());
    for (size_t i = 0; i < pax.size(); ++i)
      m << (i ? "x" : "") << *as_const_int(pax[i]->dom.extent);
    m << " block (";
    for (size_t i = 0; i < pax.size(); ++i)
      m << (i ? ", " : "") << pax[i].name();
    m << ") but the loops from '" << leaves_[t_].name() << "' inward have extents "
      << extents_text(inner_, dom_) << ".";
    // Suggest the first loop from which the extents would multiply up to the intrinsic's block.
    int64_t want = 1;
    for (const IterVar &iv : pax)
      want *= *as_const_int(iv->dom.extent);
    for (size_t i = t_; i < leaves_.size(); ++i) {
      int64_t have = 1;
      for (size_t j = i; j < leaves_.size(); ++j)
        have *= const_extent(dom_, leaves_[j]);
      if (have == want && i != t_) {
        m << " Tensorize at '" << leaves_[i].name()
          << "' (the first of the intrinsic's axes), or split the loops above it out.";
        return m.str();
      }
    }
    // Otherwise, if the innermost loops are multiples of the intrinsic's axes, say which to
    // split (a 32x16x16 nest for a 16x16x16 intrinsic: split the 32 by 16).
    if (inner_.size() < pax.size())
      return m.str();
    std::string splits;
    size_t first = inner_.size() - pax.size();
    for (size_t a = 0; a < pax.size(); ++a) {
      int64_t have = const_extent(dom_, inner_[first + a]), p = *as_const_int(pax[a]->dom.extent);
      if (have % p != 0)
        return m.str();
      if (have != p)
        splits += std::string(splits.empty() ? "" : ", ") + "split '" + inner_[first + a].name() +
                  "' by " + std::to_string(p);
    }
    if (!splits.empty())
      m << " To match, " << splits << " and tensorize at the first of the inner loops.";
    return m.str();
  }

  const StageNode *s_;
  size_t t_;
  Expr body_;
  const DomainMap &dom_;
  const ReaderReduction &reader_;
  std::string context_;
  const std::vector<IterVar> &leaves_;
  std::vector<IterVar> inner_;
  VarIntervals env_;
  VarMap root_value_;
};

// The distinct loads of `input` in `e`, as text.
std::vector<std::string> loads_of(const Expr &e, const Tensor &input) {
  std::vector<std::string> texts;
  post_order_visit(e, [&](const IRNode *n) {
    const auto *load = llvm::dyn_cast<TensorLoad>(n);
    if (!load || load->tensor != input)
      return;
    std::ostringstream text;
    text << Expr(load);
    if (std::find(texts.begin(), texts.end(), text.str()) == texts.end())
      texts.push_back(text.str());
  });
  return texts;
}

// Why no pattern of a many-layout intrinsic matches: for each operand read in an order none
// takes, the orders tried; then every pattern, and what failed before the body was compared.
std::string refusal(const std::vector<PatternMatch> &tries) {
  if (tries.size() == 1)
    return tries[0].failure;
  std::vector<const PatternMatch *> bodies;
  for (const PatternMatch &m : tries)
    if (m.expected.defined())
      bodies.push_back(&m);
  std::ostringstream out;
  if (bodies.empty()) {
    bool same = std::all_of(tries.begin(), tries.end(),
                            [&](const PatternMatch &m) { return m.failure == tries[0].failure; });
    if (same)
      return tries[0].failure;
    out << "no layout of the intrinsic matches the stage:";
    for (const PatternMatch &m : tries)
      out << "\n  " << m.intrin->layout << ": " << m.failure;
    return out.str();
  }
  out << "the stage's body matches none of the intrinsic's operand layouts.";
  const PatternMatch &first = *bodies[0];
  for (size_t p = 0; p < first.intrin->inputs.size(); ++p) {
    std::vector<std::string> found = loads_of(first.found, first.intrin->inputs[p]);
    std::vector<std::string> expected, described;
    for (const PatternMatch *m : bodies)
      for (const std::string &e : loads_of(m->expected, m->intrin->inputs[p])) {
        std::string d = e + " (" + m->intrin->input_layouts[p] + ")";
        if (std::find(described.begin(), described.end(), d) == described.end())
          described.push_back(d), expected.push_back(e);
      }
    bool taken = std::all_of(found.begin(), found.end(), [&](const std::string &f) {
      return std::find(expected.begin(), expected.end(), f) != expected.end();
    });
    if (taken || found.empty())
      continue;
    out << "\n  " << first.intrin->inputs[p].name();
    if (p < first.inputs.size())
      out << " ('" << first.inputs[p].name() << "')";
    out << ": expected ";
    for (size_t i = 0; i < described.size(); ++i)
      out << (i ? " or " : "") << described[i];
    out << ", found ";
    for (size_t i = 0; i < found.size(); ++i)
      out << (i ? " and " : "") << found[i];
  }
  for (size_t i = 0; i < bodies.size(); ++i)
    out << (i ? "\n                    or: " : "\n  expected (intrinsic): ") << bodies[i]->expected
        << " (" << bodies[i]->intrin->layout << ")";
  out << "\n  found (stage):        " << first.found;
  for (const PatternMatch &m : tries)
    if (!m.expected.defined())
      out << "\n  (" << m.intrin->layout << ": " << m.failure << ")";
  return out.str();
}

} // namespace

TensorIntrinBodies tensorize_stage(const StageNode *s, size_t t, const StageBodies &bodies,
                                   const DomainMap &dom,
                                   const llvm::DenseMap<const IterVarNode *, Expr> &leaf_value,
                                   const llvm::DenseMap<const StageNode *, std::vector<Buffer>>
                                       &buffers,
                                   const BufferLayouts &layouts, const ScheduleNode *sch) {
  const auto *c = s->op.as<ComputeOpNode>();
  const std::vector<IterVar> &leaves = s->leaf_iter_vars;
  const TensorIntrin &intrin = *s->find_attr(leaves[t])->tensorize;
  std::string context = "tensorize of stage '" + s->op.name() + "' at axis '" + leaves[t].name() +
                        "' with intrinsic '" + intrin.name + "'";
  for (size_t i = t; i < leaves.size(); ++i) {
    const IterVarAttr *a = s->find_attr(leaves[i]);
    user_check(!a || (!a->bind_thread.defined() && a->for_kind == ForKind::Serial), context)
        << "loop '" << leaves[i].name() << "' below the tensorize axis is bound or annotated; the "
        << "intrinsic replaces these loops, so leave them plain";
  }

  // The intrinsic's patterns in turn; the first that matches is emitted.
  ReaderReduction reader;
  bool asks_reader = intrin.reduced_output_dim >= 0 ||
                     std::any_of(intrin.alternatives.begin(), intrin.alternatives.end(),
                                 [](const auto &p) { return p->reduced_output_dim >= 0; });
  if (asks_reader)
    reader = reader_reduction(s, bodies, sch, intrin.op.as<ComputeOpNode>()->axis.size());
  StageMatcher matcher(s, t, bodies.body.lookup(s), dom, leaf_value, reader, context);
  std::vector<PatternMatch> tries{matcher.match(intrin)};
  for (size_t i = 0; i < intrin.alternatives.size() && !tries.back().failure.empty(); ++i)
    tries.push_back(matcher.match(*intrin.alternatives[i]));
  user_check(tries.back().failure.empty(), context) << refusal(tries);
  const PatternMatch &m = tries.back();
  const TensorIntrin &pattern = *m.intrin;

  // Bind the intrinsic's buffers to the regions, with the variables of loops of one iteration at
  // their value, 0 (loops run from 0; the axis is the range's min plus the variable): a region
  // taken inside such loops (a fragment load inside a fold computed a query a thread) then
  // compares with a buffer realized outside them (the block's Q tile).
  VarMap single;
  for (const auto &[iv, range] : dom)
    if (is_one(range.extent))
      single[iv->var.as<Variable>()] = make_zero(iv->var.type());
  auto at_single = [&](const Expr &e) { return arith::simplify(substitute(e, single)); };
  auto bind = [&](const Buffer &decl, const StageNode *stage, std::vector<RegionDim> region) {
    BufferLayout layout = layouts.lookup(stage);
    for (Expr &min : layout.mins)
      min = at_single(min);
    for (RegionDim &r : region)
      r.min = at_single(r.min);
    return bind_buffer(decl, buffers.lookup(stage).front(), layout, region, context);
  };
  std::vector<BoundBuffer> ins;
  for (size_t j = 0; j < m.inputs.size(); ++j)
    ins.push_back(bind(pattern.input_decls[j], stage_of(sch, m.inputs[j]), m.regions[j]));
  std::vector<RegionDim> out_region;
  for (const IterVar &r : c->axis)
    out_region.push_back(matcher.region_of(r));
  BoundBuffer out = bind(pattern.output_decl, s, out_region);
  // One limit per dimension of the pattern (the leading axes matched with extent 1 have none).
  std::vector<Expr> limits = m.limits;
  if (std::any_of(limits.begin(), limits.end(), [](const Expr &e) { return e.defined(); }))
    out.set_limits(std::move(limits));
  return pattern.emit(ins, out);
}

} // namespace tessel
