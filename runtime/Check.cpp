#include "runtime/Check.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"
#include "runtime/interp/Executor.h"

#include <cstring>
#include <sstream>

namespace tessel {

namespace {

// The computed (not placeholder) tensors `c` reads.
std::vector<Tensor> computed_inputs(const ComputeOpNode *c) {
  std::vector<Tensor> computed;
  for (const Tensor &in : c->input_tensors())
    if (in.op().as<ComputeOpNode>())
      computed.push_back(in);
  return computed;
}

// The stage whose sum the output holds: the output itself, or, where it is an elementwise
// epilogue of one reduction's result (y = acc.astype(float16), y = relu(acc + bias[k])), that
// reduction; the output when it sums nothing.
Tensor summed_stage(const Tensor &out) {
  Tensor t = out;
  while (const auto *c = t.op().as<ComputeOpNode>()) {
    if (!c->reduce_axis.empty())
      return t;
    std::vector<Tensor> computed = computed_inputs(c);
    if (computed.size() != 1)
      break;
    t = computed[0];
  }
  return out;
}

// The number of terms each element of `t` sums: the product of the reduce axes' extents, times
// the terms of each sum it adds where it adds sums of one other stage (split-K's partial sums).
int64_t reduction_length(const Tensor &t) {
  int64_t n = 1;
  const auto *c = t.op().as<ComputeOpNode>();
  if (!c)
    return n;
  for (const IterVar &r : c->reduce_axis)
    n *= *as_const_int(r->dom.extent);
  std::vector<Tensor> computed = computed_inputs(c);
  if (!c->reduce_axis.empty() && computed.size() == 1) {
    Tensor inner = summed_stage(computed[0]);
    if (const auto *ic = inner.op().as<ComputeOpNode>(); ic && !ic->reduce_axis.empty())
      n *= reduction_length(inner);
  }
  return n;
}

// The sum's tolerance in its own type; a narrower output adds its rounding (relative).
Tolerance output_tolerance(const Tensor &out, DataType in) {
  const Tensor acc = summed_stage(out);
  Tolerance tol = tolerance_for(acc.dtype(), in, reduction_length(acc));
  if (acc != out)
    tol.rel += tolerance_for(out.dtype(), in, 1).rel;
  return tol;
}

struct Problem {
  std::vector<HostTensor> inputs;
  std::vector<double> reference;
  Tolerance tolerance;
};

Problem make_problem(const std::vector<Tensor> &args, size_t num_inputs, uint64_t seed) {
  user_check(num_inputs + 1 == args.size(), "check")
      << "expected the inputs followed by one output, got " << args.size() << " arguments for "
      << num_inputs << " inputs";
  Problem p;
  std::vector<TensorBinding> bindings;
  for (size_t i = 0; i < num_inputs; ++i)
    p.inputs.push_back(random_tensor(args[i], seed + i));
  for (size_t i = 0; i < num_inputs; ++i)
    bindings.push_back({args[i], p.inputs[i]});
  const Tensor &out = args.back();
  p.reference = evaluate_reference(out, bindings);
  p.tolerance = output_tolerance(out, args[0].dtype());
  return p;
}

CheckResult finish(const Problem &p, const interp::HostBuffer &out) {
  CheckResult r;
  r.tolerance = p.tolerance;
  std::vector<double> got = out.to_doubles();
  r.compare = compare(p.reference, got.data(), got.size(), p.tolerance);
  return r;
}

} // namespace

std::string CheckResult::str() const {
  std::ostringstream os;
  os << compare.str() << " (tolerance abs " << tolerance.abs << " + rel " << tolerance.rel << ")";
  if (time)
    os << "; " << time->str();
  return os.str();
}

CheckResult check_on_cpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         uint64_t seed) {
  Problem p = make_problem(args, num_inputs, seed);
  LoweredModule m = lower(s, args);
  std::vector<interp::HostBuffer> bufs;
  for (const HostTensor &h : p.inputs)
    bufs.push_back(interp::HostBuffer::from_doubles(h.dtype, h.values));
  // Poisoned output: an element the kernel does not write shows up as a mismatch.
  bufs.push_back(interp::HostBuffer::from_doubles(
      args.back().dtype(), std::vector<double>(p.reference.size(), std::nan(""))));
  std::vector<interp::HostBuffer *> ptrs;
  for (interp::HostBuffer &b : bufs)
    ptrs.push_back(&b);
  interp::execute(m, ptrs);
  return finish(p, bufs.back());
}

CheckResult check_on_gpu(const Schedule &s, const std::vector<Tensor> &args, size_t num_inputs,
                         const std::optional<TimeOptions> &timing, uint64_t seed) {
  Problem p = make_problem(args, num_inputs, seed);
  Module m = build(s, args);
  std::vector<DeviceArray> arrays;
  for (const HostTensor &h : p.inputs) {
    interp::HostBuffer b = interp::HostBuffer::from_doubles(h.dtype, h.values);
    arrays.emplace_back(h.dtype, h.shape);
    arrays.back().copy_from_host(b.data(), arrays.back().bytes());
  }
  arrays.emplace_back(args.back().dtype(), constant_shape(args.back()));
  arrays.back().poison();
  std::vector<const DeviceArray *> ptrs;
  for (const DeviceArray &a : arrays)
    ptrs.push_back(&a);
  m.run(ptrs);
  interp::HostBuffer out(args.back().dtype(), p.reference.size());
  arrays.back().copy_to_host(out.data(), arrays.back().bytes());
  CheckResult r = finish(p, out);
  if (timing)
    r.time = m.time(ptrs, *timing);
  return r;
}

} // namespace tessel
