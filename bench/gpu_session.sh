#!/usr/bin/env bash
# One GPU session's work in two steps, so that the lent GPU machine (which has no LLVM
# development files and limited time) only runs binaries built here.
#
#   bench/gpu_session.sh pack          # here: Release build (build-gpu/, or the build folder
#                                      # $TESSEL_GPU_BUILD names, e.g. build) of the programs the
#                                      # steps run: tessel_tests, the CLI `tessel` (target
#                                      # tessel_tool), conv2d_tensorcore, tessel_bench and
#                                      # sustained_ab;
#                                      # stripped copies into a fresh .gpu/ (git-ignored)
#   bench/gpu_session.sh run [STEP..]  # there, from the repository root with .gpu/ carried:
#                                      # the steps below, logs and CSVs under $OUT (or ./gpu-out)
#
# Steps of `run` (all by default, in this order; each one's log is $OUT/<step>.txt):
#   tests     the GPU tests (*Gpu*) but the three heavy ones: real launches checked against
#             float64 references
#   tests_heavy  those three (fused attention's, fp8 GEMM's, the mid-shape conv's: minutes of
#             float64 reference on the CPU), apart so that each step fits a 600 s call
#   tutorial  the seed's conv tutorial, tensorized, checked and timed; then at batch 32 and 64
#   tune      tessel tune gemm_tc at 4096^3 (72 of its 648 tilings and forms) into $OUT/tuning.jsonl (every candidate checked
#             against float64 at sampled outputs, then timed), then `tessel run gemm_tc` on the
#             same shape twice with TESSEL_LOG_LEVEL=info: it must pick the record (the log says
#             which) and run within 5% of the tuned time
#   bench_tune  tessel_bench --tune: the Ampere-path (WMMA / mma.sync) gemm_tc and conv2d_tc
#             candidates checked against cuBLAS / cuDNN and timed
#   bench     tessel_bench --csv: the table bench/RESULTS.md records, between two readings of the
#             GPU's clock, temperature, power and throttle reasons. Its picture is drawn here
#             afterwards (the GPU machine has no matplotlib): python3 bench/plot.py bench.csv
#             -o bench/plots/DATE-GPU-COMMIT.svg --gpu GPU --date DATE --commit COMMIT
#   norm      tessel_bench --only norm: softmax / layernorm against a device-to-device copy
#   sustained the weak GEMM rows' defaults against their nearest variants (ping-pong off, clusters,
#             persistent, raster 16) with sustained_ab: in turns after 3 s of load, at the clocks
#             the bench meets (not among the default steps)
#   baselines tessel_bench on the rows issue 25 changed or added (not among the default steps):
#             the fp8 rows (per-tensor and block-scaled, against cuBLASLt), the bf16 GEMM rows
#             and the conv rows (against cuDNN's best, its legacy choice beside it), into
#             $OUT/baselines.csv, cuDNN's search into $OUT/cudnn_search.txt
#   sanitize  compute-sanitizer memcheck, racecheck and synccheck at small shapes on gemm_tc at
#             512^3 (pipelined with cp.async; wgmma on a Hopper GPU), conv2d_tc, conv2d_wgmma with
#             a float16 y (persistent, ping-pong and strided too), the fused conv2d_bias_relu and
#             gemm_bias_gelu, ragged gemm_wgmma (padded copies, and read in place), a depthwise
#             conv2d_grouped, softmax and layernorm with their reductions across threads, the
#             tutorial at batch 32, attention (WMMA and wgmma, causal; the wgmma ring by TMA,
#             with ping-pong, with a producer warpgroup, with the rows' logsumexp, with P V
#             onto o, with the overlap inside a warpgroup: causal over 4 query blocks and the
#             default at D=128; the defaults at D=256, causal and not), attention_varlen
#             (packed sequences: the default, wgmma on Hopper, causal; WMMA; OVL=0; LSE=1),
#             attention in float8_e4m3 (the default's form; causal by cp.async) and
#             attention_decode (ring, prefetched, on wgmma: its cp.async ring in 2 and 3 stages,
#             by TMA, with the overlap); racecheck on gemm_shared at 256^3. One timed launch each (tessel run --number 1 --repeat 1)
#             after the check's run and the warm-up
#   sanitize_hopper  the same three tools on issue 25's kernels (apart, so that each step fits
#             a 600 s call): gemm_wgmma with warp roles over 16 K steps, persistent with TMA
#             stores (TS=1), ping-pong (PP=1), split-K of 16 rows, clustered with TMA multicast
#             (2x1 and a persistent 1x2), the last round's tiles split (LW=8), a clustered stride-2
#             conv2d_wgmma with ping-pong (CL=1); gemm_fp8 block-scaled, per tensor, fast (FAST=1:
#             clustered; persistent with TS=1); small ragged GEMMs read in place by 64x128
#             blocks (1000^3 clustered, 800x1000x1200 not)
#   profile_attention  ncu (--clock-control none) on the default D=128 prefill kernel and on
#             decoding's first kernel: details, and stall samples per SASS line as CSV; the
#             details of decoding's first kernel on wgmma (TC=2) (not among the default steps)
#   attention fused attention and decoding against torch's SDPA backends
#             (bench/attention_torch.py, 5 rounds, the registry's default path; then issue
#             26's three prefill rows without and with the overlap inside a warpgroup (OVL=0,
#             OVL=1, with ping-pong: causal too), with a producer warpgroup, with the rows'
#             logsumexp written), then attention_decode's knobs at the issue's decoding shape
#             (on CUDA cores, TC 0: its default, ROWS 8, VROWS 0, SPLIT 256; on wgmma, the
#             default on Hopper: SPLIT 4096 and 16384, 3 stages, key blocks of 128, the ring by
#             TMA, with the overlap of steps, persistent with LW 8), then attention_varlen
#             (the default, OVL=0, WMMA, LSE=1) beside the dense kernel at its padded shape, unchecked,
#             and attention in float8_e4m3 beside float16 at the first prefill row, causal too
#             (not among the default steps: it needs torch)
#   profile_decode_vendor  ncu (launch, occupancy, speed of light, memory, scheduler and warp
#             state sections) on cuDNN's decoding kernel through torch's SDPA and on ours, at the
#             issue's decoding shape (not among the default steps: it needs torch)
#   decode_stream  bench/decode_mma_experiment.cu's STREAM=1 hand kernel (each warp streaming
#             a long chunk with an online softmax) at the issue's decoding shape: in cuDNN's
#             geometry (PARTS=1: 128 working blocks) with the padded rows and with swizzled
#             ones (SWZ=1), SPLIT 4096 and 2048 swizzled, each checked against float64, then
#             beside torch's backends, then the registry's default (not among the default
#             steps: it needs torch)
#   profile   ncu --set full on one launch of gemm_tc at 4096^3 and of conv2d_wgmma on ResNet's
#             res3 with a float16 y (if ncu is there), unchecked
#             (tessel run --no-check: the float64 reference takes too long on the CPU): the
#             evidence of where the time goes
# A step that fails is reported and the next one still runs; the exit status is the number of
# failed steps.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
gpu="$here/.gpu"
# The programs the steps of `run` launch, as CMake targets and their outputs under the build:
# tests (tessel_tests), tutorial (conv2d_tensorcore), tune and bench (tessel_bench), sanitize
# and profile (the CLI `tessel`, whose target is tessel_tool: `tessel` is the library's).
targets=(tessel_tests conv2d_tensorcore tessel_bench tessel_tool sustained_ab)
programs=(tests/tessel_tests tutorials/conv2d_tensorcore bench/tessel_bench tools/tessel
          bench/sustained_ab)

