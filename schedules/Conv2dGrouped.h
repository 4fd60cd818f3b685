// Grouped and depthwise conv2d on CUDA cores: x NHWC, w K x R x S x (C / groups), y NPQK.
//
// The channels are cut into `groups` groups; output channel k belongs to group g = k / (K /
// groups) and sums over that group's C / groups input channels only. groups = C is a depthwise
// convolution (MobileNet's 3x3 layers; K = C x a channel multiplier). Too little work per output
// for Tensor Cores (C / groups is 1 for depthwise), so one thread computes one output, the
// output channel fastest across threads: the loads of x and w and the stores of y coalesce.
//
//   ScheduledProgram p = conv2d_grouped({.batch = 8, .height = 56, .width = 56,
//                                        .in_channels = 128, .out_channels = 128, .kernel = 3,
//                                        .pad = 1}, /*groups=*/128);   // depthwise
#pragma once

#include "schedules/Conv2dTc.h"
#include "schedules/Registry.h"

namespace tessel {

/// x and w of shape.in_dtype (float16 or bfloat16), y of shape.out_dtype (the float32 sum, or
/// rounded to float16 / bfloat16); stride, dilation and padding as Conv2dTcShape says. tessel::Error
/// unless groups divides C and K.
ScheduledProgram conv2d_grouped(const Conv2dTcShape &shape, int groups);

/// "conv2d_grouped": shape N, H, W, C, K, R, pad, stride, dil and G (groups; G = C: depthwise).
ScheduleEntry conv2d_grouped_entry();

} // namespace tessel
