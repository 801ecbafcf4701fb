// The Comm backends (parallel/comm.h is the interface): mpi (started by mpirun) and gloo
// (torchrun-style environment), and make_comm(), which picks one from the flag, DSINFER_COMM or
// the launcher's environment. Only the command-line front end links them (and Open MPI, gloo).
#pragma once

#include <memory>
#include <string>

#include "parallel/comm.h"

namespace dsinfer {

// Open MPI world (MPI_COMM_WORLD); initializes MPI on first use and finalizes it when the last
// MpiComm goes away normally. Throws Error when dsinfer was built without MPI.
std::unique_ptr<Comm> make_mpi_comm();

// Open MPI world (see above); gloo: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT, rank 0 serving the
// rendezvous store; DSINFER_COMM_TIMEOUT (seconds, default 600) bounds the rendezvous and every
// collective except broadcast. Throws Error when dsinfer was built without gloo.
std::unique_ptr<Comm> make_gloo_comm();

// Whether this binary has the backend ("local" always; "mpi", "gloo" when built with them).
bool comm_backend_built(const std::string& name);

// Forces a backend ("local", "mpi", "gloo"; empty: choose automatically). Set by --comm.
void set_comm_backend(const std::string& name);

// The backend for this process: --comm, else DSINFER_COMM, else OMPI_COMM_WORLD_SIZE set -> mpi,
// WORLD_SIZE > 1 -> gloo, else local. Ranks other than 0 log only errors unless --debug.
std::unique_ptr<Comm> make_comm();

}  // namespace dsinfer
