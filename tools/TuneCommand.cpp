#include "tools/TuneCommand.h"

#include "compiler/support/Error.h"

#include <llvm/Support/raw_ostream.h>

#include <csignal>
#include <cstdlib>
#include <string>

#ifdef TESSEL_HAVE_MPI
#include <mpi.h>
#endif

namespace tessel {

namespace {

std::atomic<bool> stop_requested{false};

// The first Ctrl-C asks the search to stop before the next candidate; a second one kills.
extern "C" void on_sigint(int) {
  stop_requested = true;
  std::signal(SIGINT, SIG_DFL);
}

int exit_status(const TuneSummary &s) { return s.measured > 0 || s.mine == 0 ? 0 : 1; }

#ifdef TESSEL_HAVE_MPI

// Launched by mpirun (Open MPI or another PMIx launcher): MPI is initialized only then, so that
// a plain `tessel tune` does not start an MPI runtime.
bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("PMI_RANK");
}

void mpi_check(int rc, const char *call) {
  if (rc != MPI_SUCCESS) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, text, &len);
    user_error("tune") << call << " failed: " << std::string(text, size_t(len));
  }
}

int run_with_mpi(TuneOptions o) {
  int provided = 0;
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  // One GPU per rank on each host, unless the user chose: the ranks of a host are numbered
  // from 0 by the launcher. Set before the driver is first used.
  if (!o.cpu && !std::getenv("CUDA_VISIBLE_DEVICES"))
    if (const char *local = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK"))
      setenv("CUDA_VISIBLE_DEVICES", local, 1);
  int status = 0;
  std::string error;
  try {
    const ScheduleEntry &e = find_schedule(o.schedule);
    std::vector<ShapeParams> cands = tuning_candidates(e, o.shape, o.trials);
    // Rank 0 reads the database: what was measured is skipped on every rank.
    std::vector<char> done(cands.size(), 0);
    if (rank == 0) {
      std::vector<bool> d = measured_candidates(TuningDb(o.db_path), e, cands,
                                                o.dtype.value_or(e.dtypes.at(0)).str(), o.cpu);
      for (size_t i = 0; i < d.size(); ++i)
        done[i] = d[i];
    }
    MPI_Bcast(done.data(), int(done.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
    o.done = std::vector<bool>(done.begin(), done.end());
    o.rank = rank;
    o.ranks = ranks;
    o.write_db = rank == 0; // the others' records reach rank 0 below
    TuneSummary s = tune(o);
    status = exit_status(s);

    // Rank 0 gathers the other ranks' records (one line each) and appends them.
    std::string mine;
    if (rank != 0)
      for (const TuningRecord &r : s.records)
        mine += TuningDb::to_line(r) + "\n";
    int len = int(mine.size());
    std::vector<int> lens(size_t(ranks), 0), offsets(size_t(ranks), 0);
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::string all;
    if (rank == 0) {
      int total = 0;
      for (int r = 0; r < ranks; ++r) {
        offsets[size_t(r)] = total;
        total += lens[size_t(r)];
      }
      all.resize(size_t(total));
    }
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), offsets.data(), MPI_CHAR, 0,
                MPI_COMM_WORLD);
    if (rank == 0) {
      TuningDb db(o.db_path);
      size_t merged = 0;
      llvm::StringRef rest(all);
      while (!rest.empty()) {
        auto [line, tail] = rest.split('\n');
        rest = tail;
        std::string why;
        if (auto r = TuningDb::from_line(line.str(), &why)) {
          db.append(*r);
          ++merged;
        } else if (!line.empty()) {
          llvm::errs() << "tessel: warning: a record from another rank is damaged (" << why
                       << "); skipped\n";
        }
      }
      llvm::errs() << "merged " << merged << " records of " << ranks - 1
                   << " other rank(s) and " << s.records.size() << " of rank 0 into " << db.path()
                   << "\n";
    }
    int any_ok = status == 0, all_ranks = 0;
    MPI_Allreduce(&any_ok, &all_ranks, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    status = all_ranks ? 0 : 1;
  } catch (const Error &e) {
    // The other ranks may be waiting in a collective: end them all rather than hang.
    llvm::errs() << "tessel: error (rank " << rank << " of " << ranks << "): " << e.what() << "\n";
    llvm::errs().flush();
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}

#endif

} // namespace

int run_tune_command(TuneOptions o) {
  std::signal(SIGINT, on_sigint);
  o.stop = &stop_requested;
#ifdef TESSEL_HAVE_MPI
  if (launched_by_mpirun())
    return run_with_mpi(std::move(o));
#else
  if (std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK"))
    llvm::errs() << "tessel: warning: launched by mpirun, but this tessel was built without MPI: "
                    "every rank runs the whole search; reconfigure with MPI installed "
                    "(libopenmpi-dev) to spread it\n";
#endif
  return exit_status(tune(o));
}

} // namespace tessel