pack() {
  local build="${TESSEL_GPU_BUILD:-$here/build-gpu}"
  # Without MPI: the GPU machine has no Open MPI libraries for `tessel` to load.
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSEL_BUILD_BENCH=ON \
    -DTESSEL_BUILD_TESTS=ON -DTESSEL_MPI=OFF >/dev/null &&
    cmake --build "$build" --target "${targets[@]}" || return 1
  # Start empty, so that no stale program from an earlier pack travels.
  rm -rf "$gpu" && mkdir -p "$gpu" || return 1
  local f
  for f in "${programs[@]}"; do
    cp "$build/$f" "$gpu/" && strip "$gpu/$(basename "$f")" || return 1
  done
  du -sh "$gpu"
  echo "carry [\".gpu\"] and run: bench/gpu_session.sh run"
}

# sanitize_all ARGS...: `tessel run ARGS` under memcheck, racecheck and synccheck.
sanitize_all() {
  local tool
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool "$tool" --error-exitcode 1 ./tessel run "$@" || return 1
  done
}

run_step() {
  local step=$1 out=$2
  local log="$out/$step.txt"
  local start=$SECONDS status
  echo "== $step" | tee -a "$out/summary.txt"
  case $step in
    tests | tests_heavy)
      # Two steps, each under a call's 600 s (together they took 540 s and more on an H100 on
      # 2026-11-28): tests_heavy the three whose float64 references take minutes on the CPU,
      # tests the others. The exported-header test builds tests/export/export_main.cpp with the
      # machine's c++.
      local heavy='FusedAttention.GpuMatchesTheReference:GemmFp8.GpuMatchesReference'
      heavy+=':Conv2dTcGpu.MidShapeMatchesReference'
      local filter="*Gpu*:-$heavy"
      [ "$step" = tests_heavy ] && filter=$heavy
      TESSEL_EXPORT_MAIN="$here/tests/export/export_main.cpp" TESSEL_TEST_CXX=c++ \
        TESSEL_LIBCUDA=/usr/local/cuda/lib64/stubs/libcuda.so \
        ./tessel_tests --gtest_filter="$filter" ;;
    tutorial)
      ./conv2d_tensorcore && ./conv2d_tensorcore --batch 32 --quiet &&
        ./conv2d_tensorcore --batch 64 --quiet ;;
    tune)
      local gemm=(gemm_tc --shape M=4096,N=4096,K=4096)
      TESSEL_TUNING_DB="$out/tuning.jsonl" ./tessel tune "${gemm[@]}" --trials 72 &&
        TESSEL_TUNING_DB="$out/tuning.jsonl" TESSEL_LOG_LEVEL=info ./tessel run "${gemm[@]}" --no-check &&
        TESSEL_TUNING_DB="$out/tuning.jsonl" TESSEL_LOG_LEVEL=info ./tessel run "${gemm[@]}" --no-check ;;
    bench_tune) ./tessel_bench --tune --tune-csv "$out/tune.csv" ;;
    bench)
      # The GPU's clock, temperature, power and throttle reasons before and after: a run that
      # heats the GPU slows every kernel in it (the ratios, timed in turns, stay fair).
      local state=--query-gpu=clocks.sm,clocks.max.sm,temperature.gpu,power.draw,clocks_throttle_reasons.active
      nvidia-smi "$state" --format=csv
      ./tessel_bench --csv "$out/bench.csv" --cudnn-log "$out/cudnn_search.txt"
      local rc=$?
      nvidia-smi "$state" --format=csv,noheader
      return $rc ;;
    sustained)
      ./sustained_ab gemm_wgmma M=4096,N=4096,K=1024 - PP=2 PP=1,S=6 &&
        ./sustained_ab gemm_wgmma M=8192,N=8192,K=8192 - P=1 P=1,CL=1 CL=1 &&
        ./sustained_ab gemm_wgmma M=4096,N=11008,K=4096 - LW=1 P=2 G=16 &&
        ./sustained_ab gemm_fp8 M=4096,N=4096,K=4096,SCALE=0,FAST=1 - CL=1 P=2 ;;
    baselines)
      ./tessel_bench --filter '^(fp8|gemm bf16|conv) ' --csv "$out/baselines.csv" \
        --cudnn-log "$out/cudnn_search.txt" ;;
    norm) ./tessel_bench --only norm --csv "$out/norm.csv" ;;
    sanitize)
      # One timed launch each (--number 1 --repeat 1): under the sanitizer every launch is
      # slow, and racecheck took minutes over the default 30 x 10.
      local once=(--number 1 --repeat 1)
      compute-sanitizer --tool memcheck --error-exitcode 1 \
        ./tessel run gemm_tc --shape M=512,N=512,K=512 "${once[@]}" &&
        compute-sanitizer --tool racecheck --error-exitcode 1 \
          ./tessel run gemm_tc --shape M=512,N=512,K=512 "${once[@]}" &&
        compute-sanitizer --tool synccheck --error-exitcode 1 \
          ./tessel run gemm_tc --shape M=512,N=512,K=512 "${once[@]}" &&
        sanitize_all conv2d_tc --shape N=8,H=8,W=8,C=64,K=128 "${once[@]}" &&
        sanitize_all conv2d_wgmma --shape N=8,H=8,W=8,C=64,K=128,Y16=1 "${once[@]}" &&
        sanitize_all conv2d_wgmma --shape N=8,H=8,W=8,C=64,K=128,Y16=1,P=1,PB=3 "${once[@]}" &&
        sanitize_all conv2d_wgmma --shape N=8,H=8,W=8,C=64,K=128,Y16=1,PP=1,PB=3 "${once[@]}" &&
        sanitize_all conv2d_bias_relu --shape N=8,H=8,W=8,C=64,K=128 "${once[@]}" &&
        sanitize_all gemm_bias_gelu --shape M=256,N=512,K=256 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=200,N=199,K=100 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=1000,N=1000,K=1000,PAD=2 "${once[@]}" &&
        sanitize_all conv2d_wgmma --shape N=8,H=16,W=16,C=64,K=128,stride=2,Y16=1 "${once[@]}" &&
        sanitize_all conv2d_grouped --shape N=2,H=16,W=16,C=64,K=64,G=64 "${once[@]}" &&
        sanitize_all softmax --shape R=64,C=4096 "${once[@]}" &&
        sanitize_all layernorm --shape R=64,C=1000,V=1 "${once[@]}" &&
        sanitize_all conv2d_tensorcore_tutorial --shape batch=32,height=7,width=7 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=128,SK=256,D=64,CAUSAL=1,TC=1 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=128,SK=256,D=128,CAUSAL=1,TC=2,BK=64 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=128,CAUSAL=1,TC=2,BQ=128,PP=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=128,CAUSAL=1,TC=2,BQ=128,WS=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=128,CAUSAL=1,TC=2,BQ=128,LSE=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=128,CAUSAL=1,TC=2,BQ=128,ACC=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=512,SK=512,D=128,CAUSAL=1,TC=2,OVL=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=512,SK=512,D=128,TC=2,OVL=1,PP=1 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=512,SK=512,D=128,CAUSAL=1,TC=2 \
          "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=512,D=128,TC=2 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=256,TC=2 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=256,SK=256,D=256,CAUSAL=1,TC=2 \
          "${once[@]}" &&
        sanitize_all attention --dtype float8_e4m3 --shape B=1,H=4,HKV=2,SQ=256,SK=512,D=128,TC=2 \
          "${once[@]}" &&
        sanitize_all attention --dtype float8_e4m3 \
          --shape B=1,H=2,HKV=1,SQ=256,SK=512,D=128,TC=2,CAUSAL=1,TMA=0 "${once[@]}" &&
        sanitize_all attention_varlen --shape B=3,H=2,HKV=1,LMAX=128,MINLEN=17,D=64,CAUSAL=1 \
          "${once[@]}" &&
        sanitize_all attention_varlen \
          --shape B=3,H=2,HKV=1,LMAX=256,MINLEN=17,D=128,CAUSAL=0,TC=1 "${once[@]}" &&
        sanitize_all attention_varlen \
          --shape B=3,H=2,HKV=1,LMAX=256,MINLEN=17,D=128,CAUSAL=0,OVL=0 "${once[@]}" &&
        sanitize_all attention_varlen \
          --shape B=3,H=2,HKV=1,LMAX=256,MINLEN=17,D=128,CAUSAL=1,LSE=1 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=4,HKV=1,SQ=512,SK=512,D=128,TC=2,PB=3 "${once[@]}" &&
        sanitize_all attention --shape B=1,H=2,HKV=1,SQ=512,SK=512,D=128,TC=2,PB=6,LW=4 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=4,HKV=2,SQ=2,SK=1024,D=128,SPLIT=256,CAUSAL=1 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=4,HKV=2,SK=1024,D=128,SPLIT=256,RING=2,TC=0 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=4,HKV=2,SK=1024,D=128,SPLIT=256,PF=1,TC=0 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=8,HKV=2,SK=1024,D=128,SPLIT=256 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=8,HKV=2,SK=1024,D=128,SPLIT=256,STAGES=3 \
          "${once[@]}" &&
        sanitize_all attention_decode --shape B=1,H=8,HKV=2,SK=1024,D=128,SPLIT=256,TC=2,TMA=1 \
          "${once[@]}" &&
        sanitize_all attention_decode \
          --shape B=1,H=8,HKV=2,SK=1024,D=128,SPLIT=256,TC=2,TMA=1,OVL=1 "${once[@]}" &&
        compute-sanitizer --tool racecheck --error-exitcode 1 \
          ./tessel run gemm_shared --shape M=256,N=256,K=256 "${once[@]}" ;;
    sanitize_hopper)
      # The kernels issue 25 added, apart: with them the sanitize step ran past a call's 600 s.
      local once=(--number 1 --repeat 1)
      sanitize_all gemm_wgmma --shape M=512,N=512,K=1024 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=512,N=768,K=512,BM=128,BN=128,P=1,PB=4,TS=1 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=512,N=512,K=320,PP=1,PB=5 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=256,N=768,K=576,BM=128,BN=256,P=1,PB=5,LW=8 "${once[@]}" &&
        sanitize_all conv2d_wgmma --shape \
          N=4,H=32,W=32,C=64,K=128,stride=2,Y16=1,BM=128,BN=128,CL=1,PP=1,P=1,PB=4 "${once[@]}" &&
        sanitize_all gemm_fp8 --shape M=256,N=256,K=512,TS=1 "${once[@]}" &&
        sanitize_all gemm_fp8 --shape M=256,N=256,K=512 "${once[@]}" &&
        sanitize_all gemm_fp8 --shape M=256,N=256,K=512,SCALE=0,OUT=2 "${once[@]}" &&
        sanitize_all gemm_fp8 --shape M=256,N=512,K=512,SCALE=0,FAST=1,CL=1 "${once[@]}" &&
        sanitize_all gemm_fp8 --shape M=384,N=512,K=256,SCALE=0,FAST=1,P=1,PB=3,TS=1 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=16,N=512,K=1024 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=512,N=512,K=1024,BM=128,BN=128,CL=1,P=2 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=512,N=512,K=1024,BM=128,BN=128,CL=2,P=1,PB=4 \
          "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=1000,N=1000,K=1000 "${once[@]}" &&
        sanitize_all gemm_wgmma --shape M=800,N=1000,K=1200 "${once[@]}" ;;
    profile)
      # --no-check: the float64 reference of 4096^3 on the CPU did not finish in 8 minutes.
      # Launches: 3 warm-up (skipped), then the one timed launch, profiled.
      if command -v ncu >/dev/null; then
        ncu --set full --launch-skip 3 --launch-count 1 -o "$out/gemm_tc_4096" \
          ./tessel run gemm_tc --shape M=4096,N=4096,K=4096 --no-check --number 1 --repeat 1 &&
          ncu --import "$out/gemm_tc_4096.ncu-rep" --page details &&
          ncu --set full --launch-skip 3 --launch-count 1 -o "$out/conv_res3_y16" \
            ./tessel run conv2d_wgmma --shape N=256,H=28,W=28,C=128,K=128,Y16=1 --no-check \
            --number 1 --repeat 1 &&
          ncu --import "$out/conv_res3_y16.ncu-rep" --page details
      else
        echo "ncu not found"
      fi ;;
    profile_attention)
      # The default D=128 prefill kernel and decoding's first kernel (`tessel run` names the
      # kernels as `tessel cuda` prints them), at the clocks the GPU runs (--clock-control none):
      # details, and stall samples per SASS line (--page source) to attribute the stalls.
      local prefill=(attention --shape B=8,H=16,HKV=16,SQ=4096,SK=4096,D=128,TC=2)
      local decode=(attention_decode --shape B=16,H=32,HKV=8,SK=32768,D=128,TC=0)
      ncu --clock-control none --set full -k regex:^attention$ --launch-skip 1 \
        --launch-count 1 -o "$out/attention" ./tessel run "${prefill[@]}" --no-check \
        --number 1 --repeat 2 &&
        ncu --import "$out/attention.ncu-rep" --page details &&
        ncu --import "$out/attention.ncu-rep" --page source --csv >"$out/attention_source.csv" &&
        ncu --clock-control none --set full -k regex:^attention_decode_lse$ --launch-skip 2 \
          --launch-count 1 -o "$out/decode" ./tessel run "${decode[@]}" --no-check \
          --number 1 --repeat 3 &&
        ncu --import "$out/decode.ncu-rep" --page details &&
        ncu --import "$out/decode.ncu-rep" --page source --csv >"$out/decode_source.csv" &&
        ncu --clock-control none --set full -k regex:^attention_decode_lse_chunk$ \
          --launch-skip 2 --launch-count 1 -o "$out/decode_wgmma" ./tessel run attention_decode \
          --shape B=16,H=32,HKV=8,SK=32768,D=128,TC=2 --no-check --number 1 --repeat 3 &&
        ncu --import "$out/decode_wgmma.ncu-rep" --page details ;;
    attention)
      python3 "$here/bench/attention_torch.py" --tessel ./tessel --rounds 5 --repeat 20 &&
        for knobs in OVL=0 OVL=1 OVL=1,PP=1 WS=1 LSE=1; do
          echo "attention prefill $knobs (the default on Hopper: TC=2, TMA=1; OVL on at D=128"
          echo "non-causal, with STAGES=3):"
          python3 "$here/bench/attention_torch.py" --tessel ./tessel --rounds 1 --repeat 20 \
            --rows 0,1,2 --prefill-knobs ,$knobs || return 1
        done &&
        for knobs in TC=0 TC=0,ROWS=8 TC=0,VROWS=0 TC=0,SPLIT=256 SPLIT=4096 SPLIT=16384 STAGES=3 \
          BK=128 TMA=1 TMA=1,OVL=1 TMA=1,PB=132,LW=8; do
          echo "attention_decode $knobs:"
          ./tessel run attention_decode --shape B=16,H=32,HKV=8,SK=32768,D=128,$knobs \
            --no-check --number 5 --repeat 20 || return 1
        done &&
        for c in 0 1; do
          echo "attention in float8_e4m3 (B=8 H=16 S=4096 D=128, CAUSAL=$c), then float16:"
          for t in float8_e4m3 float16; do
            ./tessel run attention --dtype $t --shape B=8,H=16,HKV=16,SQ=4096,SK=4096,D=128,CAUSAL=$c \
              --no-check --number 1 --repeat 10 || return 1
          done
        done &&
        for c in 0 1; do
          echo "attention_varlen CAUSAL=$c (8 sequences of 4096 down to 1024 tokens): the" \
            "default (wgmma on Hopper), OVL=0, TC=1, LSE=1; then the dense kernel over 8 x" \
            "4096:" &&
            for k in TC=3 OVL=0 TC=1 LSE=1; do
              ./tessel run attention_varlen \
                --shape B=8,H=16,HKV=16,LMAX=4096,MINLEN=1024,D=128,CAUSAL=$c,$k \
                --no-check --number 1 --repeat 10 || return 1
            done &&
            ./tessel run attention --shape B=8,H=16,HKV=16,SQ=4096,SK=4096,D=128,CAUSAL=$c \
              --no-check --number 1 --repeat 10 || return 1
        done ;;
    profile_decode_vendor)
      # cuDNN's decoder (torch's SDPA, cuDNN backend) and ours under the same ncu sections.
      local sections="--section LaunchStats --section Occupancy --section SpeedOfLight
        --section MemoryWorkloadAnalysis --section SchedulerStats --section WarpStateStats"
      cat >"$out/sdpa_decode.py" <<'PY'
