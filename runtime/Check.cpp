#include "runtime/Check.h"

#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRVisitor.h"
#include "compiler/support/Error.h"
#include "runtime/interp/Executor.h"
#include "runtime/interp/Magnitude.h"

#include <cmath>
#include <new>
#include <cstring>
#include <random>
#include <set>
#include <sstream>

#include <unistd.h>

namespace tessel {

namespace {

// How a floating-point kernel computing a definition rounds (Magnitude.h): each rounding errs
// by at most u times the magnitude of what it rounds, so the error on an element stays below
// lambda sqrt(steps) u M, M its magnitude: steps the longest chain of roundings from an input
// (a sum of K terms is K of them, each stage one more), u the largest unit roundoff among the
// operations before the output's own rounding, which errs by u_out |ref| and is the relative
// part. Random rounding errors grow as sqrt(steps) (Higham & Mary 2019; tolerance_for in
// ResultCheck.cpp has the measurements), and lambda = 2 leaves room over thousands of outputs.
class RoundingAnalysis : public IRVisitor {
public:
  explicit RoundingAnalysis(const Tensor &out) {
    for (const Operation &op : topological_order({out})) {
      if (const auto *f = op.as<FoldOpNode>()) {
        // Its states are rounded once a step, after the step's tensors.
        int64_t before = 0;
        for (const Tensor &in : f->input_tensors())
          before = std::max(before, steps_.lookup(in.op().get()));
        steps_[f] = before + *as_const_int(f->fold_axis->dom.extent) + 1;
        top_ = nullptr;
        for (const Expr &u : f->update)
          visit_expr(u);
        continue;
      }
      const auto *c = op.as<ComputeOpNode>();
      if (!c)
        continue;
      int64_t before = 0;
      for (const Tensor &in : c->input_tensors())
        before = std::max(before, steps_.lookup(in.op().get()));
      int64_t own = 1;
      if (const Reduce *r = c->reduction(); r && r->combiner == Reduce::Sum)
        for (const IterVar &iv : r->axis)
          own *= *as_const_int(iv->dom.extent);
      steps_[c] = before + own + 1; // + 1: a product of inputs rounds too
      top_ = op.get() == out.op().get() ? c->body.get() : nullptr;
      visit_expr(c->body);
    }
    steps = steps_.lookup(out.op().get());
  }

  int64_t steps = 0;
  double unit = 0; ///< 0: integer arithmetic only

protected:
  void rounds(DataType t) {
    if (t.is_float())
      unit = std::max(unit, std::ldexp(1.0, -t.significand_bits()));
  }
  void visit(const Add *op) override {
    rounds(op->type);
    IRVisitor::visit(op);
  }
  void visit(const Sub *op) override {
    rounds(op->type);
    IRVisitor::visit(op);
  }
  void visit(const Mul *op) override {
    rounds(op->type);
    IRVisitor::visit(op);
  }
  void visit(const Div *op) override {
    rounds(op->type);
    IRVisitor::visit(op);
  }
  void visit(const Reduce *op) override {
    rounds(op->type);
    // A sum of products of 8-bit floats runs on Hopper's fp8 Tensor Cores, which keep about 14
    // bits of its partial sums whatever the accumulator's type (DeepSeek-V3's report, 3.3.2;
    // gemm_fp8 promotes them into float32 every 128 of K): its unit is 2^-13, not float32's.
    bool fp8_products = false;
    post_order_visit(op->source, [&](const IRNode *n) {
      const auto *c = llvm::dyn_cast<Cast>(n);
      fp8_products |= c && c->value.type().is_float8();
    });
    if (op->combiner == Reduce::Sum && fp8_products)
      unit = std::max(unit, std::ldexp(1.0, -13));
    IRVisitor::visit(op);
  }
  void visit(const Call *op) override {
    if (op->call_kind == Call::PureExtern)
      rounds(op->type);
    IRVisitor::visit(op);
  }
  void visit(const Cast *op) override {
    if (op != top_) // the output's own rounding is relative
      rounds(op->type);
    IRVisitor::visit(op);
  }

private:
  llvm::DenseMap<const OperationNode *, int64_t> steps_;
  const ExprNode *top_ = nullptr;
};

} // namespace

Tolerance output_tolerance(const Tensor &out) {
  const DataType t = out.dtype();
  if (!t.is_float())
    return {}; // integer arithmetic is exact and wraps the same way everywhere
  RoundingAnalysis a(out);
  const int p = t.significand_bits(), exponent_bits = t.bits() - p;
  Tolerance tol;
  tol.magnitude = 2.0 * std::sqrt(double(a.steps)) * a.unit;
  tol.rel = 2 * std::ldexp(1.0, -p);
  // The spacing of the output's subnormals: a result rounded there errs by that much.
  tol.abs = std::ldexp(1.0, 3 - (1 << (exponent_bits - 1)) - p);
  return tol;
}

namespace {

void check_arity(const std::vector<Tensor> &args, size_t num_inputs) {
  user_check(num_inputs < args.size(), "check")
      << "expected the inputs followed by the outputs, got " << args.size() << " arguments for "
      << num_inputs << " inputs";
}

int64_t element_count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t e : shape)
    n *= e;
  return n;
}

} // namespace

