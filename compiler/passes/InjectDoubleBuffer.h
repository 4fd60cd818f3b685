#pragma once

#include "compiler/ir/IR.h"

namespace tessel {

/// Double-buffers the buffers marked by `double_buffer_scope` attrs (Form 2 in, Form 2 out; see
/// docs/IR_FORMS.md: the attr wraps the statement that fills the buffer, inside the loop to
/// pipeline). The allocation doubles and moves outside that loop if it was inside; a prologue
/// before the loop fills stage 0 for iteration 0; in iteration i the fill, guarded by
/// i + 1 < extent, writes stage (i + 1) % 2 with iteration i + 1's data while the reads use
/// stage i % 2, as TVM's InjectDoubleBuffer does, so the load of the next tile overlaps the
/// compute on the current one. The results are the same. Where that would not hold (the fill
/// reads storage written in the loop, writes other storage, uses variables bound inside the
/// loop, or the buffer is used before the fill or outside the loop) the attr is dropped and
/// the buffer stays single.
Stmt inject_double_buffer(Stmt s);

} // namespace tessel
