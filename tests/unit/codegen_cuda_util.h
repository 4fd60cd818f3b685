// Helpers for the CUDA codegen tests: building Form 2 kernels by hand, compiling the generated
// source with NVRTC and matching it with FileCheck.
#pragma once

#include "compiler/codegen/CodeGenCUDA.h"
#include "compiler/ir/IR.h"
#include "compiler/ir/IROperator.h"
#include "compiler/ir/Intrinsics.h"

#include <gtest/gtest.h>
#include <nvrtc.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

namespace tessel::testing {

/// A flat buffer of `size` elements.
inline Buffer flat_buffer(const std::string &name, DataType t, int64_t size,
                          const std::string &scope = "global") {
  return Buffer::make(name, t, {make_const(Int(32), size)}, scope);
}

inline Var data_of(const Buffer &b) { return Var(llvm::cast<Variable>(b->data.get())); }

/// Allocate(b.data, ...) around `body`, in b's scope.
inline Stmt allocate(const Buffer &b, Stmt body) {
  return Allocate::make(data_of(b), b.dtype(), b->shape, b.scope(), std::move(body));
}

inline Stmt store(const Buffer &b, Expr index, Expr value) {
  return BufferStore::make(b, std::move(value), {std::move(index)});
}

inline Expr load(const Buffer &b, Expr index) { return BufferLoad::make(b, {std::move(index)}); }

inline Stmt launch_thread(const IterVar &iv, int64_t extent, Stmt body) {
  return AttrStmt::make(iv, attr::thread_extent, make_const(Int(32), extent), std::move(body));
}

inline Stmt sync_threads() {
  return Evaluate::make(Call::make(Void(), intrinsic::syncthreads, {}, Call::Intrinsic));
}

inline Expr address_of(const Buffer &b, Expr index) {
  return Call::make(Handle(), intrinsic::address_of, {load(b, std::move(index))},
                    Call::PureIntrinsic);
}

inline LoweredFunc kernel(std::string name, std::vector<Buffer> args, Stmt body,
                          std::array<int64_t, 3> grid, std::array<int64_t, 3> block) {
  LoweredFunc f;
  f.name = std::move(name);
  for (const Buffer &b : args)
    f.arg_shapes.push_back({*as_const_int(b->shape[0])});
  f.args = std::move(args);
  f.body = std::move(body);
  f.launch.grid = grid;
  f.launch.block = block;
  return f;
}

inline std::string codegen(const LoweredFunc &f) {
  LoweredModule m;
  m.funcs.push_back(f);
  return codegen_cuda(m);
}

struct NvrtcOutput {
  bool ok = false;
  std::string log;
  std::string ptx; ///< for a virtual architecture (compute_XX)
};

/// Compiles `source` for `arch` ("sm_80" makes a cubin, "compute_80" PTX).
inline NvrtcOutput nvrtc_compile(const std::string &source, const std::string &arch) {
  NvrtcOutput out;
  nvrtcProgram prog;
  if (nvrtcCreateProgram(&prog, source.c_str(), "tessel_kernels.cu", 0, nullptr, nullptr) !=
      NVRTC_SUCCESS) {
    out.log = "nvrtcCreateProgram failed";
    return out;
  }
  std::string arch_opt = "--gpu-architecture=" + arch;
  std::string include = std::string("--include-path=") + TESSEL_CUDA_INCLUDE_DIR;
  const char *opts[] = {arch_opt.c_str(), "-std=c++17", include.c_str()};
  out.ok = nvrtcCompileProgram(prog, 3, opts) == NVRTC_SUCCESS;
  size_t size = 0;
  nvrtcGetProgramLogSize(prog, &size);
  out.log.resize(size);
  nvrtcGetProgramLog(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0')
    out.log.pop_back();
  if (out.ok && arch.rfind("compute_", 0) == 0) {
    nvrtcGetPTXSize(prog, &size);
    out.ptx.resize(size);
    nvrtcGetPTX(prog, out.ptx.data());
  }
  nvrtcDestroyProgram(&prog);
  return out;
}

/// The source compiles without errors for sm_80 and sm_90.
inline void expect_compiles(const std::string &source) {
  for (const char *arch : {"sm_80", "sm_90"}) {
    NvrtcOutput r = nvrtc_compile(source, arch);
    EXPECT_TRUE(r.ok) << "NVRTC (" << arch << ") failed:\n" << r.log << "\nsource:\n" << source;
  }
}

/// `source` matches the FileCheck patterns in `checks` (skipped without FileCheck).
inline void expect_filecheck(const std::string &source, const std::string &checks) {
#ifdef TESSEL_FILECHECK
  std::string dir = ::testing::TempDir();
  const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string base = dir + "/tessel_" + info->name();
  {
    std::ofstream(base + ".cu") << source;
    std::ofstream(base + ".check") << checks;
  }
  std::string cmd = std::string(TESSEL_FILECHECK) + " " + base + ".check --input-file=" + base +
                    ".cu --dump-input=never 2>&1";
  std::string output;
  if (FILE *p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p))
      output.append(buf, n);
    EXPECT_EQ(pclose(p), 0) << "FileCheck failed:\n" << output << "\nsource:\n" << source;
  } else {
    ADD_FAILURE() << "cannot run " << cmd;
  }
#else
  (void)source;
  (void)checks;
#endif
}

} // namespace tessel::testing