CheckProblem make_check_problem(const std::vector<Tensor> &args, size_t num_inputs, uint64_t seed,
                                size_t samples,
                                const std::map<size_t, std::vector<double>> &given) {
  check_arity(args, num_inputs);
  for (const auto &[i, values] : given)
    internal_check(i < num_inputs &&
                   int64_t(values.size()) == element_count(constant_shape(args[i])))
        << "given values for argument " << i << " (" << values.size() << " of them) of "
        << num_inputs << " inputs";
  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < num_inputs; ++i) {
    auto it = given.find(i);
    if (it == given.end())
      inputs.push_back(random_tensor(args[i], seed + i));
    else
      inputs.push_back(HostTensor{args[i].dtype(), constant_shape(args[i]), it->second});
  }
  return make_check_problem(args, std::move(inputs), seed, samples);
}

CheckProblem make_check_problem(const std::vector<Tensor> &args, std::vector<HostTensor> inputs,
                                uint64_t seed, size_t samples) {
  const size_t num_inputs = inputs.size();
  check_arity(args, num_inputs);
  CheckProblem p;
  std::vector<TensorBinding> bindings;
  for (size_t i = 0; i < num_inputs; ++i) {
    user_check(inputs[i].dtype == args[i].dtype() && inputs[i].shape == constant_shape(args[i]),
               "check")
        << "the values given for input '" << args[i].name() << "' are not of its type and shape ("
        << args[i].dtype() << ", " << args[i].ndim() << " dimensions)";
    p.inputs.push_back(std::move(inputs[i]));
    p.input_strides.push_back(args[i].strides());
  }
  for (size_t i = 0; i < num_inputs; ++i)
    bindings.push_back({args[i], p.inputs[i]});
  const Tensor &out = args.back();
  p.out_dtype = out.dtype();
  p.out_shape = constant_shape(out);
  int64_t elements = 1;
  for (int64_t e : p.out_shape)
    elements *= e;
  if (samples > 0 && int64_t(samples) < elements) {
    // Distinct indices, sorted; the corners always (edge tiles are where schedules go wrong).
    std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 17);
    std::uniform_int_distribution<int64_t> pick(0, elements - 1);
    std::set<int64_t> chosen = {0, elements - 1};
    while (chosen.size() < samples)
      chosen.insert(pick(rng));
    p.samples.assign(chosen.begin(), chosen.end());
  }
  p.tolerance = output_tolerance(out);
  for (size_t i = num_inputs; i + 1 < args.size(); ++i) {
    const Tensor &t = args[i];
    OutputReference o{t.name(), evaluate_reference(t, bindings), {}, output_tolerance(t),
                      t.dtype(), constant_shape(t)};
    if (o.tolerance.magnitude != 0)
      o.magnitudes = evaluate_reference(magnitude_of(t), bindings);
    p.earlier_outputs.push_back(std::move(o));
  }
  if (p.samples.empty()) {
    p.reference = evaluate_reference(out, bindings);
    if (p.tolerance.magnitude != 0)
      p.magnitudes = evaluate_reference(magnitude_of(out), bindings);
  } else {
    p.reference = evaluate_reference_at(out, bindings, p.samples);
    if (p.tolerance.magnitude != 0)
      p.magnitudes = evaluate_reference_at(magnitude_of(out), bindings, p.samples);
  }
  return p;
}

