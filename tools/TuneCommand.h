// `tessel tune`: runtime/Tuner.h's search behind the command line: Ctrl-C stops it before the
// next candidate (the database keeps what was measured; the same command resumes), and under
// mpirun (when tessel was built with MPI) the candidates are spread over the ranks, one GPU per
// rank on each host, and rank 0 merges every rank's records into its database.
#pragma once

#include "runtime/Tuner.h"

namespace tessel {

/// Runs the search (on every rank under MPI); the exit status: 0 when at least one candidate
/// checked ok or all were measured before, 1 when every candidate failed.
int run_tune_command(TuneOptions options);

} // namespace tessel
