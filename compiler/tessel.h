// Everything a user of tessel needs: the IR, the tensor-expression DSL, schedules, lowering,
// code generation and the runtime.
#pragma once

#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/IRPrinter.h"
#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "compiler/te/Operation.h"
#include "compiler/lower/Lower.h"
#include "compiler/schedule/Schedule.h"
