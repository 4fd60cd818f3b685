# The FileCheck tests of the tessel tool; tests/CMakeLists.txt defines tessel_filecheck_test.
# The checks match essential structure (names, scopes, thread extents, loops, guards), not whole
# outputs, so that they survive changes to the simplifier's exact forms.
tessel_filecheck_test(NAME list CHECKS list.txt COMMAND list)
tessel_filecheck_test(NAME lower.gemm_naive CHECKS gemm_naive.txt COMMAND lower gemm_naive)
tessel_filecheck_test(NAME lower.gemm_naive_fp16 CHECKS gemm_naive_fp16.txt
  COMMAND lower gemm_naive --dtype float16)
tessel_filecheck_test(NAME lower.gemm_shared CHECKS gemm_shared.txt COMMAND lower gemm_shared)
tessel_filecheck_test(NAME lower.gemm_shared_guards CHECKS gemm_shared_guards.txt
  COMMAND lower gemm_shared --shape M=1000,N=1000,K=1000)
tessel_filecheck_test(NAME lower.conv2d_tensorcore_tutorial CHECKS conv2d_tensorcore_tutorial.txt
  COMMAND lower conv2d_tensorcore_tutorial
  FILECHECK_ARGS --implicit-check-not=wmma.accumulator[ --implicit-check-not=matrix_a[
                 --implicit-check-not=matrix_b[)
tessel_filecheck_test(NAME lower.conv2d_tensorcore_tutorial_schedule_ops
  CHECKS conv2d_tensorcore_tutorial_schedule_ops.txt
  COMMAND lower conv2d_tensorcore_tutorial --print-after=schedule_ops)
tessel_filecheck_test(NAME lower.conv2d_tc CHECKS conv2d_tc.txt COMMAND lower conv2d_tc
  FILECHECK_ARGS --implicit-check-not=wmma.accumulator[ --implicit-check-not=matrix_a[
                 --implicit-check-not=if_then_else)
tessel_filecheck_test(NAME cuda.conv2d_tc CHECKS cuda_conv2d_tc.txt COMMAND cuda conv2d_tc)
tessel_filecheck_test(NAME lower.print_after_all CHECKS print_after_all.txt
  COMMAND lower gemm_naive --print-after=all)
tessel_filecheck_test(NAME lower.remarks CHECKS remarks.txt
  COMMAND lower gemm_shared --dtype float16 --remarks)
tessel_filecheck_test(NAME lower.gemm_wmma_raster CHECKS gemm_wmma_raster.txt
  COMMAND lower gemm_wmma --shape M=1280,N=1024,K=64,G=4)
tessel_filecheck_test(NAME lower.gemm_wmma_raster_divisible CHECKS gemm_wmma_raster.txt
  COMMAND lower gemm_wmma --shape M=2048,N=1024,K=64,G=8 FILECHECK_ARGS --check-prefix=DIV)
tessel_filecheck_test(NAME cuda.gemm_shared CHECKS cuda_gemm_shared.txt COMMAND cuda gemm_shared)
# gemm_mma: register fragments only through the mma_* intrinsics, indexed by constants.
tessel_filecheck_test(NAME lower.gemm_mma CHECKS gemm_mma.txt COMMAND lower gemm_mma
  FILECHECK_ARGS --implicit-check-not=.mma.accumulator[ --implicit-check-not=.mma.matrix_a[
                 --implicit-check-not=.mma.matrix_b[)
tessel_filecheck_test(NAME cuda.gemm_mma CHECKS cuda_gemm_mma.txt COMMAND cuda gemm_mma
  FILECHECK_ARGS --implicit-check-not=nvcuda)
tessel_filecheck_test(NAME cuda.gemm_mma_constant_indices CHECKS cuda_gemm_mma.txt
  COMMAND cuda gemm_mma FILECHECK_ARGS --check-prefix=CONSTANT)
tessel_filecheck_test(NAME compile.gemm_shared CHECKS compile_gemm_shared.txt
  COMMAND compile gemm_shared --arch sm_80)
tessel_filecheck_test(NAME compile.cuda_file CHECKS compile_cuda_file.txt
  COMMAND compile gemm_shared --arch sm_80
          --cuda ${CMAKE_CURRENT_SOURCE_DIR}/filecheck/inputs/gemm_shared_edit.cu)
tessel_filecheck_test(NAME run.help CHECKS run_help.txt COMMAND run --help)

# Errors: exit code 1 and the message, one check prefix per case.
tessel_filecheck_test(NAME error.unknown_schedule CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm FILECHECK_ARGS --check-prefix=UNKNOWN)
tessel_filecheck_test(NAME error.cuda_file_missing CHECKS errors.txt EXIT_CODE 1
  COMMAND compile gemm_shared --arch sm_80 --cuda no-such-file.cu
  FILECHECK_ARGS --check-prefix=CUDAFILE)
tessel_filecheck_test(NAME error.unknown_shape_parameter CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --shape Q=3 FILECHECK_ARGS --check-prefix=SHAPE)
tessel_filecheck_test(NAME error.unsupported_dtype CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --dtype int8 FILECHECK_ARGS --check-prefix=DTYPE)
tessel_filecheck_test(NAME error.unknown_step CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --print-after=bogus FILECHECK_ARGS --check-prefix=STEP)
tessel_filecheck_test(NAME error.conv2d_tc_pixels CHECKS errors.txt EXIT_CODE 1
  COMMAND lower conv2d_tc --shape N=1,H=3,W=3 FILECHECK_ARGS --check-prefix=CONV_TC_PIXELS)
tessel_filecheck_test(NAME error.run_number CHECKS errors.txt EXIT_CODE 1
  COMMAND run gemm_naive --number=0 FILECHECK_ARGS --check-prefix=NUMBER)
tessel_filecheck_test(NAME error.run_repeat CHECKS errors.txt EXIT_CODE 1
  COMMAND run gemm_naive --repeat=-2 FILECHECK_ARGS --check-prefix=REPEAT)
tessel_filecheck_test(NAME error.run_hold CHECKS errors.txt EXIT_CODE 1
  COMMAND run gemm_naive --hold=-1 FILECHECK_ARGS --check-prefix=HOLD)
tessel_filecheck_test(NAME error.tma_knob CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_wgmma --shape TMA=5 FILECHECK_ARGS --check-prefix=TMA_KNOB)
tessel_filecheck_test(NAME error.sw_knob CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_wgmma --shape SW=7 FILECHECK_ARGS --check-prefix=SW_KNOB)
tessel_filecheck_test(NAME error.wrap CHECKS errors.txt EXIT_CODE 1
  COMMAND lower conv2d_tc --shape H=4294967310 FILECHECK_ARGS --check-prefix=WRAP)
tessel_filecheck_test(NAME error.duplicate CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --shape M=16,M=32 FILECHECK_ARGS --check-prefix=DUPLICATE)
tessel_filecheck_test(NAME error.compile_arch CHECKS errors.txt EXIT_CODE 1
  COMMAND compile gemm_naive --arch garbage FILECHECK_ARGS --check-prefix=ARCH)
tessel_filecheck_test(NAME error.compile_empty_output CHECKS errors.txt EXIT_CODE 1
  COMMAND compile gemm_naive --arch sm_90 -o= FILECHECK_ARGS --check-prefix=EMPTY_OUTPUT)
tessel_filecheck_test(NAME error.grid CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --shape M=1048592,N=16,K=1 FILECHECK_ARGS --check-prefix=GRID)
tessel_filecheck_test(NAME error.dtype_digits CHECKS errors.txt EXIT_CODE 1
  COMMAND lower gemm_naive --dtype float99999999999 FILECHECK_ARGS --check-prefix=DTYPE_DIGITS)

# Programs a reader runs first: they must keep building, running and printing what they say
# (the documents' programs, README.md's readme_example among them: tests/CMakeLists.txt).
tessel_filecheck_test(NAME tutorial.gemm_definition PROGRAM gemm_definition
  CHECKS tutorial_gemm_definition.txt)

# tessel interpret: every kind of registered schedule, at shapes small enough for the executor.
tessel_filecheck_test(NAME interpret.gemm_shared CHECKS interpret.txt
  COMMAND interpret gemm_shared --shape M=100,N=70,K=33 --dtype float16
  FILECHECK_ARGS --check-prefix=GEMM_SHARED)
tessel_filecheck_test(NAME interpret.gemm_wmma CHECKS interpret.txt
  COMMAND interpret gemm_wmma --shape M=64,N=64,K=32 FILECHECK_ARGS --check-prefix=GEMM_WMMA)
tessel_filecheck_test(NAME interpret.gemm_wmma_raster CHECKS interpret.txt
  COMMAND interpret gemm_wmma --shape M=192,N=256,K=32,G=2
  FILECHECK_ARGS --check-prefix=GEMM_WMMA_RASTER)
tessel_filecheck_test(NAME interpret.gemm_wgmma_persistent CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=200,N=136,K=320,BM=128,BN=64,P=1,PB=4
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_PERSISTENT)
tessel_filecheck_test(NAME interpret.gemm_mma CHECKS interpret.txt
  COMMAND interpret gemm_mma --shape M=96,N=128,K=48 FILECHECK_ARGS --check-prefix=GEMM_MMA)
tessel_filecheck_test(NAME interpret.conv2d_tensorcore_tutorial CHECKS interpret.txt
  COMMAND interpret conv2d_tensorcore_tutorial
          --shape batch=128,height=3,width=3,in_channels=32,out_channels=128
  FILECHECK_ARGS --check-prefix=CONV)
tessel_filecheck_test(NAME interpret.conv2d_tc CHECKS interpret.txt
  COMMAND interpret conv2d_tc --shape N=2,H=8,W=8,C=32,K=32 FILECHECK_ARGS --check-prefix=CONV_TC)
tessel_filecheck_test(NAME interpret.conv2d_tc_1x1 CHECKS interpret.txt
  COMMAND interpret conv2d_tc --shape N=1,H=12,W=12,C=16,K=48,R=1,pad=0
  FILECHECK_ARGS --check-prefix=CONV_TC_1X1)
# gemm_wgmma: the Hopper path's IR (swizzled tiles, wgmma runs fenced and waited) and its CUDA,
# with cp.async fills (TMA=0, no rasterization) and with the default TMA ring.
tessel_filecheck_test(NAME lower.gemm_wgmma CHECKS gemm_wgmma.txt
  COMMAND lower gemm_wgmma --shape TMA=0,G=0,BN=256
  FILECHECK_ARGS --implicit-check-not=wgmma.accumulator[ --implicit-check-not=threadIdx.y_1)
tessel_filecheck_test(NAME cuda.gemm_wgmma CHECKS cuda_gemm_wgmma.txt
  COMMAND cuda gemm_wgmma --shape TMA=0,G=0,BN=256)
tessel_filecheck_test(NAME lower.gemm_wgmma_tma CHECKS gemm_wgmma_tma.txt COMMAND lower gemm_wgmma
  --shape BM=128,BN=128,WS=0
  FILECHECK_ARGS --implicit-check-not=cp_async --implicit-check-not=wgmma.accumulator[)
tessel_filecheck_test(NAME cuda.gemm_wgmma_tma CHECKS cuda_gemm_wgmma_tma.txt COMMAND cuda gemm_wgmma
  --shape BM=128,BN=128,WS=0)
# The TMA ring with warp roles (a producer warpgroup), IR and CUDA at 4096^3 without the
# persistent tile loop (the default there: gemm_wgmma_persistent.txt).
tessel_filecheck_test(NAME lower.gemm_wgmma_roles CHECKS gemm_wgmma_roles.txt COMMAND lower gemm_wgmma
  --shape M=4096,N=4096,K=4096,P=2
  FILECHECK_ARGS --implicit-check-not=cp_async --implicit-check-not=wgmma.accumulator[)
tessel_filecheck_test(NAME cuda.gemm_wgmma_roles CHECKS cuda_gemm_wgmma_roles.txt COMMAND cuda gemm_wgmma
  --shape M=4096,N=4096,K=4096,P=2)
# Persistent (P=1): 5 blocks walk 16 tiles in a tile loop, the TMA ring running across them.
tessel_filecheck_test(NAME lower.gemm_wgmma_persistent CHECKS gemm_wgmma_persistent.txt
  COMMAND lower gemm_wgmma --shape M=512,N=512,K=320,BM=128,BN=128,P=1,PB=5
  FILECHECK_ARGS --implicit-check-not=cp_async)
# TS=1: C stored by TMA through a shared staging tile, persistent, the last box clipped at C's
# edge (N = 196); its IR, its CUDA, and the executor's run of it against float64.
tessel_filecheck_test(NAME lower.gemm_wgmma_tma_store CHECKS gemm_wgmma_tma_store.txt
  COMMAND lower gemm_wgmma --shape M=256,N=196,K=128,BM=128,BN=128,P=1,PB=2,TS=1)
tessel_filecheck_test(NAME cuda.gemm_wgmma_tma_store CHECKS cuda_gemm_wgmma_tma_store.txt
  COMMAND cuda gemm_wgmma --shape M=256,N=196,K=128,BM=128,BN=128,P=1,PB=2,TS=1)
tessel_filecheck_test(NAME interpret.gemm_wgmma_tma_store CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=200,N=196,K=128,BM=128,BN=128,P=1,PB=2,TS=1
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_TMA_STORE)
# A K that no K step divides (and M = 16 below a block), read in place by TMA (PAD=2; by
# default operands of 2^21 elements and more are): the guarded copy in the IR, boxes of A and B
# past their edges, one kernel; exact on the executor.
tessel_filecheck_test(NAME lower.gemm_wgmma_ragged_k CHECKS gemm_wgmma_ragged_k.txt
  COMMAND lower gemm_wgmma --shape M=1000,N=1000,K=1000,PAD=2 --print-after=simplify
  FILECHECK_ARGS --implicit-check-not=_pad: --implicit-check-not=cp_async)
tessel_filecheck_test(NAME interpret.gemm_wgmma_ragged_k CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=200,N=192,K=136,PAD=2
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_RAGGED_K)
tessel_filecheck_test(NAME interpret.gemm_wgmma_few_rows CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=16,N=256,K=1000,SK=4,PAD=2
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_FEW_ROWS)
# Clusters of 2 blocks along N with A's tile multicast by TMA (CL=2), IR and CUDA; the executor
# runs both shapes (CL=1: along M, B's tile) exactly.
tessel_filecheck_test(NAME lower.gemm_wgmma_cluster CHECKS gemm_wgmma_cluster.txt
  COMMAND lower gemm_wgmma --shape M=256,N=256,K=320,BM=128,BN=128,CL=2,P=2
  FILECHECK_ARGS --implicit-check-not=cp_async)
tessel_filecheck_test(NAME cuda.gemm_wgmma_cluster CHECKS cuda_gemm_wgmma_cluster.txt
  COMMAND cuda gemm_wgmma --shape M=256,N=256,K=320,BM=128,BN=128,CL=2,P=2)
tessel_filecheck_test(NAME interpret.gemm_wgmma_cluster_2x1 CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=512,N=256,K=320,BM=128,BN=128,CL=1,P=1,PB=4
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_CLUSTER_2X1)
tessel_filecheck_test(NAME interpret.gemm_wgmma_cluster_1x2 CHECKS interpret.txt
  COMMAND interpret gemm_wgmma --shape M=256,N=256,K=320,BM=128,BN=128,CL=2,P=2
  FILECHECK_ARGS --check-prefix=GEMM_WGMMA_CLUSTER_1X2)
tessel_filecheck_test(NAME lower.conv2d_wgmma_tma CHECKS conv2d_wgmma_tma.txt
  COMMAND lower conv2d_wgmma --shape N=2,H=8,W=8,C=128,K=128
  FILECHECK_ARGS --implicit-check-not=cp_async)
# docs/SCHEDULING.md: every IR excerpt it shows is what tutorials/scheduling_primitives prints.
add_test(NAME filecheck.docs_scheduling
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/filecheck/check_doc.sh ${TESSEL_FILECHECK_EXE}
          $<TARGET_FILE:scheduling_primitives> ${PROJECT_SOURCE_DIR}/docs/SCHEDULING.md)
set_tests_properties(filecheck.docs_scheduling PROPERTIES ENVIRONMENT "TESSEL_PRINT_AFTER=")
# Fused attention (tutorials/flash_attention.cpp): the fold over key blocks in one kernel, on
# CUDA cores, with its contractions on WMMA, and on wgmma with the softmax in registers.
tessel_filecheck_test(NAME lower.attention CHECKS attention.txt
  COMMAND lower attention --shape SQ=128,SK=128,CAUSAL=1,HKV=2,TC=0,BQ=32)
tessel_filecheck_test(NAME lower.attention_wmma CHECKS attention_wmma.txt
  COMMAND lower attention --shape SQ=128,SK=128,CAUSAL=1,HKV=2,BQ=32)
tessel_filecheck_test(NAME lower.attention_wgmma CHECKS attention_wgmma.txt
  COMMAND lower attention --shape SQ=128,SK=128,CAUSAL=1,HKV=2,TC=2,BQ=64,BK=64)
tessel_filecheck_test(NAME lower.attention_decode CHECKS attention_decode.txt
  COMMAND lower attention_decode --shape B=1,H=4,HKV=2,SQ=1,SK=256,D=64,SPLIT=128,ROWS=8,TC=0)
tessel_filecheck_test(NAME cuda.attention_decode CHECKS cuda_attention_decode.txt
  COMMAND cuda attention_decode --shape B=1,H=4,HKV=2,SQ=1,SK=256,D=64,SPLIT=128,ROWS=8,TC=0)
tessel_filecheck_test(NAME cuda.attention_decode_wgmma CHECKS cuda_attention_decode_wgmma.txt
  COMMAND cuda attention_decode --shape B=1,H=8,HKV=2,SQ=1,SK=1024,D=64,SPLIT=512,TC=2)
tessel_filecheck_test(NAME cuda.attention_decode_wgmma_tma CHECKS cuda_attention_decode_wgmma_tma.txt
  COMMAND cuda attention_decode --shape B=1,H=8,HKV=2,SQ=1,SK=512,D=64,SPLIT=256,TC=2,BK=64,TMA=1)
