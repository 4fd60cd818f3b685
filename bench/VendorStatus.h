// Every cuBLAS / cuBLASLt / cuDNN call of the benchmark goes through these: a status other than
// success is a tessel::Error naming the call and the library's own message.
#pragma once

#include "compiler/support/Error.h"

#include <cublas_api.h>
#include <cudnn.h>

#define CHECK_CUBLAS(call)                                                                         \
  do {                                                                                             \
    cublasStatus_t st_ = (call);                                                                   \
    user_check(st_ == CUBLAS_STATUS_SUCCESS, "cuBLAS")                                            \
        << #call << " failed: " << cublasGetStatusString(st_);                                     \
  } while (0)

#define CHECK_CUDNN(call)                                                                          \
  do {                                                                                             \
    cudnnStatus_t st_ = (call);                                                                    \
    user_check(st_ == CUDNN_STATUS_SUCCESS, "cuDNN") << #call << " failed: "                      \
                                                     << cudnnGetErrorString(st_);                  \
  } while (0)
