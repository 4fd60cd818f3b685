#include "schedules/Conv2dTensorCoreTutorial.h"

#include "compiler/support/Error.h"
#include "compiler/te/Compute.h"
#include "schedules/WmmaIntrinsics.h"

namespace tessel {

ScheduledProgram conv2d_tensorcore_tutorial(const Conv2dTutorialShape &sh,
                                            const Conv2dTutorialOptions &options) {
  const int block_size = 16;
  user_check(sh.batch % block_size == 0 && sh.in_channels % block_size == 0 &&
                 sh.out_channels % block_size == 0,
             "conv2d_tensorcore_tutorial")
      << "batch, in_channels and out_channels must be multiples of " << block_size << ", got "
      << sh.batch << ", " << sh.in_channels << ", " << sh.out_channels;
  user_check(sh.stride == 1, "conv2d_tensorcore_tutorial") << "the tutorial uses stride 1";
  const int out_h = sh.height + 2 * sh.pad - sh.kernel + 1;
  const int out_w = sh.width + 2 * sh.pad - sh.kernel + 1;

  // Algorithm.
  IterVar kh = reduce_axis({0, sh.kernel}, "kh");
  IterVar kw = reduce_axis({0, sh.kernel}, "kw");
  IterVar ic = reduce_axis({0, sh.in_channels / block_size}, "ic");
  IterVar ii = reduce_axis({0, block_size}, "ii");
  Tensor A = placeholder({sh.batch / block_size, sh.height, sh.width,
                          sh.in_channels / block_size, block_size, block_size},
                         Float(16), "A");
  Tensor W = placeholder({sh.kernel, sh.kernel, sh.in_channels / block_size,
                          sh.out_channels / block_size, block_size, block_size},
                         Float(16), "W");
  Tensor Apad = compute(
      {sh.batch / block_size, sh.height + 2 * sh.pad, sh.width + 2 * sh.pad,
       sh.in_channels / block_size, block_size, block_size},
      [&](Var n, Var h, Var w, Var i, Var nn, Var iii) {
        return if_then_else(
            all(h >= sh.pad, h - sh.pad < sh.height, w >= sh.pad, w - sh.pad < sh.width),
            A(n, h - sh.pad, w - sh.pad, i, nn, iii), make_const(Float(16), 0));
      },
      "Apad", {"n", "h", "w", "i", "nn", "ii"});
  Tensor Conv = compute(
      {sh.batch / block_size, out_h, out_w, sh.out_channels / block_size, block_size, block_size},
      [&](Var n, Var h, Var w, Var o, Var nn, Var oo) {
        return sum(Apad(n, h * sh.stride + kh, w * sh.stride + kw, ic, nn, ii).astype(Float(32)) *
                       W(kh, kw, ic, o, ii, oo).astype(Float(32)),
                   {ic, kh, kw, ii});
      },
      "Conv", {"n", "h", "w", "o", "nn", "oo"});

  Schedule s = create_schedule({Conv});
  s[Apad].compute_inline();

  // Memory hierarchy.
  Tensor AS = s.cache_read(Apad, "shared", {Conv});
  Tensor WS = s.cache_read(W, "shared", {Conv});
  Tensor AF = s.cache_read(AS, "wmma.matrix_a", {Conv});
  Tensor WF = s.cache_read(WS, "wmma.matrix_b", {Conv});
  Tensor ConvF = s.cache_write(Conv, "wmma.accumulator");

  // Tiling sizes.
  const int block_row_warps = 4, block_col_warps = 2, warp_row_tiles = 2, warp_col_tiles = 4;
  const int warp_size = 32, chunk = 2;

  IterVar block_x = thread_axis("blockIdx.x"), block_y = thread_axis("blockIdx.y");
  IterVar block_z = thread_axis("blockIdx.z");
  IterVar thread_x = thread_axis("threadIdx.x"), thread_y = thread_axis("threadIdx.y");
  IterVar thread_z = thread_axis("threadIdx.z");

  auto [nc, hc, wc, oc, nnc, ooc] = s[Conv].axes<6>();
  IterVar block_k = s[Conv].fuse(hc, wc);
  s[Conv].bind(block_k, block_z);
  auto [nc1, nci] = s[Conv].split(nc, warp_row_tiles);
  auto [block_i, nc2] = s[Conv].split(nc1, block_row_warps);
  auto [oc1, oci] = s[Conv].split(oc, warp_col_tiles);
  auto [block_j, oc2] = s[Conv].split(oc1, block_col_warps);
  s[Conv].reorder({block_k, block_i, block_j, nc2, oc2, nci, oci, nnc, ooc});
  s[Conv].bind(block_i, block_x);
  s[Conv].bind(block_j, block_y);
  s[Conv].bind(nc2, thread_y);
  s[Conv].bind(oc2, thread_z);

  // Local computation.
  s[ConvF].compute_at(s[Conv], oc2);
  auto [n, h, w, o, nnf, oof] = s[ConvF].axes<6>();
  auto [ko, ki] = s[ConvF].split(ic, chunk);
  s[ConvF].reorder({ko, kh, ki, kw, n, o, nnf, oof, ii});

  // Intermediate computation into each output compute tile.
  s[AF].compute_at(s[ConvF], kw);
  s[WF].compute_at(s[ConvF], kw);

  // A's shared memory.
  s[AS].compute_at(s[ConvF], kh);
  {
    auto [n_, h_, w_, i_, nn_, ii_] = s[AS].axes<6>();
    auto [tx, xo] = s[AS].split_nparts(n_, block_row_warps);
    auto [ty, yo] = s[AS].split_nparts(xo, block_col_warps);
    IterVar t = s[AS].fuse(nn_, ii_);
    auto [to, ti] = s[AS].split(t, warp_size);
    s[AS].bind(tx, thread_y);
    s[AS].bind(ty, thread_z);
    s[AS].bind(ti, thread_x);
  }

  // W's shared memory.
  s[WS].compute_at(s[ConvF], kh);
  {
    auto [kh_, kw_, ic_, o_, ii_, oo_] = s[WS].axes<6>();
    auto [tx, xo] = s[WS].split_nparts(o_, block_row_warps);
    auto [ty, yo] = s[WS].split_nparts(xo, block_col_warps);
    IterVar t = s[WS].fuse(ii_, oo_);
    auto [to, ti] = s[WS].split_nparts(t, warp_size);
    s[WS].bind(tx, thread_y);
    s[WS].bind(ty, thread_z);
    s[WS].bind(to, thread_x);
    s[WS].vectorize(ti);
  }

  // Lower the computation onto Tensor Cores.
  if (options.tensorize) {
    s[AF].tensorize(s[AF].op_axis(-2), wmma_load_matrix("wmma.matrix_a"));
    s[WF].tensorize(s[WF].op_axis(-2), wmma_load_matrix("wmma.matrix_b"));
    s[Conv].tensorize(nnc, wmma_store_matrix());
    s[ConvF].tensorize(nnf, wmma_gemm());
  }

  ScheduledProgram p;
  p.schedule = s;
  p.args = {A, W, Conv};
  p.num_inputs = 2;
  p.flops = 2.0 * sh.batch * out_h * out_w * sh.out_channels * sh.in_channels * sh.kernel *
            sh.kernel;
  return p;
}

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