std::vector<interp::HostBuffer> input_buffers(const CheckProblem &p) {
  std::vector<interp::HostBuffer> bufs;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    bufs.push_back(interp::HostBuffer::from_doubles(p.inputs[i].dtype,
                                                    p.inputs[i].in_storage(p.input_strides[i])));
  return bufs;
}

DeviceArray device_array(const HostTensor &h, const std::vector<int64_t> &strides) {
  interp::HostBuffer b = interp::HostBuffer::from_doubles(h.dtype, h.in_storage(strides));
  DeviceArray a(h.dtype, h.shape, strides);
  a.copy_from_host(b.data(), a.bytes());
  return a;
}

CheckResult check_output(const CheckProblem &p, const interp::HostBuffer &out) {
  CheckResult r;
  r.tolerance = p.tolerance;
  std::vector<double> got = out.to_doubles();
  if (!p.samples.empty()) {
    std::vector<double> at;
    at.reserve(p.samples.size());
    for (int64_t i : p.samples) {
      internal_check(size_t(i) < got.size()) << "check: sample " << i << " of " << got.size();
      at.push_back(got[size_t(i)]);
    }
    got = std::move(at);
  }
  internal_check(got.size() == p.reference.size())
      << "check: " << got.size() << " outputs for a reference of " << p.reference.size();
  r.compare = compare(p.reference, got.data(), got.size(), p.tolerance, p.magnitudes);
  return r;
}

namespace {

// Each output of `outs` (the program's, in argument order) against the problem's references.
CheckResult check_outputs(const CheckProblem &p, const std::vector<Tensor> &args,
                          const std::vector<const interp::HostBuffer *> &outs) {
  internal_check(outs.size() == p.earlier_outputs.size() + 1)
      << "check: " << outs.size() << " outputs for " << p.earlier_outputs.size() + 1;
  CheckResult r = check_output(p, *outs.back());
  if (p.earlier_outputs.empty())
    return r;
  const CompareResult last = r.compare;
  for (size_t k = 0; k < p.earlier_outputs.size(); ++k) {
    const OutputReference &o = p.earlier_outputs[k];
    std::vector<double> got = outs[k]->to_doubles();
    internal_check(got.size() == o.reference.size())
        << "check: " << got.size() << " elements of '" << o.name << "' for a reference of "
        << o.reference.size();
    CompareResult c = compare(o.reference, got.data(), got.size(), o.tolerance, o.magnitudes);
    if (!c.ok && r.compare.ok)
      r.compare = c;
    r.outputs.push_back({o.name, std::move(c)});
  }
  r.outputs.push_back({args.back().name(), last});
  return r;
}

} // namespace

std::string CheckResult::str() const {
  std::ostringstream os;
  if (outputs.empty())
    os << compare.str();
  for (size_t k = 0; k < outputs.size(); ++k)
    os << (k ? "; " : "") << outputs[k].first << ": " << outputs[k].second.str();
  if (time)
    os << "; " << time->str();
  return os.str();
}

namespace {

std::string gigabytes(double bytes) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << bytes / 1e9 << " GB";
  return os.str();
}

// A check holds every argument in host memory: as float64 values and in its own type, and the
// output's float64 reference besides. More than the machine has is the user's shape, said
// before anything is allocated (not std::bad_alloc, nor the kernel's out-of-memory killer).
void check_host_memory(const std::vector<Tensor> &args, const char *where) {
  double total = 0, largest = 0;
  const Tensor *largest_tensor = nullptr;
  for (const Tensor &t : args) {
    double n = 1;
    for (int64_t e : constant_shape(t))
      n *= double(e);
    // An input as float64 values and in its type; an output also as its float64 reference.
    const bool output = !t.op().as<PlaceholderOpNode>();
    const double per_element = (output ? 2 : 1) * sizeof(double) + t.dtype().bytes();
    double bytes = n * per_element;
    total += bytes;
    if (bytes > largest) {
      largest = bytes;
      largest_tensor = &t;
    }
  }
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double memory = pages > 0 && page > 0 ? double(pages) * double(page) : 0;
  user_check(memory == 0 || total <= memory, where)
      << "checking this shape against its float64 reference needs about " << gigabytes(total)
      << " of host memory ('" << largest_tensor->name() << "' alone " << gigabytes(largest)
      << "), more than this machine's " << gigabytes(memory) << "; give a smaller shape";
}

