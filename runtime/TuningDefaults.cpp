// The tuning records shipped with tessel, used where the user's database has no record for the
// same schedule, shape, type and arch:
//  - the winners `tessel_bench --tune` measured on an NVIDIA H100 80GB HBM3 (sm_90; driver
//    580.159.04, CUDA 13.0) on 2026-11-23, built from commit e47e2e3
//    (../shared/measurements/h100-2026-11-23/tune.csv: 216 candidates per GEMM shape, each checked
//    against cuBLAS): per shape, the fastest mma.sync (gemm_mma) and WMMA (gemm_wmma) candidate;
//  - the winner of `tessel tune gemm_tc --shape M=4096,N=4096,K=4096` on the same GPU on
//    2026-11-25 (bench/RESULTS.md; its database is bench/tuning/h100-2026-11-25-gemm_tc-4096.jsonl).
#include "runtime/TuningDb.h"

namespace tessel {

namespace {

TuningRecord h100(const char *schedule, int64_t n, ShapeParams config, double ms) {
  TuningRecord r;
  r.schedule = schedule;
  r.shape = {{"M", n}, {"N", n}, {"K", n}};
  r.dtype = "float16";
  r.config = std::move(config);
  r.device = "NVIDIA H100 80GB HBM3";
  r.arch = "sm_90";
  r.driver = 13000; // driver 580.159.04 reports CUDA 13.0
  r.cuda = 13000;
  r.tessel_version = "0.2.0 (e47e2e3)";
  r.median_ms = ms; // tessel_bench --tune kept only the median
  r.check = "ok";
  r.origin = "shipped with tessel (tessel_bench --tune, H100, 2026-11-23)";
  return r;
}

TuningRecord gemm_tc_h100(int64_t n, ShapeParams config, double median, double min, double max) {
  TuningRecord r = h100("gemm_tc", n, std::move(config), median);
  r.shape["BK"] = 0; // gemm_tc's parameters that are not tuned
  r.shape["SK"] = 0;
  r.min_ms = min;
  r.max_ms = max;
  r.tessel_version = "0.3.0 (1bdd82c)";
  r.origin = "shipped with tessel (tessel tune, H100, 2026-11-25)";
  return r;
}

ShapeParams wmma_config(int brw, int bcw, int wrt, int wct, int chunk, int stages, int g) {
  return {{"BRW", brw}, {"BCW", bcw}, {"WRT", wrt}, {"WCT", wct},
          {"CHUNK", chunk}, {"S", stages}, {"G", g}};
}

} // namespace

const std::vector<TuningRecord> &shipped_tuning_records() {
  static const std::vector<TuningRecord> records = {
      h100("gemm_mma", 4096, wmma_config(2, 4, 4, 4, 4, 4, 8), 0.393293),
      h100("gemm_mma", 8192, wmma_config(2, 4, 4, 4, 4, 4, 8), 3.23927),
      h100("gemm_wmma", 4096, wmma_config(2, 2, 4, 4, 4, 2, 0), 0.441018),
      h100("gemm_wmma", 8192, wmma_config(2, 2, 4, 4, 2, 4, 8), 3.41084),
      gemm_tc_h100(4096, {{"BM", 128}, {"BN", 256}, {"G", 16}, {"S", 4}}, 0.201054, 0.199610, 0.201939),
  };
  return records;
}

} // namespace tessel
