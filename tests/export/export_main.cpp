// Launches the kernels of a header written by `tessel export`, on files: built against each
// exported header by tests/export/run.sh (CI: compiled and linked only) and by the GPU test
// Export.GpuHeaderLaunchMatchesModule (tests/unit/export_test.cpp), which runs it.
//
//   c++ -std=c++17 -I DIR -I CUDA_INCLUDE -DEXPORT_HEADER='"NAME.h"' -DEXPORT_NAME=NAME
//       export_main.cpp -L CUDA_LIB/stubs -lcuda
//   export_main DATA own|caller
//
// Reads each input I from DATA/argI.bin (its bytes, as the header's NAME_args say), fills the
// outputs with 0xff bytes, launches once on a stream of its own through NAME_launch_args (own:
// with no workspace, so the header allocates one; caller: with a workspace of
// NAME_workspace_bytes of its own), waits, and writes each output I to DATA/argI.out.
// Exit status 0, or 1 with the reason on stderr (the header's NAME_last_error()).
#include EXPORT_HEADER

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#define EXPORT_CAT2(a, b) a##b
#define EXPORT_CAT(a, b) EXPORT_CAT2(a, b)
#define EXPORTED(suffix) EXPORT_CAT(EXPORT_NAME, suffix)

namespace {

bool ok(CUresult r, const char *what) {
  if (r == CUDA_SUCCESS)
    return true;
  const char *name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "export_main: %s failed: %s\n", what, name ? name : "?");
  return false;
}

bool read_file(const std::string &path, std::vector<unsigned char> &out) {
  std::FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  size_t n = std::fread(out.data(), 1, out.size(), f);
  bool whole = n == out.size() && std::fgetc(f) == EOF;
  std::fclose(f);
  return whole;
}

bool write_file(const std::string &path, const std::vector<unsigned char> &bytes) {
  std::FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool whole = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && whole;
}

} // namespace

int main(int argc, char **argv) {
  if (argc != 3 || (std::strcmp(argv[2], "own") != 0 && std::strcmp(argv[2], "caller") != 0)) {
    std::fprintf(stderr, "usage: %s DATA own|caller\n", argv[0]);
    return 1;
  }
  const std::string data = argv[1];
  const bool own = std::strcmp(argv[2], "own") == 0;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  if (!ok(cuInit(0), "cuInit") || !ok(cuDeviceGet(&device, 0), "cuDeviceGet") ||
      !ok(cuDevicePrimaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain") ||
      !ok(cuCtxSetCurrent(context), "cuCtxSetCurrent") ||
      !ok(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate"))
    return 1;
  const int n = EXPORTED(_num_args);
  std::vector<CUdeviceptr> args(size_t(n), 0);
  for (int i = 0; i < n; ++i) {
    const auto &info = EXPORTED(_args)[i];
    if (!ok(cuMemAlloc(&args[size_t(i)], info.bytes ? info.bytes : 1), "cuMemAlloc"))
      return 1;
    std::vector<unsigned char> bytes(info.bytes);
    std::string path = data + "/arg" + std::to_string(i) + ".bin";
    if (info.input) {
      if (!read_file(path, bytes)) {
        std::fprintf(stderr, "export_main: cannot read %zu bytes of %s from %s\n", info.bytes,
                     info.name, path.c_str());
        return 1;
      }
      // On the launch's stream (and waited for: `bytes` goes away): a non-blocking stream is
      // not ordered after copies and memsets on the legacy default stream.
      if (!ok(cuMemcpyHtoDAsync(args[size_t(i)], bytes.data(), bytes.size(), stream),
              "cuMemcpyHtoDAsync") ||
          !ok(cuStreamSynchronize(stream), "cuStreamSynchronize"))
        return 1;
    } else if (!ok(cuMemsetD8Async(args[size_t(i)], 0xff, info.bytes, stream), "cuMemsetD8Async")) {
      return 1;
    }
  }
  CUdeviceptr workspace = 0;
  if (!own && EXPORTED(_workspace_bytes) &&
      !ok(cuMemAlloc(&workspace, EXPORTED(_workspace_bytes)), "cuMemAlloc (workspace)"))
    return 1;
  CUresult r = EXPORTED(_launch_args)(args.data(), workspace, stream);
  if (r != CUDA_SUCCESS) {
    std::fprintf(stderr, "export_main: launch failed (%d): %s\n", int(r), EXPORTED(_last_error)());
    return 1;
  }
  if (!ok(cuStreamSynchronize(stream), "cuStreamSynchronize"))
    return 1;
  for (int i = 0; i < n; ++i) {
    const auto &info = EXPORTED(_args)[i];
    if (info.input)
      continue;
    std::vector<unsigned char> bytes(info.bytes);
    std::string path = data + "/arg" + std::to_string(i) + ".out";
    if (!ok(cuMemcpyDtoH(bytes.data(), args[size_t(i)], bytes.size()), "cuMemcpyDtoH") ||
        !write_file(path, bytes)) {
      std::fprintf(stderr, "export_main: cannot write %s\n", path.c_str());
      return 1;
    }
  }
  EXPORTED(_unload)();
  std::printf("export_main: launched with %s workspace (%s)\n", own ? "the header's" : "the caller's",
              data.c_str());
  return 0;
}