// `f()`, with running out of host memory anyway reported as the user's shape.
template <typename F> CheckResult host_memory_guarded(const char *where, F f) {
  try {
    return f();
  } catch (const std::bad_alloc &) {
    user_error(where) << "out of host memory holding this shape's buffers and float64 "
                      << "reference; give a smaller shape";
  }
}

CheckResult check_on_cpu_unguarded(const Schedule &s, const std::vector<Tensor> &args,
                                   const CheckProblem &p) {
  LoweredModule m = lower(s, args);
  std::vector<interp::HostBuffer> bufs = input_buffers(p);
  // Poisoned outputs: an element the kernel does not write shows up as a mismatch.
  for (const OutputReference &o : p.earlier_outputs)
    bufs.push_back(interp::HostBuffer::from_doubles(
        o.dtype, std::vector<double>(size_t(element_count(o.shape)), std::nan(""))));
  bufs.push_back(interp::HostBuffer::from_doubles(
      args.back().dtype(),
      std::vector<double>(size_t(element_count(constant_shape(args.back()))), std::nan(""))));
  std::vector<interp::HostBuffer *> ptrs;
  for (interp::HostBuffer &b : bufs)
    ptrs.push_back(&b);
  interp::execute(m, ptrs);
  std::vector<const interp::HostBuffer *> outs;
  for (size_t i = p.inputs.size(); i < bufs.size(); ++i)
    outs.push_back(&bufs[i]);
  return check_outputs(p, args, outs);
}

CheckResult check_on_gpu_unguarded(const Schedule &s, const std::vector<Tensor> &args,
                                   const CheckProblem &p, const std::optional<TimeOptions> &timing,
                                   const Target &target, const LowerOptions &options) {
  const size_t num_inputs = p.inputs.size();
  Module m = build(s, args, target, options);
  std::vector<DeviceArray> arrays;
  for (size_t i = 0; i < p.inputs.size(); ++i)
    arrays.push_back(device_array(p.inputs[i], p.input_strides[i]));
  for (size_t i = num_inputs; i < args.size(); ++i) {
    arrays.emplace_back(args[i].dtype(), constant_shape(args[i]));
    arrays.back().poison();
  }
  std::vector<const DeviceArray *> ptrs;
  for (const DeviceArray &a : arrays)
    ptrs.push_back(&a);
  m.run(ptrs);
  if (m.params().workspace_bytes > 0) { // the second launch on the first one's workspace
    for (size_t i = num_inputs; i < args.size(); ++i)
      arrays[i].poison();
    m.run(ptrs);
  }
  std::vector<interp::HostBuffer> outs;
  for (size_t i = num_inputs; i < args.size(); ++i) {
    outs.emplace_back(args[i].dtype(), size_t(element_count(constant_shape(args[i]))));
    arrays[i].copy_to_host(outs.back().data(), arrays[i].bytes());
  }
  std::vector<const interp::HostBuffer *> out_ptrs;
  for (const interp::HostBuffer &o : outs)
    out_ptrs.push_back(&o);
  CheckResult r = check_outputs(p, args, out_ptrs);
  if (timing)
    r.time = m.time(ptrs, *timing);
  return r;
}

} // namespace

CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         uint64_t seed) {
  check_host_memory(args, "check_on_cpu");
  return host_memory_guarded("check_on_cpu", [&] {
    return check_on_cpu_unguarded(s, args, make_check_problem(args, num_inputs, seed));
  });
}

CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args,
                         const CheckProblem &p) {
  check_host_memory(args, "check_on_cpu");
  return host_memory_guarded("check_on_cpu", [&] { return check_on_cpu_unguarded(s, args, p); });
}

CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         const std::optional<TimeOptions> &timing, uint64_t seed,
                         const Target &target, const LowerOptions &options) {
  check_host_memory(args, "check_on_gpu");
  return host_memory_guarded("check_on_gpu", [&] {
    return check_on_gpu_unguarded(s, args, make_check_problem(args, num_inputs, seed), timing,
                                  target, options);
  });
}

CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args,
                         const CheckProblem &p, const std::optional<TimeOptions> &timing,
                         const Target &target, const LowerOptions &options) {
  check_host_memory(args, "check_on_gpu");
  return host_memory_guarded("check_on_gpu", [&] {
    return check_on_gpu_unguarded(s, args, p, timing, target, options);
  });
}

} // namespace tessel
