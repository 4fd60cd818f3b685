#include "compiler/tessel.h"
#include "schedules/Conv2dTensorCoreTutorial.h"
#include "schedules/Gemm.h"

#include <gtest/gtest.h>

using namespace tessel;

TEST(Lower, Dump) {
  ScheduledProgram p = gemm_naive(64, 64, 32, Float(32));
  std::cout << lower(p.schedule, p.args);
  ScheduledProgram q = gemm_shared(128, 128, 64, Float(32));
  std::cout << lower(q.schedule, q.args);
  ScheduledProgram r = gemm_shared(1000, 1000, 1000, Float(32));
  std::cout << lower(r.schedule, r.args);
  ScheduledProgram c = conv2d_tensorcore_tutorial({}, {.tensorize = true});
  std::cout << lower(c.schedule, c.args);
}