import torch, torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
B, H, HKV, Sk, D = 16, 32, 8, 32768, 128
q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.float16)
k = torch.randn(B, Sk, HKV, D, device="cuda", dtype=torch.float16)
v = torch.randn(B, Sk, HKV, D, device="cuda", dtype=torch.float16)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(3):
        F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                       enable_gqa=True)
torch.cuda.synchronize()
PY
      ncu --clock-control none $sections --target-processes all --launch-skip 3 --launch-count 6 \
        python3 "$out/sdpa_decode.py" &&
        ncu --clock-control none $sections -k regex:attention_decode --launch-skip 2 \
          --launch-count 2 ./tessel run attention_decode \
          --shape B=16,H=32,HKV=8,SQ=1,SK=32768,D=128 --no-check --number 1 --repeat 3 ;;
    decode_stream)
      local shape=B=16,H=32,HKV=8,SQ=1,SK=32768,D=128 v split ns kt parts swz f
      # chunk (SPLIT), ring slots a warp, tiles a softmax step, PARTS (1: only a head's first
      # chunk works, over all its keys: cuDNN's 128 blocks), SWZ (1: swizzled unpadded rows)
      for v in 4096:8:1:1:0 4096:8:1:1:1 4096:8:1:0:1 2048:4:1:0:1; do
        IFS=: read -r split ns kt parts swz <<<"$v"
        f="$out/decode_stream_${split}_kt${kt}_parts${parts}_swz$swz.cu"
        { printf '#define STREAM 1\n#define CHUNK %s\n#define NS %s\n#define KT %s\n' $split $ns $kt
          printf '#define PARTS %s\n#define SWZ %s\n' $parts $swz
          cat "$here/bench/decode_mma_experiment.cu"
          ./tessel cuda attention_decode --shape $shape,SPLIT=$split,TC=0 |
            sed -n '/void __launch_bounds__(128) attention_decode(/,$p'
        } >"$f" &&
          echo "decode_mma_experiment.cu STREAM=1 CHUNK=$split NS=$ns KT=$kt PARTS=$parts SWZ=$swz" \
            "(checked against float64):" &&
          ./tessel run attention_decode --shape $shape,SPLIT=$split,TC=0 --cuda "$f" --number 1 \
            --repeat 3 &&
          python3 "$here/bench/attention_torch.py" --tessel ./tessel --only decode --rows 3 \
            --rounds 2 --knobs ,SPLIT=$split --tessel-args "--cuda $f" ||
          echo "decode_mma_experiment.cu STREAM=1 $v: failed (above)"
      done &&
        echo "the registry's default beside:" &&
        python3 "$here/bench/attention_torch.py" --tessel ./tessel --only decode --rows 3 --rounds 2 ;;
    *) echo "unknown step '$step'"; return 1 ;;
  esac >"$log" 2>&1
  status=$?
  echo "   exit $status, $((SECONDS - start)) s; last lines of $log:" | tee -a "$out/summary.txt"
  tail -n 15 "$log" | sed 's/^/   | /' | tee -a "$out/summary.txt"
  return $status
}

run() {
  local out=${OUT:-$here/gpu-out}
  mkdir -p "$out"
  cd "$gpu" || { echo "no $gpu: run 'bench/gpu_session.sh pack' here and carry .gpu"; return 1; }
  local f
  for f in "${programs[@]}"; do
    [ -x "$(basename "$f")" ] ||
      echo "warning: $gpu lacks $(basename "$f"); the steps that run it will fail (pack again)"
  done
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv >"$out/gpu.txt" 2>&1
  local steps=("$@") failed=0 s
  [ ${#steps[@]} -eq 0 ] && steps=(tests tests_heavy tutorial tune bench norm sanitize sanitize_hopper profile)
  for s in "${steps[@]}"; do
    run_step "$s" "$out" || failed=$((failed + 1))
  done
  echo "$failed step(s) failed" | tee -a "$out/summary.txt"
  return $failed
}

case ${1:-} in
  pack) pack ;;
  run) shift; run "$@" ;;
  *) sed -n '2,/^[^#]/{/^#/p}' "$0"; exit 2 ;;
esac
