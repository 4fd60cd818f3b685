#include "compiler/lower/ThreadExtents.h"

#include "compiler/ir/IROperator.h"
#include "compiler/support/Error.h"

#include <algorithm>

namespace tessel {

namespace {

bool is_thread_index(const std::string &tag) { return tag.rfind("threadIdx.", 0) == 0; }

} // namespace

ThreadExtents::ThreadExtents(const ScheduleNode *sch, const DomainMap &dom) : dom_(dom) {
  // A root stage in shared or local memory is no kernel of its own (only global stages are):
  // it runs in the kernel of a stage that reads it.
  for (auto it = sch->stages.rbegin(); it != sch->stages.rend(); ++it) {
    const StageNode *st = it->get();
    if (st->attach_type != AttachType::Root || st->scope == "global")
      continue;
    for (const auto &reader : sch->stages) {
      const auto *c = reader->op.as<ComputeOpNode>();
      if (!c || reader->attach_type == AttachType::Inline)
        continue;
      for (const Tensor &in : c->input_tensors()) {
        if (sch->stage_map.lookup(in.op().get()) != st)
          continue;
        const StageNode *k = kernel_root(reader.get());
        auto [it, fresh] = kernel_of_.try_emplace(st, k);
        user_check(fresh || it->second == k, "lower")
            << "stage '" << st->op.name() << "' is stored in '" << st->scope
            << "' memory at the root, but it is read in two kernels (by '"
            << reader->op.name() << "', in the kernel of '" << k->op.name()
            << "', and in the kernel of '" << it->second->op.name() << "'); '" << st->scope
            << "' memory lives in one kernel: compute '" << st->op.name()
            << "' at a loop of each reader (compute_at), inline it, or store it in global "
               "memory";
      }
    }
  }
  for (const auto &st : sch->stages) {
    if (st->attach_type == AttachType::Inline)
      continue;
    llvm::StringMap<int64_t> &launch = launch_[kernel_root(st.get())];
    for (const auto &entry : in_effect(st.get(), st->leaf_iter_vars.size()))
      launch[entry.getKey()] = std::max(launch.lookup(entry.getKey()), entry.getValue().extent);
  }
}

const StageNode *ThreadExtents::kernel_root(const StageNode *s) const {
  while (s->attach_type == AttachType::Scope && s->attach_stage)
    s = s->attach_stage;
  auto it = kernel_of_.find(s);
  return it == kernel_of_.end() ? s : it->second;
}

ThreadExtents::Bindings ThreadExtents::in_effect(const StageNode *s, size_t leaves) const {
  Bindings out;
  if (s->attach_type == AttachType::Scope && s->attach_stage) {
    const std::vector<IterVar> &outer = s->attach_stage->leaf_iter_vars;
    auto at = std::find_if(outer.begin(), outer.end(),
                           [&](const IterVar &iv) { return iv.same_as(s->attach_ivar); });
    internal_check(at != outer.end())
        << "stage '" << s->op.name() << "' is computed at '" << s->attach_ivar.name()
        << "', which is not a loop of stage '" << s->attach_stage->op.name() << "'";
    out = in_effect(s->attach_stage, size_t(at - outer.begin()) + 1);
  }
  for (const IterVar &t : s->env_threads)
    if (is_thread_index(t.thread_tag()))
      out[t.thread_tag()] = {t.var(), *as_const_int(t.dom().extent)};
  for (size_t i = 0; i < leaves && i < s->leaf_iter_vars.size(); ++i) {
    const IterVarAttr *a = s->find_attr(s->leaf_iter_vars[i]);
    if (a && a->bind_thread.defined() && is_thread_index(a->bind_thread.thread_tag()))
      out[a->bind_thread.thread_tag()] = {a->bind_thread.var(),
                                          const_extent(dom_, s->leaf_iter_vars[i])};
  }
  return out;
}

int64_t ThreadExtents::launch(const StageNode *s, const std::string &tag, int64_t own) const {
  if (!is_thread_index(tag))
    return own;
  auto it = launch_.find(kernel_root(s));
  return it == launch_.end() ? own : std::max(own, it->second.lookup(tag));
}

std::vector<Expr> ThreadExtents::guards(const StageNode *s) const {
  std::vector<Expr> out;
  Bindings inner = in_effect(s, s->leaf_iter_vars.size());
  std::vector<std::string> tags;
  for (const auto &entry : inner)
    tags.push_back(entry.getKey().str());
  std::sort(tags.begin(), tags.end()); // a stable order for the printed IR
  for (const std::string &tag : tags) {
    const Binding &b = inner.lookup(tag);
    if (b.extent < launch(s, tag, b.extent))
      out.push_back(b.var < make_const(b.var.type(), b.extent));
  }
  return out;
}

void ThreadExtents::narrow(const StageNode *s, VarIntervals &env) const {
  for (const auto &entry : in_effect(s, s->leaf_iter_vars.size())) {
    const Binding &b = entry.getValue();
    env[b.var.get()] = IndexInterval::constant(0, b.extent - 1);
  }
}

} // namespace tessel
