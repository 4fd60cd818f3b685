// The seed tutorial's algorithm and schedule are defined once, in tutorials/conv2d_tensorcore.cpp,
// where they read as TVM's tutorial does; the library compiles that definition here, for the
// registry, the tests and the bench, without the tutorial's program.
#define TESSEL_CONV2D_TUTORIAL_DEFINITION
#include "tutorials/conv2d_tensorcore.cpp"

namespace tessel {

ScheduleEntry conv2d_tensorcore_tutorial_entry() {
  ScheduleEntry e;
  e.name = "conv2d_tensorcore_tutorial";
  e.description = "the seed tutorial: NHWCnc conv2d, fp16 in, fp32 accumulate, TVM's schedule";
  e.default_shape = {{"batch", 256}, {"height", 14}, {"width", 14}, {"in_channels", 256},
                     {"out_channels", 512}, {"kernel", 3}, {"pad", 1}};
  e.dtypes = {Float(16)};
  e.build = [](const ShapeParams &p, DataType) {
    Conv2dTutorialShape sh;
    sh.batch = int(p.at("batch"));
    sh.height = int(p.at("height"));
    sh.width = int(p.at("width"));
    sh.in_channels = int(p.at("in_channels"));
    sh.out_channels = int(p.at("out_channels"));
    sh.kernel = int(p.at("kernel"));
    sh.pad = int(p.at("pad"));
    return conv2d_tensorcore_tutorial(sh, {.tensorize = true});
  };
  return e;
}

} // namespace tessel
