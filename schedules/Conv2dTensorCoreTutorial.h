// The seed tutorial, TVM's "How to optimize convolution using TensorCores", ported statement
// for statement: NHWCnc conv2d with fp16 inputs and fp32 accumulation. Defined in
// tutorials/conv2d_tensorcore.cpp, which reads as the tutorial does.
#pragma once

#include "schedules/Registry.h"

namespace tessel {

struct Conv2dTutorialShape {
  int batch = 256, height = 14, width = 14, in_channels = 256, out_channels = 512;
  int kernel = 3, pad = 1, stride = 1;
};

/// Options of the tutorial's schedule.
struct Conv2dTutorialOptions {
  /// Apply the four tensorize calls (the tutorial prints the IR before and after them).
  bool tensorize = false;
};

ScheduledProgram conv2d_tensorcore_tutorial(const Conv2dTutorialShape &shape,
                                            const Conv2dTutorialOptions &options = {});

ScheduleEntry conv2d_tensorcore_tutorial_entry();

} // namespace tessel
